"""What a table write sends: the caller's rows (Arrow data or named columns) in the table's
schema, checked by the catalog's rules (``projector.table_rows``), as ``WriteTable`` commands.

A write larger than one Kafka record is sent as parts of at most ``MAX_PART_BYTES`` of Arrow IPC
each, sharing a write id; the projector applies it when the last part arrives, all of it or none
of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeAlias

import pyarrow as pa

from commands.entries import refuse_system
from commands.log import Write
from events import TableWriteMode, WriteTable
from projector import Table, table_rows

MAX_PART_BYTES = 768 * 1024
"""Arrow IPC bytes per ``WriteTable`` event, well under Kafka's default 1 MB message limit."""

Batches: TypeAlias = (pa.RecordBatch | pa.RecordBatchReader | pa.Table | Sequence[pa.RecordBatch]
                      | Sequence[Sequence[pa.RecordBatch]])
"""What a write takes: a RecordBatch, a RecordBatchReader, a Table, a list of batches or of lists
of them."""


def table_write(table: Table, batches: Batches | None, named_params: dict[str, Any],
                mode: TableWriteMode) -> Write | None:
    """The write of ``batches`` or of the columns ``named_params`` to ``table`` in ``mode``, or
    None when there is nothing to write (no rows, unless the mode is overwrite). ``ValueError``
    for a registered (Lance) table, an upsert to a table without an index column, rows that do not
    fit the table's schema or lack an index value, or a single row larger than a part;
    ``TypeError`` for data of another kind."""
    refuse_system(table, f"written ({mode})")
    if table.registered:
        raise ValueError(f"table {table.name!r} is the Lance table at {table.storage_url}, "
                         "registered to be read: strata writes only the tables it created")
    schema = table_rows.table_schema(table.arrow_schema)
    index = table_rows.index_column(schema)
    if mode is TableWriteMode.UPSERT and index is None:
        raise ValueError(f"table {table.name!r} has no index column: upsert needs a field with "
                         "metadata rerun:is_table_index = true; use append or overwrite")
    rows = _from_named(schema, named_params) if batches is None else _from_batches(schema, batches)
    if rows is None or (rows.num_rows == 0 and mode is not TableWriteMode.OVERWRITE):
        return None  # nothing to write, as in Rerun
    rows = table_rows.check_rows(schema, rows)
    if index is not None:
        table_rows.check_index(rows, index)
    parts = _parts(rows)
    write_id = uuid.uuid4().hex if len(parts) > 1 else ""
    commands = tuple(WriteTable(mode, part, write_id, n, len(parts)) for n, part in enumerate(parts))
    rows_text = f"{rows.num_rows} row{'s' * (rows.num_rows != 1)}"
    return Write(f"{mode} of {rows_text} to table {table.name!r}", commands)


def _from_batches(schema: pa.Schema, batches: Batches) -> pa.Table | None:
    if isinstance(batches, pa.RecordBatchReader):
        found = list(batches)
    elif isinstance(batches, pa.Table):
        found = batches.to_batches()
    elif isinstance(batches, pa.RecordBatch):
        found = [batches]
    elif isinstance(batches, Sequence) and not isinstance(batches, str | bytes):
        found = []
        for item in batches:
            if isinstance(item, pa.RecordBatch):
                found.append(item)
            elif isinstance(item, Sequence) and all(isinstance(b, pa.RecordBatch) for b in item):
                found.extend(item)
            else:
                raise TypeError(f"Unexpected type: {type(item)}: pass RecordBatches, lists of them, "
                                "a RecordBatchReader or named columns")
    else:
        raise TypeError(f"Unexpected type: {type(batches)}: pass RecordBatches, lists of them, a "
                        "RecordBatchReader or named columns")
    if not found:
        return None
    return pa.Table.from_batches([_with_all_columns(schema, b) for b in found])


def _with_all_columns(schema: pa.Schema, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` in the table's column order, a nullable column it lacks filled with nulls."""
    extra = [n for n in batch.schema.names if n not in schema.names]
    if extra:
        raise ValueError(f"the rows do not match the table's schema: columns {extra} are not in the "
                         f"table, whose columns are {schema.names}")
    columns, fields = [], []
    for field in schema:
        if field.name in batch.schema.names:
            columns.append(batch.column(field.name))
            fields.append(batch.schema.field(field.name))
        elif field.nullable:
            columns.append(pa.nulls(batch.num_rows, field.type))
            fields.append(field)
        else:
            raise ValueError(f"the rows do not match the table's schema: missing column {field.name!r} "
                             f"({field.type}), which may not be null")
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def _from_named(schema: pa.Schema, named: dict[str, Any]) -> pa.Table | None:
    """Named columns of Python values, in the table's types, as rerun-sdk builds them."""
    arrays: dict[str, pa.Array] = {}
    for name, value in named.items():
        if name not in schema.names:
            raise ValueError(f"Column {name} does not exist in table (its columns: {schema.names})")
        kind = schema.field(name).type
        values = [value] if isinstance(value, str) else value
        try:
            arrays[name] = pa.array(values, type=kind)
        except TypeError:
            arrays[name] = pa.array([values], type=kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ValueError(f"column {name!r} of type {kind} cannot hold {value!r}: {exc}") from None
    lengths = {len(a) for a in arrays.values()}
    if len(lengths) > 1:
        counts = {n: len(a) for n, a in arrays.items()}
        raise ValueError(f"Columns have mismatched number of rows: {counts}")
    if not arrays or not lengths.pop():
        return None
    batch = pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays))
    return pa.Table.from_batches([_with_all_columns(schema, batch)])


def _parts(rows: pa.Table) -> list[bytes]:
    """``rows`` as Arrow IPC streams of at most ``MAX_PART_BYTES`` each (a single row larger than
    that is a ``ValueError``)."""
    data = table_rows.to_ipc(rows)
    if len(data) <= MAX_PART_BYTES:
        return [data]
    if rows.num_rows == 1:
        raise ValueError(f"one row takes {len(data)} bytes, more than the {MAX_PART_BYTES} a table row "
                         "may have: keep large values in files and store their URLs")
    count = min(rows.num_rows, -(-len(data) * 11 // (MAX_PART_BYTES * 10)))  # 10% to spare
    step = -(-rows.num_rows // count)
    return [part for start in range(0, rows.num_rows, step) for part in _parts(rows.slice(start, step))]
