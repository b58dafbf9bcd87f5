"""Table entries, in the shape of rerun-sdk's ``TableEntry``.

Every write is a ``WriteTable`` command in the log. A write larger than one Kafka record is sent
as parts of at most ``MAX_PART_BYTES`` of Arrow IPC each, sharing a write id; the projector
applies it when the last part arrives, all of it or none of it. A write returns once Kafka has
acknowledged it; the client's next read waits until the projection has it (``sdk._writes``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeAlias

import datafusion
import pyarrow as pa

from events import DeleteTable, RenameTable, TableWriteMode, WriteTable
from events.names import check_table_name
from projector import CatalogReader, DatasetKind, EntryKind, Table, table_rows, views
from sdk._connection import Connection, Write
from sdk._dataset import DatasetEntry, companion_dataset
from sdk._entry import Entry
from sdk._operations import Operation

MAX_PART_BYTES = 768 * 1024
"""Arrow IPC bytes per ``WriteTable`` event, well under Kafka's default 1 MB message limit."""

Batches: TypeAlias = (pa.RecordBatch | pa.RecordBatchReader | pa.Table | Sequence[pa.RecordBatch]
                      | Sequence[Sequence[pa.RecordBatch]])
"""What a write takes: a RecordBatch, a RecordBatchReader, a Table, a list of batches or of lists
of them."""


