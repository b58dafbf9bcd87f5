"""The projection's rows and the changes one batch makes to them, as frozen values."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from events import Event


@dataclass(frozen=True, order=True)
class LogPosition:
    """A record's place in the log. Orders records within one partition, never across topics."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LogRecord:
    """A record as the fold receives it: decoded, or the reason it could not be."""

    position: LogPosition
    raw: bytes
    event: Event | None = None
    decode_error: str | None = None


@dataclass(frozen=True)
class Dataset:
    id: uuid.UUID
    name: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Segment:
    dataset_id: uuid.UUID
    segment_id: str
    created_by: LogPosition
    """The event that registered the segment's first layer: segments are listed in this order."""
    updated_at: datetime


@dataclass(frozen=True)
class Layer:
    dataset_id: uuid.UUID
    segment_id: str
    layer_name: str
    storage_url: str
    size_bytes: int
    arrow_schema: bytes
    properties: bytes
    registered_at: datetime
    registered_by: LogPosition
    """The event this layer came from: a segment's layers are listed in this order."""
    event_id: uuid.UUID


class Status(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


@dataclass(frozen=True)
class Outcome:
    """What the projector decided for one event, for the SDK to report."""

    event_id: uuid.UUID
    position: LogPosition
    status: Status
    reason: str = ""


@dataclass(frozen=True)
class Rejection:
    """A record that was bad input: kept with its raw bytes so nothing is lost."""

    position: LogPosition
    raw: bytes
    reason: str
    event_id: uuid.UUID | None = None


@dataclass
class Changes:
    """Everything one batch changes, committed by the store in one transaction."""

    datasets: dict[uuid.UUID, Dataset] = field(default_factory=dict)
    segments: dict[tuple[uuid.UUID, str], Segment] = field(default_factory=dict)
    layers: dict[tuple[uuid.UUID, str, str], Layer] = field(default_factory=dict)
    outcomes: dict[uuid.UUID, Outcome] = field(default_factory=dict)
    rejections: list[Rejection] = field(default_factory=list)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """For every (topic, partition) in the batch: the offset after its last record."""
