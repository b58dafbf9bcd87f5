"""The projection: the pure fold of command events into the catalog, and the store it lands in.

Owns every domain rule (entry names, duplicates, last-writer-wins, schema merges, table rows) in
``fold`` and the modules beside it (``merge``, ``schemas``, ``table_rows``), which apply one record
at a time over the batch so far (``overlay``); ``batch_fold`` makes the same changes with most
registrations folded as columns (``layer_runs``); the store's ports
(``ports``: ``ProjectionWriter`` for the projector, ``ProjectionReader`` for clients); applying a
batch (``apply``); the read models clients share (``views``), the change feed follower
(``feed``) and waiting until a store has passed log positions (``waiting``); and the backends
(``stores``: SQLite, PostgreSQL), each imported only when a location names it. Imports only
``events`` of strata, and neither pyspark nor confluent_kafka (tests/unit/test_boundaries.py
enforces it).
"""

from projector.apply import apply_batch
from projector.fold import FoldReader, InvalidCommand, Refused, fold, log_order
from projector.model import (
    AssetScope,
    Change,
    ChangeKind,
    Changes,
    Dataset,
    DatasetKind,
    EntryKind,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    SchemaRef,
    SearchIndex,
    Segment,
    Status,
    Table,
    TablePart,
    TableWrite,
    Tag,
    companion_id,
    companion_name,
)
from projector.ports import ProjectionReader, ProjectionWriter, StaleBatchError, StoreUnavailableError
from projector.stores import open_store
from projector.waiting import PositionLike, ProjectionTimeoutError, wait_for_positions

__all__ = [
    "AssetScope",
    "ProjectionReader",
    "FoldReader",
    "Change",
    "ChangeKind",
    "Changes",
    "Dataset",
    "DatasetKind",
    "EntryKind",
    "InvalidCommand",
    "Layer",
    "LogPosition",
    "LogRecord",
    "Outcome",
    "PositionLike",
    "ProjectionTimeoutError",
    "ProjectionWriter",
    "Refused",
    "Rejection",
    "SchemaRef",
    "SearchIndex",
    "Segment",
    "StaleBatchError",
    "StoreUnavailableError",
    "Status",
    "Table",
    "TablePart",
    "TableWrite",
    "Tag",
    "apply_batch",
    "companion_id",
    "companion_name",
    "fold",
    "log_order",
    "open_store",
    "wait_for_positions",
]
