"""The projection: the pure fold of command events into the catalog, and the store it lands in.

Owns every domain rule (entry names, duplicates, last-writer-wins, schema merges, table rows) in ``fold``, the
``ProjectionStore`` interface and its SQLite implementation. Must not import pyspark or
confluent_kafka (tests/unit/test_boundaries.py enforces it).
"""

from projector.fold import CatalogView, InvalidCommand, Refused, fold, log_order
from projector.model import (
    Blueprint,
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
from projector.sqlite_store import SqliteStore
from projector.store import ProjectionStore, StaleBatchError, apply_batch

__all__ = [
    "Blueprint",
    "CatalogView",
    "Changes",
    "Dataset",
    "InvalidCommand",
    "Layer",
    "LogPosition",
    "LogRecord",
    "Outcome",
    "ProjectionStore",
    "Refused",
    "Rejection",
    "SchemaRef",
    "Segment",
    "SqliteStore",
    "StaleBatchError",
    "Status",
    "Table",
    "TablePart",
    "TableWrite",
    "apply_batch",
    "fold",
    "log_order",
]
