"""The fold a batch at a time: ``fold_batch(view, records)`` makes the ``Changes`` that
``projector.fold.fold`` makes of the same records, registrations kept as columns.

``fold`` is the specification: one handler per command, each record applied in log order over
the batch so far (``projector.overlay``). Most of a busy log is registrations into datasets whose
schemas they already use, and for those that path makes five or six objects per record and the
store one row of each. Here such a registration is folded into its dataset's ``LayerRun``
(``projector.layer_runs``), a few appends to lists, and the store writes a run in bulk.

A registration goes into a run only if ``fold`` would do nothing else with it than what a run
records (``_Folding.register`` checks, before it changes anything):

- its names and sizes are valid; its schema and properties come by reference (envelope v5 on),
  and the properties read as a record batch of their schema;
- its dataset is a live dataset (not a hidden one);
- its schema is one of the dataset's already (or it has none): merging a schema into a merged
  schema that holds it changes nothing, so the dataset gets no new version;
- what it replaces has the same schema, and is not the last layer of a schema other than the
  dataset's last one (the digest would move to the end of the dataset's digests, a new version).

An event decided before is skipped, as ``fold`` skips it.

Any other record is applied by ``fold.apply_record``. Before that, the run of the dataset it names
is put into ``Changes`` as ``fold`` would have made it (``Overlay.take_run``), unless the record
reads nothing of it (a schema definition), and the counters of the datasets being folded are
written back: whatever the record reads is what ``fold`` would read there.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from events import DefineSchema, RegisterLayer
from projector import registration
from projector.fold import apply_record, log_order
from projector.model import (
    Changes,
    Dataset,
    DatasetKind,
    LayerRun,
    LogRecord,
    RunSegment,
    RunWrite,
    SchemaRef,
)
from projector.overlay import FoldReader, Overlay

__all__ = ["fold_batch"]


def fold_batch(view: FoldReader, records: Iterable[LogRecord]) -> Changes:
    """Apply ``records`` in log order on top of ``view``, as ``projector.fold.fold`` does; the
    registrations it can fold as columns are in ``Changes.runs``
    (``projector.layer_runs.materialized`` gives what ``fold`` returns)."""
    state = _BatchState(view)
    changes = state.changes
    ordered = log_order(records)
    registration.note_offsets(changes, ordered)
    folding: dict[uuid.UUID, _Folding] = {}
    for record in ordered:
        if _columnar(record):
            event = record.event
            assert event is not None
            if state.has_outcome(event.event_id):
                continue  # the same event appended twice: it was decided the first time
            dataset = folding.get(event.entry_id) or _Folding.of(state, event.entry_id)
            if dataset is not None:
                folding[event.entry_id] = dataset
                if dataset.register(state, record):
                    continue
        for dataset in folding.values():
            dataset.write_back(state)
        folding.clear()
        state.one_at_a_time(record)
    for dataset in folding.values():
        dataset.write_back(state)
    changes.runs = list(state.runs.values())
    return changes


def _columnar(record: LogRecord) -> bool:
    """Whether a record has the shape of a registration a run may take: the rest of the checks
    need the state (``_Folding.register``)."""
    event = record.event
    if event is None or type(event.command) is not RegisterLayer:
        return False
    command = event.command
    return (not command.arrow_schema and not command.properties
            and bool(command.properties_schema_sha256) == bool(command.properties_batch))


class _BatchState(Overlay):
    """The overlay, with the open run of each dataset."""

    def __init__(self, view: FoldReader) -> None:
        super().__init__(view)
        self.runs: dict[uuid.UUID, LayerRun] = {}

    def one_at_a_time(self, record: LogRecord) -> None:
        """Apply ``record`` with ``fold``'s handler, after putting the run it could read into
        ``changes``."""
        event = record.event
        if event is not None and not isinstance(event.command, DefineSchema):
            run = self.runs.pop(event.entry_id, None)
            if run is not None:
                self.take_run(run)
        apply_record(self, record)


class _Folding:
    """A dataset while registrations are folded into its run: the fields of its row they move,
    kept here and written back before anything else reads the dataset."""

    __slots__ = ("counts", "dataset", "last_digest", "schemaless", "segments_created", "touched",
                 "updated_at")

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self.updated_at = dataset.updated_at
        self.segments_created = dataset.segments_created
        self.schemaless = dataset.schemaless_layers
        self.counts = {ref.digest: ref.layers for ref in dataset.schema_refs}
        self.last_digest = dataset.schema_refs[-1].digest if dataset.schema_refs else ""
        self.touched = False

    @classmethod
    def of(cls, state: _BatchState, dataset_id: uuid.UUID) -> _Folding | None:
        dataset = state.dataset(dataset_id)
        if dataset is None or dataset.deleted or dataset.kind is not DatasetKind.DATASET:
            return None
        return cls(dataset)

    def write_back(self, state: _BatchState) -> None:
        """The dataset as the registrations folded so far left it, into the overlay (with no
        version: they changed only what the history derives, ``projector.derived``)."""
        if not self.touched:
            return
        refs = tuple(SchemaRef(ref.digest, self.counts[ref.digest]) for ref in self.dataset.schema_refs)
        state.put_dataset(replace(self.dataset, updated_at=self.updated_at, schema_refs=refs,
                                  segments_created=self.segments_created,
                                  schemaless_layers=self.schemaless), derivable=True)
        self.touched = False

    def register(self, state: _BatchState, record: LogRecord) -> bool:
        """Fold ``record`` (a registration ``_columnar`` took) into its dataset's run, if it
        passes every check (the module's docstring); else change nothing and return False."""
        event = record.event
        assert event is not None and isinstance(event.command, RegisterLayer)
        command = event.command
        if registration.invalid(command) is not None:
            return False
        digest = command.schema_sha256
        if digest and digest not in self.counts:
            return False
        if command.properties_batch and not _properties_read(state, command):
            return False
        dataset_id, at = self.dataset.id, record.position
        segment_id, layer_name = command.segment_id, command.layer_name
        run = state.runs.get(dataset_id)
        if run is not None and (run.topic, run.partition) != (at.topic, at.partition):
            return False  # a run holds the records of one partition
        index = run.latest.get((segment_id, layer_name)) if run is not None else None
        stored = None if index is not None else state.layer(dataset_id, segment_id, layer_name)
        exists = index is not None or stored is not None
        if exists and not registration.replaces(command):
            self._decided(state, dataset_id, record, registration.already_exists(command) or "")
            return True
        if exists:
            replaced = stored if run is None or index is None else run.writes[index].command
            assert replaced is not None
            if replaced.schema_sha256 != digest:
                return False
            if digest and self.counts[digest] == 1 and digest != self.last_digest:
                return False  # the last layer of a schema replaced: its digest would move to the end
        row = run.segments.get(segment_id) if run is not None else None
        found = state.segment(dataset_id, segment_id) if row is None else None
        # Every check passed: fold it.
        run = self._decided(state, dataset_id, record, "")
        produced_at = event.produced_at
        created = row is None and found is None
        if row is not None:
            position = row.position
            if produced_at > row.updated_at:
                row.updated_at, row.changed = produced_at, True
        elif found is not None:
            position = found.position
            run.segments[segment_id] = RunSegment(
                found.created_by, position, _later(found.updated_at, produced_at),
                produced_at > found.updated_at)
        else:
            position = self.segments_created
            self.segments_created += 1
            run.segments[segment_id] = RunSegment(at, position, produced_at, True)
        if stored is not None:
            run.replaced.append((stored, position, at.offset))
        run.latest[(segment_id, layer_name)] = len(run.writes)
        run.writes.append(RunWrite(at.offset, event.event_id, command, produced_at, exists, created, position,
                                   self.dataset.name))
        self.touched = True
        self.updated_at = _later(self.updated_at, produced_at)
        if not digest:
            self.schemaless += not exists
        elif not exists:
            self.counts[digest] += 1
        return True

    @staticmethod
    def _decided(state: _BatchState, dataset_id: uuid.UUID, record: LogRecord, reason: str) -> LayerRun:
        """The record's outcome in its dataset's run (opened if need be): accepted, or refused
        for ``reason``."""
        event, position = record.event, record.position
        assert event is not None
        run = state.runs.get(dataset_id)
        if run is None:
            run = state.runs[dataset_id] = LayerRun(dataset_id, position.topic, position.partition)
        run.outcomes.append((position.offset, event.event_id, reason))
        run.event_ids.add(event.event_id)
        state.run_events.add(event.event_id)
        return run


def _later(a: datetime, b: datetime) -> datetime:
    return b if b > a else a


def _properties_read(state: _BatchState, command: RegisterLayer) -> bool:
    """Whether a registration's properties batch reads as a row of its defined schema, as
    ``fold`` checks it."""
    schema_bytes = state.schema(command.properties_schema_sha256)
    if schema_bytes is None:
        return False
    try:
        registration.properties_row(schema_bytes, command.properties_batch)
    except ValueError:
        return False
    return True