class TableEntry(Entry[Table]):
    """A table in the catalog: rows with a fixed Arrow schema, read with DataFusion, written with
    ``append``, ``overwrite`` and ``upsert``. A write returns once Kafka has acknowledged it, and
    every later read through the same client sees it (read-your-writes); a write the catalog
    refuses after that (the table deleted meanwhile) raises at the client's next read or
    ``client.flush()``."""

    _kind_name = "table"

    def _lookup(self, store: CatalogReader, entry_id: uuid.UUID) -> Table | None:
        return store.table(entry_id)

    @property
    def kind(self) -> EntryKind:
        return EntryKind.TABLE

    @property
    def storage_url(self) -> str:
        """A registered table's Lance URL; a created table's ``url``, where the projector keeps a
        Lance copy of its rows, or without one ``strata://tables/<id>``: the rows themselves are
        in strata's log and projection."""
        return self._seen.storage_url or f"strata://tables/{self._id}"

    def blueprint_dataset(self) -> DatasetEntry:
        """The hidden dataset of the table's blueprints, one segment per ``.rbl``; deleted with
        the table. ``NotFoundError`` if it was deleted on its own."""
        return companion_dataset(self._internal, self._id, DatasetKind.BLUEPRINT)

    def arrow_schema(self) -> pa.Schema:
        """The table's Arrow schema, with its field metadata (the index marker among them)."""
        return table_rows.table_schema(self._current().arrow_schema)

    # -- entry lifecycle ----------------------------------------------------------------------

    def set_name(self, name: str) -> None:
        """Rename the table. ``AlreadyExistsError`` if an entry has the name, ``ValueError`` for
        an invalid one (nothing is sent)."""
        check_table_name(name)
        Operation.submit(self._internal, self._id, RenameTable(name), f"renaming table to {name!r}").wait()

    def delete(self) -> None:
        """Delete the table and its rows, and its hidden blueprint dataset; its name is free
        again, its id never reused.
        ``NotFoundError`` if it is already deleted."""
        Operation.submit(self._internal, self._id, DeleteTable(),
                         f"deleting table {self._seen.name!r}").wait()

    # -- reads --------------------------------------------------------------------------------

    def as_of(self, point: int | datetime) -> TableEntry:
        """The table as the catalog had it at ``point``: a log offset (the catalog the records
        before it make) or a timezone-aware ``datetime`` (the records produced up to then). Its
        ``reader()`` gives the rows of that point, in the order a table rebuilt from those records
        has; a write through it is a ``ValueError``. ``NotFoundError`` if the table did not exist
        then, ``ValueError`` for an offset past the end of the log.

        Examples:
            >>> table.as_of(1200).reader().to_arrow_table()  # doctest: +SKIP
        """
        view = self._internal.at(point)
        return TableEntry(view, self._record_at(view))

    def reader(self) -> datafusion.DataFrame:
        """The table's rows as a DataFrame of the client's ``ctx``, in write order: appended rows
        after the earlier ones, a row an upsert replaced at the end."""
        return self._internal.dataframe(self._internal.table_data(self._current()))

    def to_arrow_reader(self) -> pa.RecordBatchReader:
        data = self._internal.table_data(self._current())
        return pa.RecordBatchReader.from_batches(data.schema, data.to_batches())

    # -- writes -------------------------------------------------------------------------------

    def append(self, batches: Batches | None = None, **named_params: Any) -> None:
        """Add rows: Arrow data (a RecordBatch, a list of them, a list of lists as
        ``DataFrame.collect()`` returns, a RecordBatchReader or a Table) or named columns
        (``table.append(id=[1, 2], label=["a", "b"])``). Columns the rows lack are null (a
        column the schema declares non-nullable must be given); a column of another type or not
        in the table is a ``ValueError`` naming it, and nothing is written."""
        self._write(batches, named_params, TableWriteMode.APPEND)

    def overwrite(self, batches: Batches | None = None, **named_params: Any) -> None:
        """Replace every row with these (see ``append`` for what they may be)."""
        self._write(batches, named_params, TableWriteMode.OVERWRITE)

    def upsert(self, batches: Batches | None = None, **named_params: Any) -> None:
        """Rows whose index value (the column with metadata ``rerun:is_table_index = true``) is
        in the table replace those rows, which move to the end; the others are appended. Of rows
        in one call sharing an index value, the last wins. ``ValueError`` if the table has no
        index column or a row has no index value; nothing is sent."""
        self._write(batches, named_params, TableWriteMode.UPSERT)

    def _write(self, batches: Batches | None, named_params: dict[str, Any], mode: TableWriteMode) -> None:
        if batches is not None and named_params:
            raise TypeError("Cannot pass both batches and named parameters. Use one or the other.")
        table = self._current(settle=False)
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
            return  # nothing to write, as in Rerun
        rows = table_rows.check_rows(schema, rows)
        if index is not None:
            table_rows.check_index(rows, index)
        parts = _parts(rows)
        write_id = uuid.uuid4().hex if len(parts) > 1 else ""
        commands = tuple(WriteTable(mode, part, write_id, n, len(parts)) for n, part in enumerate(parts))
        rows_text = f"{rows.num_rows} row{'s' * (rows.num_rows != 1)}"
        self._internal.submit(self._id, [Write(f"{mode} of {rows_text} to table {table.name!r}", commands)])


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


class SystemTableEntry(TableEntry):
    """The catalog's ``__entries`` table, as in Rerun: one row per live entry, hidden ones
    included (id, name, ``entry_kind``, times), read at each read; it cannot be written, renamed
    or deleted."""

    def _lookup(self, store: CatalogReader, entry_id: uuid.UUID) -> Table:
        return views.ENTRIES_TABLE

    @property
    def storage_url(self) -> str:
        return ""

    def blueprint_dataset(self) -> None:  # type: ignore[override]  # it has none
        return None

    def set_name(self, name: str) -> None:
        self._refuse(f"renamed to {name!r}")

    def delete(self) -> None:
        self._refuse("deleted")

    def _write(self, batches: Batches | None, named_params: dict[str, Any], mode: TableWriteMode) -> None:
        self._refuse(f"written ({mode})")

    def _refuse(self, what: str) -> None:
        raise ValueError(f"{self._seen.name!r} is the catalog's system table, listing its entries: it "
                         f"cannot be {what}")


def table_entry(internal: Connection, record: Table) -> TableEntry:
    """The entry of a table record: the system table's own kind, or a ``TableEntry``."""
    return SystemTableEntry(internal, record) if record.system else TableEntry(internal, record)
