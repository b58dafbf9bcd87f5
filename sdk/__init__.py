"""The strata SDK: a Rerun-style catalog client, the embedded server and the ``strata`` CLI.

Owns the public surface (``CatalogClient``, ``DatasetEntry``, ``DatasetSelection``, ``Server``,
the errors). Writes go through ``producers``, catalog reads come from the ``projector`` store, and
the recordings' data is read with rerun-sdk's query engine; no domain rule lives here. Rerun's
names are importable where strata has the same thing (``OnDuplicateSegmentLayer``,
``DatasetView``), so a notebook written for ``rerun.catalog`` needs only its imports and its
connection line changed.
"""

from typing import Any

from events import OnDuplicate
from projector import Change, ChangeKind
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
from sdk._selection import DatasetSelection
from sdk._server import Server
from sdk._table_entry import EntryKind, TableEntry
from sdk.errors import (
    AlreadyExistsError,
    DeliveryError,
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
    """``ContentFilter`` is rerun-sdk's own class, imported on first use: rerun-sdk is heavy."""
    if name == "ContentFilter":
        from rerun.catalog import ContentFilter

        return ContentFilter
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
]
