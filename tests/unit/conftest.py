"""Shared helpers for the unit tier: an in-memory ``CatalogView`` and builders of log records.

Everything here is plain Python: no Kafka, no Spark, no files.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

import events
from events import CreateDataset, Event, OnDuplicate, RegisterLayer
from projector import (
    Changes,
    Dataset,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    Segment,
)

T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
"""A fixed clock for events, with microseconds so exact round trips are tested."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class MemoryCatalog:
    """``projector.fold.CatalogView`` on plain dicts, plus ``apply`` to merge a batch's Changes."""

    def __init__(self) -> None:
        self.datasets: dict[uuid.UUID, Dataset] = {}
        self.names: dict[str, uuid.UUID] = {}
        self.segments: dict[tuple[uuid.UUID, str], Segment] = {}
        self.layers: dict[tuple[uuid.UUID, str, str], Layer] = {}
        self.outcomes: dict[uuid.UUID, Outcome] = {}
        self.rejections: list[Rejection] = []
        self.next_offsets: dict[tuple[str, int], int] = {}

    # -- CatalogView ----------------------------------------------------------------------------

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        return self.datasets.get(dataset_id)

    def dataset_by_name(self, name: str) -> Dataset | None:
        dataset_id = self.names.get(name)
        return None if dataset_id is None else self.datasets[dataset_id]

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        return self.segments.get((dataset_id, segment_id))

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        return self.layers.get((dataset_id, segment_id, layer_name))

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return event_id in self.outcomes

    # -- merging a batch ------------------------------------------------------------------------

    def apply(self, changes: Changes) -> None:
        for dataset in changes.datasets.values():
            previous = self.datasets.get(dataset.id)
            if previous is not None and previous.name != dataset.name:
                del self.names[previous.name]
            self.datasets[dataset.id] = dataset
            self.names[dataset.name] = dataset.id
        self.segments.update(changes.segments)
        self.layers.update(changes.layers)
        self.outcomes.update(changes.outcomes)
        self.rejections.extend(changes.rejections)
        self.next_offsets.update(changes.next_offsets)

    def ordered_layers(self, dataset_id: uuid.UUID, segment_id: str) -> list[Layer]:
        """A segment's layers in registration (log) order."""
        return sorted((x for (d, s, _), x in self.layers.items() if (d, s) == (dataset_id, segment_id)),
                      key=lambda x: x.registered_by)

    def snapshot(self) -> dict[str, object]:
        """Everything, in comparable form."""
        return {
            "datasets": dict(self.datasets),
            "segments": dict(self.segments),
            "layers": dict(self.layers),
            "outcomes": dict(self.outcomes),
            "rejections": sorted(self.rejections, key=lambda r: r.position),
            "next_offsets": dict(self.next_offsets),
        }


def log_record(event: Event, offset: int, partition: int = 0, topic: str | None = None) -> LogRecord:
    """The record the projector would see for ``event`` at the given position."""
    position = LogPosition(topic or events.topic_for(event.command), partition, offset)
    return LogRecord(position, events.encode(event), event=event)


def undecodable(raw: bytes, offset: int, *, topic: str = events.CATALOG_TOPIC, partition: int = 0,
                reason: str = "x") -> LogRecord:
    return LogRecord(LogPosition(topic, partition, offset), raw, event=None, decode_error=reason)


@dataclass
class Log:
    """Appends events like a broker would: each (topic, partition) numbers its records from 0."""

    next_offset: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    records: list[LogRecord] = field(default_factory=list)

    def append(self, event: Event, partition: int = 0) -> LogRecord:
        key = (events.topic_for(event.command), partition)
        record = log_record(event, self.next_offset[key], partition)
        self.next_offset[key] += 1
        self.records.append(record)
        return record

    def append_raw(self, raw: bytes, *, topic: str = events.CATALOG_TOPIC, partition: int = 0,
                   reason: str = "x") -> LogRecord:
        key = (topic, partition)
        record = undecodable(raw, self.next_offset[key], topic=topic, partition=partition,
                             reason=reason)
        self.next_offset[key] += 1
        self.records.append(record)
        return record


def create(dataset_id: uuid.UUID, name: str, *, when: datetime = T0, **kwargs) -> Event:
    return Event(dataset_id, CreateDataset(name), produced_at=when, **kwargs)


def register(
    dataset_id: uuid.UUID,
    segment_id: str,
    layer_name: str = "base",
    *,
    on_duplicate: OnDuplicate = OnDuplicate.ERROR,
    url: str | None = None,
    size_bytes: int = 10,
    when: datetime = T0,
    properties: bytes = b"",
    **kwargs,
) -> Event:
    command = RegisterLayer(
        segment_id=segment_id,
        layer_name=layer_name,
        storage_url=url or f"file:///data/{segment_id}.{layer_name}.rrd",
        on_duplicate=on_duplicate,
        size_bytes=size_bytes,
        properties=properties,
    )
    return Event(dataset_id, command, produced_at=when, **kwargs)


@pytest.fixture
def catalog() -> MemoryCatalog:
    return MemoryCatalog()


@pytest.fixture
def log() -> Log:
    return Log()
