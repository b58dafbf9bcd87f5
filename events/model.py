"""Command events as frozen values. Dicts exist only inside ``events.codec``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum


class OnDuplicate(StrEnum):
    """What registering an existing (segment, layer) does; mirrors rerun's OnDuplicateSegmentLayer."""

    ERROR = "error"
    """The first registration in log order wins; later ones are rejected."""
    SKIP = "skip"
    """Later registrations succeed and change nothing."""
    REPLACE = "replace"
    """The last registration in log order wins."""


@dataclass(frozen=True)
class CreateDataset:
    name: str


@dataclass(frozen=True)
class RegisterLayer:
    segment_id: str
    layer_name: str
    storage_url: str
    on_duplicate: OnDuplicate = OnDuplicate.ERROR
    size_bytes: int = 0
    arrow_schema: bytes = b""
    """Arrow IPC schema message of the layer's data; empty when unknown."""
    properties: bytes = b""
    """Arrow IPC stream with one row, one column per ``property:<entity>:<field>``."""


Command = CreateDataset | RegisterLayer


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Event:
    """One command, as appended to the log.

    >>> Event(dataset_id=uuid.uuid4(), command=CreateDataset("droid")).event_type
    'CreateDataset'
    """

    dataset_id: uuid.UUID
    command: Command
    event_id: uuid.UUID = field(default_factory=uuid.uuid4)
    produced_at: datetime = field(default_factory=_now)
    producer_id: str = "strata"

    @property
    def event_type(self) -> str:
        return type(self.command).__name__
