"""How long the SDK's calls wait for the projection, unless told otherwise. The waiting itself is
the projection store's (``projector.wait_for_positions``)."""

DEFAULT_TIMEOUT_SECS = 60.0
"""How long a call waits for the projection to apply its events, unless told otherwise."""
