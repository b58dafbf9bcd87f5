"""How long the SDK's calls wait for the projection, unless told otherwise: the command core's
default (``commands.catalog``). The waiting itself is the projection store's
(``projector.wait_for_positions``)."""

from commands.catalog import DEFAULT_TIMEOUT_SECS

__all__ = ["DEFAULT_TIMEOUT_SECS"]
