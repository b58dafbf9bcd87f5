"""The strata SDK: the client of a strata catalog, in the shape of Rerun's ``rerun.catalog``.

Owns the public surface (``CatalogClient``, ``DatasetEntry``, ``DatasetSelection``,
``TableEntry``, the operations and the errors). Writes go through ``producers``, catalog reads
come from the ``projector``'s store and views, and the recordings' data is read with rerun-sdk's
query engine; no domain rule lives here. Rerun's names are importable where strata has the same
thing (``OnDuplicateSegmentLayer``, ``DatasetView``), so a notebook written for ``rerun.catalog``
needs only its imports and its connection line changed.

Imports neither Spark, nor the web stack, nor a database driver it does not use; the stack that
runs the services is ``stack``, of which ``sdk.Server`` is a forward (``rerun.server`` sits
beside ``rerun.catalog`` the same way).
"""

from typing import Any

from events import OnDuplicate
from projector import Change, ChangeKind
from sdk._client import CatalogClient, VersionInfo
from sdk._dataset import DatasetEntry, DatasetInfo, LayerInfo
from sdk._entry import EntryKind
from sdk._operations import (
    Operation,
    RegistrationOperation,
    RegistrationResult,
    SegmentRegistrationResult,
)
from sdk._selection import DatasetSelection
from sdk._table_entry import TableEntry
from sdk.errors import (
    AlreadyExistsError,
    DeliveryError,
    MissingExtraError,
    NotFoundError,
    ObjectStoreError,
    ProjectionTimeoutError,
    RecordingChangedError,
    StoreUnavailableError,
    StrataError,
)

OnDuplicateSegmentLayer = OnDuplicate
"""Rerun's name for ``OnDuplicate``."""
DatasetView = DatasetSelection
"""Rerun's former name for ``DatasetSelection``."""


def __getattr__(name: str) -> Any:
    """``ContentFilter`` is rerun-sdk's own class and ``Server`` the stack's, each imported on first
    use: rerun-sdk is heavy, and the stack needs ``strata[projector]``."""
    if name == "ContentFilter":
        from rerun.catalog import ContentFilter

        return ContentFilter
    if name == "Server":
        from stack.server import Server

        return Server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AlreadyExistsError",
    "CatalogClient",
    "Change",
    "ChangeKind",
    "ContentFilter",
    "DatasetEntry",
    "DatasetInfo",
    "DatasetSelection",
    "DatasetView",
    "DeliveryError",
    "EntryKind",
    "LayerInfo",
    "MissingExtraError",
    "NotFoundError",
    "ObjectStoreError",
    "OnDuplicate",
    "OnDuplicateSegmentLayer",
    "Operation",
    "ProjectionTimeoutError",
    "RecordingChangedError",
    "RegistrationOperation",
    "RegistrationResult",
    "SegmentRegistrationResult",
    "Server",
    "StoreUnavailableError",
    "StrataError",
    "TableEntry",
    "VersionInfo",
]
