"""Table entries, in the shape of rerun-sdk's ``TableEntry``.

Every write is a ``WriteTable`` command in the log, in parts if it is large
(``sdk._table_writes``). A write returns once Kafka has acknowledged it; the client's next read
waits until the projection has it (``sdk._writes``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import datafusion
import pyarrow as pa

from commands import entries, reads
from commands.table_writes import Batches, table_write
from events import TableWriteMode
from projector import DatasetKind, EntryKind, ProjectionReader, Table, table_rows, views
from sdk._connection import Connection
from sdk._dataset import DatasetEntry, companion_dataset
from sdk._entry import Entry
from sdk._operations import Operation


class TableEntry(Entry[Table]):
    """A table in the catalog: rows with a fixed Arrow schema, read with DataFusion, written with
    ``append``, ``overwrite`` and ``upsert``. A write returns once Kafka has acknowledged it, and
    every later read through the same client sees it (read-your-writes); a write the catalog
    refuses after that (the table deleted meanwhile) raises at the client's next read or
    ``client.flush()``."""

    _kind_name = "table"

    def _lookup(self, store: ProjectionReader, entry_id: uuid.UUID) -> Table | None:
        return store.table(entry_id)

    @property
    def kind(self) -> EntryKind:
        return EntryKind.TABLE

    @property
    def storage_url(self) -> str:
        """A registered table's Lance URL; a created table's ``url``, where the projector keeps a
        Lance copy of its rows, or without one ``strata://tables/<id>``: the rows themselves are
        in strata's log and projection."""
        return reads.table_url(self._seen)

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
        Operation.send(self._internal, self._id, entries.rename_table(self._seen, name)).wait()

    def delete(self) -> None:
        """Delete the table and its rows, and its hidden blueprint dataset; its name is free
        again, its id never reused.
        ``NotFoundError`` if it is already deleted."""
        Operation.send(self._internal, self._id, entries.delete_table(self._seen)).wait()

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
        write = table_write(self._current(settle=False), batches, named_params, mode)
        if write is not None:
            self._internal.submit_tracked(self._id, [write])


class SystemTableEntry(TableEntry):
    """The catalog's ``__entries`` table, as in Rerun: one row per live entry, hidden ones
    included (id, name, ``entry_kind``, times), read at each read; it cannot be written, renamed
    or deleted."""

    def _lookup(self, store: ProjectionReader, entry_id: uuid.UUID) -> Table:
        return views.ENTRIES_TABLE

    def blueprint_dataset(self) -> None:  # type: ignore[override]  # it has none
        return None


def table_entry(internal: Connection, record: Table) -> TableEntry:
    """The entry of a table record: the system table's own kind, or a ``TableEntry``."""
    return SystemTableEntry(internal, record) if record.system else TableEntry(internal, record)
