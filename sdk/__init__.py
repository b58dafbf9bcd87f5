"""The strata SDK: the client of a strata catalog, in the shape of Rerun's ``rerun.catalog``.

Owns the public surface (``CatalogClient``, ``DatasetEntry``, ``DatasetSelection``,
``TableEntry``, the operations and the errors; ``sdk.layer_commands`` for pipelines that send
what ``register`` would). Writes go through ``producers``, catalog reads come from the
``projector``'s store and views, and the recordings are read through ``recordings`` (rerun-sdk's
query engine); no domain rule lives here. Rerun's names are importable where strata has the same
thing (``OnDuplicateSegmentLayer``, ``DatasetView``), or are Rerun's own classes
(``ContentFilter``, ``RegistrationResult``, ``SegmentRegistrationResult``, the errors' bases),
so a notebook written for ``rerun.catalog`` needs only its imports and its connection line
changed.

Imports neither Spark, nor the web stack, nor a database driver it does not use; the stack that
runs the services is ``stack``, of which ``sdk.Server`` is a forward (``rerun.server`` sits
beside ``rerun.catalog`` the same way).
"""

from typing import Any

from events import OnDuplicate
from projector import Change, ChangeKind, EntryKind, Rejection, Tag
from sdk._client import CatalogClient, VersionInfo
from sdk._dataset import DatasetEntry
from sdk._dataset_reads import DatasetInfo, LayerInfo
from sdk._entry import EntryId
from sdk._operations import Operation, RegistrationOperation
from sdk._segment import Layer, Segment
from sdk._selection import DatasetSelection
from sdk._table_entry import TableEntry
from sdk._writes import WriteOutcome
from sdk.errors import (
    AlreadyExistsError,
    DeliveryError,
    EndpointRefusedError,
    EndpointUnavailableError,
    MissingExtraError,
    NotFoundError,
    ObjectStoreError,
    ProjectionTimeoutError,
    RecordingChangedError,
    RevisionConflictError,
    StoreUnavailableError,
    StrataError,
    WorkerError,
    WriteRefusedError,
)

OnDuplicateSegmentLayer = OnDuplicate
"""Rerun's name for ``OnDuplicate``."""
DatasetView = DatasetSelection
"""Rerun's former name for ``DatasetSelection``."""


def __getattr__(name: str) -> Any:
    """``ContentFilter`` and the registration results are rerun-sdk's own classes and ``Server``
    the stack's, each imported on first use: rerun-sdk is heavy, and the stack needs
    ``strata[projector]``."""
    if name in ("ContentFilter", "RegistrationResult", "SegmentRegistrationResult"):
        import rerun.catalog

        return getattr(rerun.catalog, name)
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
    "EndpointRefusedError",
    "EndpointUnavailableError",
    "EntryId",
    "EntryKind",
    "Layer",
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
    "Rejection",
    "RevisionConflictError",
    "Segment",
    "SegmentRegistrationResult",
    "Server",
    "StoreUnavailableError",
    "StrataError",
    "TableEntry",
    "Tag",
    "VersionInfo",
    "WorkerError",
    "WriteOutcome",
    "WriteRefusedError",
]
