"""What the SDK adds to ``commands.search`` for the seed's search surface of a dataset
(``create_vector_index``, ``create_fts_index``, ``search_vector``, ``search_fts``,
``list_indexes``, ``delete_indexes``, ``do_maintenance``): Rerun's ways of naming a column and a
timeline, the selection a search is narrowed to, and the wait for an index command's outcome.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import datafusion
import pyarrow as pa

from recordings import rerun_schema
from sdk._connection import Connection
from sdk._operations import Operation


def column_of(schema: pa.Schema, column: Any, *, known: bool = True) -> tuple[str, str]:
    """The entity path and component of ``column`` in a dataset of Arrow ``schema``: what
    rerun-sdk's ``Schema.column_for_selector`` takes (``"/camera:embedding"``, a
    ``ComponentColumnSelector``, a descriptor from ``dataset.schema()``). ``LookupError`` for a
    column the dataset does not have, ``ValueError`` for a selector of the wrong form. Without
    ``known``, a column the schema no longer has (its layers are gone) is read from the
    selector's text."""
    if hasattr(column, "entity_path") and hasattr(column, "component"):
        return str(column.entity_path), str(column.component)
    if isinstance(column, str) and column in schema.names:  # a column's own name: no Schema needed
        meta = schema.field(column).metadata or {}
        if b"rerun:entity_path" in meta and b"rerun:component" in meta:
            return meta[b"rerun:entity_path"].decode(), meta[b"rerun:component"].decode()
    try:
        descriptor = rerun_schema(schema).column_for_selector(column)
    except LookupError:
        if known or not isinstance(column, str) or ":" not in column:
            raise
        entity_path, component = column.split(":", 1)
        return "/" + entity_path.strip("/"), component
    return str(descriptor.entity_path), str(descriptor.component)


def timeline_of(time_index: Any) -> str:
    """The timeline ``time_index`` names: a name, or an index column's selector or descriptor."""
    name = getattr(time_index, "name", time_index)
    if not isinstance(name, str) or not name:
        raise ValueError(f"time_index={time_index!r}: name a timeline of the dataset, e.g. 'frame'")
    return name


def send(internal: Connection, dataset_id: uuid.UUID, write: Any, timeout_secs: float | None) -> None:
    """Send an index command and wait for its outcome (its refusal raised)."""
    Operation.send(internal, dataset_id, write).wait(timeout_secs)


def selected_ids(segment_table: Callable[[], datafusion.DataFrame], segment_ids: Sequence[str] | None,
                 where: Any) -> list[str] | None:
    """The segments a search is narrowed to: ``segment_ids`` (None: all), and of those the rows of
    the segment table ``where`` keeps (a DataFusion expression or SQL text)."""
    if where is None:
        return None if segment_ids is None else list(segment_ids)
    table = segment_table().filter(where)
    ids = pa.table(table.select("rerun_segment_id")).column("rerun_segment_id").to_pylist()
    return ids if segment_ids is None else [s for s in ids if s in set(segment_ids)]
