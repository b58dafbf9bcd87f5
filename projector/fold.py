"""The fold: what each command does to the catalog. Pure: no I/O, no clock, no Kafka, no Spark.

``fold(view, records)`` reads the current projection through the read-only ``CatalogView`` and
returns the ``Changes`` that the records make. Outcomes depend only on the records' order in the
log, never on clocks or batch boundaries.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Protocol

from events import CreateDataset, Event, OnDuplicate, RegisterLayer
from projector.model import (
    Changes,
    Dataset,
    Layer,
    LogRecord,
    Outcome,
    Rejection,
    Segment,
    Status,
)

MAX_NAME_LENGTH = 180


class CatalogView(Protocol):
    """Read access to the projection as of the end of the previous batch."""

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None: ...

    def dataset_by_name(self, name: str) -> Dataset | None: ...

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None: ...

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None: ...

    def has_outcome(self, event_id: uuid.UUID) -> bool: ...


class InvalidCommand(ValueError):
    """A command that can never be applied: bad input, recorded as a rejection."""


def log_order(records: Iterable[LogRecord]) -> list[LogRecord]:
    """The order a batch is applied in: by (topic, partition, offset). strata writes one
    single-partition topic, so this is the log's own order."""
    return sorted(records, key=lambda r: r.position)


def fold(view: CatalogView, records: Iterable[LogRecord]) -> Changes:
    """Apply ``records`` in ``log_order`` on top of ``view``; return what changed.

    Every record advances its partition's next offset, whatever its outcome.
    """
    state = _Overlay(view)
    for record in log_order(records):
        state.changes.next_offsets[(record.position.topic, record.position.partition)] = (
            record.position.offset + 1)
        _apply(state, record)
    return state.changes


def _apply(state: _Overlay, record: LogRecord) -> None:
    event = record.event
    if event is None:
        state.changes.rejections.append(
            Rejection(record.position, record.raw, record.decode_error or "undecodable record"))
        return
    if state.has_outcome(event.event_id):
        return  # the same event appended twice: it was decided the first time
    try:
        if isinstance(event.command, CreateDataset):
            status, reason = _create_dataset(state, event, event.command)
        elif isinstance(event.command, RegisterLayer):
            status, reason = _register_layer(state, record, event, event.command)
        else:  # pragma: no cover - the codec only yields known commands
            raise InvalidCommand(f"unsupported command {event.event_type}")
    except InvalidCommand as exc:
        state.changes.rejections.append(
            Rejection(record.position, record.raw, str(exc), event.event_id))
        status, reason = Status.REJECTED, str(exc)
    state.changes.outcomes[event.event_id] = Outcome(event.event_id, record.position, status, reason)


def _create_dataset(state: _Overlay, event: Event, command: CreateDataset) -> tuple[Status, str]:
    name = command.name
    if not name or len(name) > MAX_NAME_LENGTH:
        raise InvalidCommand(
            f"dataset name must have 1 to {MAX_NAME_LENGTH} characters, got {len(name)}")
    if state.dataset(event.dataset_id) is not None:
        raise InvalidCommand(f"dataset id {event.dataset_id} already exists")
    if state.dataset_by_name(name) is not None:
        return Status.REJECTED, f"already exists: a dataset named {name!r}"
    state.put_dataset(Dataset(event.dataset_id, name, event.produced_at, event.produced_at))
    return Status.ACCEPTED, ""


def _register_layer(
    state: _Overlay, record: LogRecord, event: Event, command: RegisterLayer
) -> tuple[Status, str]:
    dataset = state.dataset(event.dataset_id)
    if dataset is None:
        raise InvalidCommand(f"unknown dataset id {event.dataset_id}")
    for name in ("segment_id", "layer_name", "storage_url"):
        if not getattr(command, name):
            raise InvalidCommand(f"{name} must not be empty")
    if command.size_bytes < 0:
        raise InvalidCommand(f"size_bytes must not be negative, got {command.size_bytes}")

    existing = state.layer(dataset.id, command.segment_id, command.layer_name)
    if existing is not None:
        if command.on_duplicate is OnDuplicate.ERROR:
            return Status.REJECTED, (
                f'Segment "{command.segment_id}", layer "{command.layer_name}": already exists')
        if command.on_duplicate is OnDuplicate.SKIP:
            return Status.ACCEPTED, ""
    # New, or OnDuplicate.REPLACE: this registration becomes the layer, last in the segment.
    state.put_layer(Layer(
        dataset_id=dataset.id,
        segment_id=command.segment_id,
        layer_name=command.layer_name,
        storage_url=command.storage_url,
        size_bytes=command.size_bytes,
        arrow_schema=command.arrow_schema,
        properties=command.properties,
        registered_at=event.produced_at,
        registered_by=record.position,
        event_id=event.event_id,
    ))
    segment = state.segment(dataset.id, command.segment_id)
    if segment is None:
        segment = Segment(dataset.id, command.segment_id, record.position, event.produced_at)
    state.put_segment(replace(segment, updated_at=max(segment.updated_at, event.produced_at)))
    state.put_dataset(replace(dataset, updated_at=max(dataset.updated_at, event.produced_at)))
    return Status.ACCEPTED, ""


class _Overlay:
    """The view with this batch's changes laid over it, so later records see earlier ones."""

    def __init__(self, view: CatalogView) -> None:
        self.view = view
        self.changes = Changes()
        self._names: dict[str, uuid.UUID] = {}

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        if dataset_id in self.changes.datasets:
            return self.changes.datasets[dataset_id]
        return self.view.dataset(dataset_id)

    def dataset_by_name(self, name: str) -> Dataset | None:
        if name in self._names:
            return self.changes.datasets[self._names[name]]
        return self.view.dataset_by_name(name)

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        key = (dataset_id, segment_id)
        if key in self.changes.segments:
            return self.changes.segments[key]
        return self.view.segment(dataset_id, segment_id)

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        key = (dataset_id, segment_id, layer_name)
        if key in self.changes.layers:
            return self.changes.layers[key]
        return self.view.layer(*key)

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return event_id in self.changes.outcomes or self.view.has_outcome(event_id)

    def put_dataset(self, dataset: Dataset) -> None:
        self.changes.datasets[dataset.id] = dataset
        self._names[dataset.name] = dataset.id

    def put_segment(self, segment: Segment) -> None:
        self.changes.segments[(segment.dataset_id, segment.segment_id)] = segment

    def put_layer(self, layer: Layer) -> None:
        self.changes.layers[(layer.dataset_id, layer.segment_id, layer.layer_name)] = layer
