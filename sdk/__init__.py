"""The strata SDK: a Rerun-style catalog client, the embedded server and the ``strata`` CLI.

Owns the public surface (``CatalogClient``, ``DatasetEntry``, ``Server``, the errors). Writes go
through ``producers``, reads come from the ``projector`` store; no domain rule lives here.
"""

from events import OnDuplicate
from sdk._catalog import (
    CatalogClient,
    DatasetEntry,
    DatasetInfo,
    LayerInfo,
    Operation,
    RegistrationOperation,
    RegistrationResult,
    SegmentRegistrationResult,
)
from sdk._server import Server
from sdk.errors import (
    AlreadyExistsError,
    DeliveryError,
    NotFoundError,
    ProjectionTimeoutError,
    StrataError,
)

__all__ = [
    "AlreadyExistsError",
    "CatalogClient",
    "DatasetEntry",
    "DatasetInfo",
    "DeliveryError",
    "LayerInfo",
    "NotFoundError",
    "OnDuplicate",
    "Operation",
    "ProjectionTimeoutError",
    "RegistrationOperation",
    "RegistrationResult",
    "SegmentRegistrationResult",
    "Server",
    "StrataError",
]
