"""The one narrow interface between the projection and where it is stored."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Protocol

from projector.fold import CatalogView, fold
from projector.model import Blueprint, Changes, Dataset, Layer, LogRecord, Outcome, Rejection, Segment


class ProjectionStore(CatalogView, Protocol):
    """A projection store: the fold's reads, one atomic commit per batch, and the SDK's reads."""

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

    def outcome(self, event_id: uuid.UUID) -> Outcome | None: ...

    def datasets(self) -> list[Dataset]:
        """The live datasets, oldest first."""
        ...

    def segments(self, dataset_id: uuid.UUID) -> list[Segment]:
        """In registration order of their first layer."""
        ...

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        """Grouped by segment (in ``segments`` order), each segment's layers in registration order."""
        ...

    def blueprints(self, dataset_id: uuid.UUID) -> list[Blueprint]:
        """In registration order."""
        ...

    def rejections(self) -> list[Rejection]: ...


class StaleBatchError(RuntimeError):
    """The store moved on while a batch was being folded; the batch was not committed."""


class StoreUnavailableError(RuntimeError):
    """The store could not be opened, read or written: a read-only or full disk, a missing
    directory, a lock held too long. Nothing of the batch at hand was committed; once the fault is
    fixed, a restarted projector resumes from the store's offsets."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"store {path}: {reason}")
        self.path = path
        self.reason = reason


COMMIT_ATTEMPTS = 3
"""Folds of one batch, at most, when the store moves on during the fold (a ``strata replay
--swap`` replacing its contents): each fold starts again from the store's new state."""


def apply_batch(store: ProjectionStore, records: Iterable[LogRecord]) -> Changes:
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
