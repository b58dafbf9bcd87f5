"""Applying a batch of log records to the store: fold what the store has not seen, commit it
atomically with the next offsets, and fold again if the store moved on meanwhile."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from projector.batch_fold import fold_batch
from projector.model import Changes, LogRecord
from projector.ports import ProjectionWriter, StaleBatchError

COMMIT_ATTEMPTS = 3
"""Folds of one batch, at most, when the store moves on during the fold (a ``strata replay
--swap`` replacing its contents): each fold starts again from the store's new state."""


def apply_batch(store: ProjectionWriter, records: Iterable[LogRecord]) -> Changes:
    """Fold the records the store has not seen yet (``projector.batch_fold``) and commit the
    result atomically.

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
        changes = fold_batch(store.batch_view(fresh), fresh)
        if not fresh:
            return changes
        try:
            store.commit(changes, expected_offsets=offsets)
            return changes
        except StaleBatchError:
            if folds == COMMIT_ATTEMPTS:
                raise
            folds += 1
