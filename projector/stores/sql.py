"""The projection store on a SQL database (``SqlStore``): the one object the projector writes
through (``projector.ports.ProjectionWriter``) and clients read through
(``projector.ports.ProjectionReader``), the same on both backends (SQLite, PostgreSQL).

It holds a backend's connection (``projector.stores.sql_database.Database``) and hands each of its
methods to the module that does that job:

- ``sql_fold_reads``: the fold's lookups and a batch's view read ahead in bulk;
- ``sql_commit``: the offsets, and the one transaction that commits a batch with its history;
- ``sql_client_reads``: what clients list and read of the current catalog;
- ``sql_point``: the catalog as of a point of the log;
- ``sql_contents``: every row at once, for snapshots and swaps.

The tables are in ``sql_schema``, the rows' encoding in ``sql_rows``, the history's rules in
``sql_history``, created tables' rows in ``sql_tables``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from projector.fold import FoldReader
from projector.model import (
    AssetScope,
    Change,
    Changes,
    Dataset,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    SearchIndex,
    Segment,
    Table,
    TablePart,
    Tag,
)
from projector.stores import sql_commit, sql_contents
from projector.stores.sql_client_reads import ClientReads
from projector.stores.sql_contents import Contents
from projector.stores.sql_database import Database
from projector.stores.sql_fold_reads import FoldReads
from projector.stores.sql_point import PointReader


class SqlStore:
    """The projection store on a SQL database: ``ProjectionWriter`` for the projector,
    ``ProjectionReader`` for clients. A backend opens its ``Database`` (see ``SqliteStore``,
    ``PostgresStore``); every method raises ``StoreUnavailableError`` for a store that cannot be
    reached, read or written."""

    location: str
    """Where the store is, for messages (a path, or a URL without its password)."""

    def __init__(self, database: Database, *, loading: bool = False) -> None:
        """``loading``: a store nothing reads until ``finish_loading`` (a rebuild's). Its commits
        leave out the layer table (``layer_chunks``), whose touched chunks ``finish_loading``
        writes once: a batch of replacements all over a dataset rewrites every chunk of it, a
        cost that grows with the store rather than the batch."""
        self._database = database
        self._deferred_chunks: set[tuple[str, int]] | None = set() if loading else None
        self._fold_reads = FoldReads(database)
        self._client_reads = ClientReads(database)
        self.location = database.location

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the store: a cheap check
        (no table is read) of whether anything needs reading again."""
        return self._database.data_version()

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        """Block until ``data_version()`` differs from ``version`` or ``timeout_secs`` have passed;
        return the data version."""
        return self._database.wait_for_commit(version, timeout_secs)

    def close(self) -> None:
        self._database.close()

    # -- the fold's reads (sql_fold_reads) ------------------------------------------------------

    def batch_view(self, records: Sequence[LogRecord]) -> FoldReader:
        """A view for folding ``records``: the outcomes, segments and layers they will look up
        are read in a few bulk queries instead of one query per record."""
        return self._fold_reads.batch_view(records)

    def segments_with_layers(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                             ) -> tuple[dict[tuple[uuid.UUID, str], Segment],
                                        dict[tuple[uuid.UUID, str, str], Layer]]:
        """Of ``wanted`` (dataset id: segment ids), the segments that exist, by (dataset id,
        segment id), and all their layers, by (dataset id, segment id, layer name); read in bulk."""
        return self._fold_reads.segments_with_layers(wanted)

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        return self._fold_reads.dataset(dataset_id)

    def dataset_by_name(self, name: str) -> Dataset | None:
        return self._fold_reads.dataset_by_name(name)

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        return self._fold_reads.segment(dataset_id, segment_id)

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        return self._fold_reads.layer(dataset_id, segment_id, layer_name)

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        return self._fold_reads.matching_layers(dataset_id, segment_ids, layer_names)

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        return self._fold_reads.asset_scope(dataset_id, segment_id)

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        return self._fold_reads.tag(dataset_id, name)

    def search_index(self, dataset_id: uuid.UUID, entity_path: str, component: str) -> SearchIndex | None:
        return self._fold_reads.search_index(dataset_id, entity_path, component)

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        """The dataset's search indexes, by entity path then component."""
        return self._fold_reads.search_indexes(dataset_id)

    def schema(self, digest: str) -> bytes | None:
        return self._fold_reads.schema(digest)

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The schemas the store holds of ``digests``, by digest."""
        return self._fold_reads.schemas(digests)

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return self._fold_reads.has_outcome(event_id)

    def table(self, table_id: uuid.UUID) -> Table | None:
        return self._fold_reads.table(table_id)

    def table_by_name(self, name: str) -> Table | None:
        return self._fold_reads.table_by_name(name)

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        return self._fold_reads.table_parts(table_id, write_id)

    # -- offsets and the atomic commit (sql_commit) ---------------------------------------------

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return sql_commit.next_offsets(self._database)

    def next_offset(self, topic: str, partition: int) -> int:
        return sql_commit.next_offset(self._database, topic, partition)

    def commit(self, changes: Changes, *, expected_offsets: dict[tuple[str, int], int]) -> None:
        """Write ``changes`` and their next offsets in one transaction.

        Raises ``StaleBatchError`` (and writes nothing) if the stored offsets are no longer
        ``expected_offsets``: another writer got there first.
        """
        sql_commit.commit(self._database, changes, expected_offsets=expected_offsets,
                          deferred_chunks=self._deferred_chunks)

    def finish_loading(self) -> None:
        """Write the chunks of the layer table that the commits of a store opened with
        ``loading=True`` touched; commits write their own from then on."""
        if self._deferred_chunks is not None:
            with self._database.write_transaction():
                sql_commit.rewrite_chunks(self._database, self._deferred_chunks)
            self._deferred_chunks = None

    # -- every row at once (sql_contents) -------------------------------------------------------

    def replace_contents(self, source: Contents) -> bool:
        """Make this store a copy of ``source`` (a store of either backend, that nothing writes
        meanwhile) in one transaction, if
        ``source`` has applied at least every record this store has; else change nothing and
        return False.

        Readers see the old contents or the new, never a mix. The copy is the only work done while
        this store is locked for writing: a projector writing to it waits for no more than that,
        and its next batch skips the records the new contents already hold.
        """
        return sql_contents.replace_contents(self._database, source)

    def contents_of(self, table: str) -> pa.Table:
        """Every row of ``table`` (one of ``TABLES``) as Arrow, by primary key."""
        return sql_contents.contents_of(self._database, table)

    def snapshot_tables(self) -> dict[str, pa.Table]:
        """Every table as Arrow, rows by primary key, all as of one commit."""
        return sql_contents.snapshot_tables(self._database)

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        """Every row of ``table`` (one of ``TABLES``), in its columns' order, by primary key."""
        return sql_contents.rows(self._database, table)

    def counts(self) -> dict[str, int]:
        """Rows per table (live datasets only), for summaries."""
        return sql_contents.counts(self._database)

    # -- the SDK's reads (sql_client_reads) -----------------------------------------------------

    def outcome(self, event_id: uuid.UUID) -> Outcome | None:
        return self._client_reads.outcome(event_id)

    def outcomes(self, event_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Outcome]:
        """The recorded outcomes of ``event_ids`` (those the projector has applied), by event id:
        a few statements however many there are."""
        return self._client_reads.outcomes(event_ids)

    def outcome_at(self, position: LogPosition) -> Outcome | None:
        """The outcome of the event at a log position, e.g. one a pipeline producer appended."""
        return self._client_reads.outcome_at(position)

    def datasets(self) -> list[Dataset]:
        """The live datasets (not the deleted ones), oldest first."""
        return self._client_reads.datasets()

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        return self._client_reads.segments(dataset_id)

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        return self._client_reads.layers(dataset_id)

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        """``layers`` as one Arrow table (``projector.layer_table.LAYER_COLUMNS``), read from the
        dataset's chunks without converting its rows to Python values."""
        return self._client_reads.layer_table(dataset_id)

    def segment_layer_table(self, dataset_id: uuid.UUID, segment_id: str) -> pa.Table:
        """The segment's rows of ``layer_table``, from the one chunk that holds its position."""
        return self._client_reads.segment_layer_table(dataset_id, segment_id)

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        return self._client_reads.asset_scopes(dataset_id)

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        return self._client_reads.tags(dataset_id)

    def tables(self) -> list[Table]:
        """The live tables (not the deleted ones), oldest first."""
        return self._client_reads.tables()

    def table_data(self, table: Table) -> pa.Table:
        """The rows of a created table, in its schema (field metadata included)."""
        return self._client_reads.table_data(table)

    def rejections(self) -> list[Rejection]:
        return self._client_reads.rejections()

    def changes(self, after: tuple[int, int] = (-1, 0), *, entry_id: uuid.UUID | None = None,
                limit: int = 1000) -> list[Change]:
        """At most ``limit`` entries of the change feed that come after the cursor ``after``
        ((offset, seq); the default is before the first), in feed order; of one entry if
        ``entry_id`` is given."""
        return self._client_reads.changes(after, entry_id=entry_id, limit=limit)

    # -- the past (sql_point) -------------------------------------------------------------------

    def at(self, offset: int) -> PointReader:
        """The catalog as of the log prefix ``[0, offset)`` (see ``PointReader``)."""
        return PointReader(self, self._database, offset)
