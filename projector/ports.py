"""The ports between the projection and where it is stored: the projector writes through
``ProjectionWriter``, clients (the SDK, the dashboard, the changelog relay) read through
``ProjectionReader``; and the errors a store raises."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

import pyarrow as pa

from events import StrataError
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
    Tag,
)


class ProjectionWriter(FoldReader, Protocol):
    """The projector's port: the fold's reads (``FoldReader``) and one atomic commit per batch."""

    def batch_view(self, records: Sequence[LogRecord]) -> FoldReader:
        """The view to fold ``records`` over; a store may read what they need in bulk."""
        ...

    def next_offsets(self) -> dict[tuple[str, int], int]:
        """The offset after the last applied record, per (topic, partition)."""
        ...

    def commit(self, changes: Changes, *, expected_offsets: dict[tuple[str, int], int]) -> None:
        """Write ``changes`` and their next offsets in one transaction.

        Raises ``StaleBatchError`` (and writes nothing) if the stored offsets are no longer
        ``expected_offsets``: another writer got there first.
        """
        ...


class ProjectionReader(Protocol):
    """The clients' port: what the SDK and the CLI read. A client never writes the store."""

    location: str
    """Where the store is, for messages: a path, or a URL without its password."""

    def next_offsets(self) -> dict[tuple[str, int], int]: ...

    def data_version(self) -> int:
        """A number that changes whenever the projector commits."""
        ...

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        """Block until ``data_version()`` differs from ``version`` or the timeout; return it."""
        ...

    def outcome(self, event_id: uuid.UUID) -> Outcome | None: ...

    def outcomes(self, event_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Outcome]:
        """The outcomes recorded for those of ``event_ids`` the projector has applied."""
        ...

    def outcome_at(self, position: LogPosition) -> Outcome | None: ...

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None: ...

    def dataset_by_name(self, name: str) -> Dataset | None: ...

    def datasets(self) -> list[Dataset]:
        """The live datasets, hidden ones too (``Dataset.hidden``), oldest first."""
        ...

    def segments_with_layers(self, wanted: Mapping[uuid.UUID, Iterable[str]]
                             ) -> tuple[dict[tuple[uuid.UUID, str], Segment],
                                        dict[tuple[uuid.UUID, str, str], Layer]]:
        """Of ``wanted`` (dataset id: segment ids), the segments that exist, by (dataset id,
        segment id), and all their layers, by (dataset id, segment id, layer name); read in bulk."""
        ...

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        """In registration order of their first layer."""
        ...

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        """Grouped by segment (in ``segments`` order), each segment's layers in registration order."""
        ...

    def layer_table(self, dataset_id: uuid.UUID) -> pa.Table:
        """``layers`` as one Arrow table (``projector.layer_table.LAYER_COLUMNS``)."""
        ...

    def segment_layer_table(self, dataset_id: uuid.UUID, segment_id: str) -> pa.Table:
        """The rows of ``layer_table`` of one segment (none if it has no layers), read without
        the rest of the dataset."""
        ...

    def asset_scopes(self, dataset_id: uuid.UUID) -> list[AssetScope]:
        """The scopes of an asset dataset's assets that have one, by segment id."""
        ...

    def tags(self, dataset_id: uuid.UUID) -> list[Tag]:
        """A dataset's tags, by offset then name."""
        ...

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None: ...

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        """A dataset's search indexes, by entity path then component."""
        ...

    def schemas(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The schemas the store holds of ``digests``, by digest."""
        ...

    def table(self, table_id: uuid.UUID) -> Table | None: ...

    def table_by_name(self, name: str) -> Table | None: ...

    def tables(self) -> list[Table]:
        """The live tables, oldest first."""
        ...

    def table_data(self, table: Table) -> pa.Table: ...

    def rejections(self) -> list[Rejection]: ...

    def changes(self, after: tuple[int, int] = (-1, 0), *, entry_id: uuid.UUID | None = None,
                limit: int = 1000) -> list[Change]:
        """At most ``limit`` entries of the change feed after the cursor ``after`` ((offset,
        seq)), in feed order; only those of one dataset or table if ``entry_id`` is given."""
        ...

    def at(self, offset: int) -> ProjectionReader:
        """The catalog as of the log prefix ``[0, offset)``, read from the store's history: what a
        store rebuilt from those records would answer. Its ``next_offsets`` is the point."""
        ...

    def close(self) -> None: ...


class StaleBatchError(StrataError, RuntimeError):
    """The store moved on while a batch was being folded; the batch was not committed."""


class StoreUnavailableError(StrataError, RuntimeError):
    """The store could not be opened, read or written: a read-only or full disk, a missing
    file or directory, a lock held too long, a PostgreSQL server down, unreachable or refusing
    the credentials. Nothing of the batch at hand was committed; once the fault is
    fixed, a restarted projector resumes from the store's offsets."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"store {path}: {reason}")
        self.path = path
        self.reason = reason
