"""Registrations folded a run at a time (``projector.model.LayerRun``: what a run of
``RegisterLayer`` records did to one dataset, as lists instead of one ``Layer``, ``Segment``,
``Outcome``, ``Change`` and ``Version`` per record) as the values ``projector.fold.fold`` makes.

``projector.batch_fold`` makes runs and a store writes them in bulk (``projector.stores.sql_commit``);
``materialize_into`` turns one into exactly what ``fold`` would have put in ``Changes`` for the
same records, which is how the batch fold continues one record at a time, and how the two folds
are compared.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from projector.model import (
    Change,
    ChangeKind,
    Changes,
    LayerRun,
    Outcome,
    Segment,
    Version,
    Versioned,
)

_Entry = TypeVar("_Entry")


def materialize_into(run: LayerRun, changes: Changes) -> list[tuple[uuid.UUID, str, str]]:
    """Put what the run did into ``changes`` as ``projector.fold.fold`` records it (history
    and feed kept in log order); return the keys of the layers it wrote."""
    dataset_id = run.dataset_id
    for offset, event_id, reason in run.outcomes:
        changes.outcomes[event_id] = Outcome(event_id, run.position(offset), run.status(reason), reason)
    history: list[Version] = []
    feed: list[Change] = []
    keys = []
    for write in run.writes:
        command, position = write.command, run.position(write.offset)
        key = (dataset_id, command.segment_id, command.layer_name)
        layer = run.layer(write)
        changes.layers[key] = layer
        keys.append(key)
        history.append(Version(write.offset, Versioned.LAYER, key, layer))
        feed.append(Change(position, 0, write.change_kind, dataset_id, write.entry_name, command.segment_id,
                           command.layer_name, command.storage_url))
        if write.created:
            created = Segment(dataset_id, command.segment_id, position, write.registered_at,
                              write.position)
            history.append(Version(write.offset, Versioned.SEGMENT, (dataset_id, command.segment_id),
                                   created))
            feed.append(Change(position, 1, ChangeKind.SEGMENT_ADDED, dataset_id, write.entry_name,
                               command.segment_id))
    for segment_id, row in run.segments.items():
        if row.changed:
            changes.segments[(dataset_id, segment_id)] = run.segment(segment_id, row)
    changes.history = _merged(changes.history, history, lambda v: v.offset)
    changes.feed = _merged(changes.feed, feed, lambda c: (c.position.offset, c.seq))
    return keys


def _merged(ordered: list[_Entry], more: list[_Entry], key: Callable[[_Entry], Any]) -> list[_Entry]:
    """Two lists each in log order as one, entries of equal keys keeping their order."""
    if not more:
        return ordered
    if not ordered or key(ordered[-1]) < key(more[0]):
        return ordered + more
    return sorted(ordered + more, key=key)


def materialized(changes: Changes) -> Changes:
    """``changes`` with its runs put into its other fields, as ``projector.fold.fold`` would have
    made them; ``changes`` itself is left as it is."""
    if not changes.runs:
        return changes
    copy = Changes(**{**vars(changes), "runs": [],
                      **{name: dict(getattr(changes, name)) for name in ("layers", "segments", "outcomes")}})
    for run in changes.runs:
        materialize_into(run, copy)
    return copy
