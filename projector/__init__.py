"""The projection: the pure fold of command events into the catalog, and the store it lands in.

Owns every domain rule (entry names, duplicates, last-writer-wins, schema merges, table rows) in
``fold``, the store's ports (``ProjectionWriter``, ``CatalogReader``) and their SQLite and
PostgreSQL backends. Must not import pyspark or confluent_kafka (tests/unit/test_boundaries.py enforces it).
"""

from projector.backends import open_store
from projector.fold import CatalogView, InvalidCommand, Refused, fold, log_order
from projector.model import (
    Blueprint,
    Change,
    ChangeKind,
    Changes,
    Dataset,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    SchemaRef,
    Segment,
    Status,
    Table,
    TablePart,
    TableWrite,
)
from projector.sql_store import SqlStore
from projector.sqlite_store import SqliteStore
from projector.store import (
    CatalogReader,
    ProjectionWriter,
    StaleBatchError,
    StoreUnavailableError,
    apply_batch,
)

__all__ = [
    "Blueprint",
    "CatalogReader",
    "CatalogView",
    "Change",
    "ChangeKind",
    "Changes",
    "Dataset",
    "InvalidCommand",
    "Layer",
    "LogPosition",
    "LogRecord",
    "Outcome",
    "ProjectionWriter",
    "Refused",
    "Rejection",
    "SchemaRef",
    "Segment",
    "SqlStore",
    "SqliteStore",
    "StaleBatchError",
    "StoreUnavailableError",
    "Status",
    "Table",
    "TablePart",
    "TableWrite",
    "apply_batch",
    "fold",
    "log_order",
    "open_store",
]
