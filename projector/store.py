"""The ports between the projection and where it is stored: the projector writes through
``ProjectionWriter``, clients read through ``CatalogReader``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import pyarrow as pa

from events import StrataError
from projector.fold import CatalogView, fold
from projector.model import (
    Blueprint,
    Change,
    Changes,
    Dataset,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    Segment,
    Table,
)


class ProjectionWriter(CatalogView, Protocol):
    """The projector's port: the fold's reads (``CatalogView``) and one atomic commit per batch."""

    def batch_view(self, records: Sequence[LogRecord]) -> CatalogView:
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


class CatalogReader(Protocol):
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

    def outcome_at(self, position: LogPosition) -> Outcome | None: ...

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None: ...

    def dataset_by_name(self, name: str) -> Dataset | None: ...

    def datasets(self) -> list[Dataset]:
        """The live datasets, oldest first."""
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

    def blueprints(self, dataset_id: uuid.UUID) -> list[Blueprint]:
        """In registration order."""
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

    def close(self) -> None: ...


FEED_PAGE = 1000
"""Change feed entries read from the store at a time."""


def follow_pages(store: CatalogReader, after: tuple[int, int], *, entry_id: uuid.UUID | None = None,
                 timeout_secs: float | None = None) -> Iterator[list[Change]]:
    """The change feed after the cursor ``after``, in pages in feed order, each entry once; then,
    as the projector commits more, those. Ends once ``timeout_secs`` pass with nothing new
    (``None``: never)."""
    while True:
        version = store.data_version()  # read first: a commit after the read below wakes the wait
        page = store.changes(after, entry_id=entry_id, limit=FEED_PAGE)
        if page:
            yield page
            after = page[-1].cursor
            continue
        deadline = None if timeout_secs is None else time.monotonic() + timeout_secs
        while True:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return
            if store.wait_for_commit(version, left) != version:
                break


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


COMMIT_ATTEMPTS = 3
"""Folds of one batch, at most, when the store moves on during the fold (a ``strata replay
--swap`` replacing its contents): each fold starts again from the store's new state."""


def apply_batch(store: ProjectionWriter, records: Iterable[LogRecord]) -> Changes:
    """Fold the records the store has not seen yet and commit the result atomically.

    Records below a partition's stored next offset were committed by an earlier run of the same
    batch (a restart after a crash) or by whatever moved the store on, and are skipped, so
    replaying a batch changes nothing. If the store's offsets change between the fold and its
    commit, the batch is folded again over the store as it now is (``StaleBatchError`` after
    ``COMMIT_ATTEMPTS`` folds).
    """
    records = list(records)
    folds = 1
    while True:
        offsets = store.next_offsets()
        fresh: Sequence[LogRecord] = [
            r for r in records
            if r.position.offset >= offsets.get((r.position.topic, r.position.partition), 0)
        ]
        changes = fold(store.batch_view(fresh), fresh)
        if not fresh:
            return changes
        try:
            store.commit(changes, expected_offsets=offsets)
            return changes
        except StaleBatchError:
            if folds == COMMIT_ATTEMPTS:
                raise
            folds += 1
