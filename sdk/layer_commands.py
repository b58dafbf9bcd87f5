"""What registering a recording as a layer sends, for a pipeline producing its own events for
recordings (with ``producers``): ``commands.layer_commands``, under the name the SDK has always
given it."""

from commands.layer_commands import layer_commands

__all__ = ["layer_commands"]
