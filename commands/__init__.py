"""What a write is, once, for every client: a request becomes the recordings' facts
(``recordings``, read on the caller's workers), then command events built and checked by the
fold's own rules (``projector.registration``), then appended to the log in one batch
(``CommandLog``); their outcomes are read by their place in the log, after one wait by log
position (``projector.wait_for_positions``). ``sdk`` keeps Rerun's shape over it, and an
endpoint's calls share one ``CommandLog`` with the SDK client they serve.

Imports neither ``sdk`` nor ``protocol`` (nor anything above them), nor Spark.
"""

from commands.catalog import DEFAULT_TIMEOUT_SECS, Catalog
from commands.errors import AlreadyExistsError, RevisionConflictError, outcome_error
from commands.layer_commands import layer_commands
from commands.log import CommandLog, Horizon, Submitted, Write
from commands.registration import (
    Properties,
    Registered,
    Request,
    prefix_request,
    register,
    request,
    unregister,
    writes_for,
)

__all__ = [
    "DEFAULT_TIMEOUT_SECS",
    "AlreadyExistsError",
    "Catalog",
    "RevisionConflictError",
    "outcome_error",
    "CommandLog",
    "Horizon",
    "Properties",
    "Registered",
    "Request",
    "Submitted",
    "Write",
    "layer_commands",
    "prefix_request",
    "register",
    "request",
    "unregister",
    "writes_for",
]
