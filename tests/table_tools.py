"""What the table tests share: a table schema with an index column as Rerun marks one, batches of
it, and the rows and fields of a table in comparable form."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa

INDEX = {b"rerun:is_table_index": b"true"}
LABELS = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata=INDEX),
                    pa.field("label", pa.string(), metadata={b"unit": b"text"}),
                    pa.field("score", pa.float64())])
"""An index column, a column with metadata of its own and a nullable one."""


def batch(ids: list[int], labels: list[str], scores: list[float] | None = None) -> pa.RecordBatch:
    """Rows of ``LABELS``; a row's score is its id unless ``scores`` says."""
    scores = [float(i) for i in ids] if scores is None else scores
    return pa.RecordBatch.from_pydict({"id": ids, "label": labels, "score": scores}, schema=LABELS)


def unique(prefix: str) -> str:
    """An entry name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def rows(table: Any) -> list[tuple[Any, ...]]:
    """A table entry's rows (strata's or Rerun's), sorted."""
    return sorted(tuple(row.values()) for row in table.reader().to_arrow_table().to_pylist())


def fields(schema: pa.Schema) -> list[tuple[str, pa.DataType, bool, dict[bytes, bytes]]]:
    """The fields as a user declares them; Rerun adds schema-level metadata of its own
    (``sorbet:version``), which is left out."""
    return [(f.name, f.type, f.nullable, dict(f.metadata or {})) for f in schema]
