"""What datasets and tables share, as rerun-sdk's ``Entry``: an id, a name and times, read from
the projection at each access."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import IntEnum
from typing import Generic, TypeVar

from projector import Dataset, Table
from sdk._connection import Connection
from sdk.errors import NotFoundError

Record = TypeVar("Record", Dataset, Table)


class EntryKind(IntEnum):
    """What an entry is, with rerun-sdk's values for the kinds strata has."""

    DATASET = 1
    TABLE = 3

    def __repr__(self) -> str:
        return f"EntryKind.{self.name}"  # as rerun-sdk prints its kinds

    __str__ = __repr__


class Entry(Generic[Record]):
    """An entry of the catalog (``NotFoundError`` from its reads once it is deleted)."""

    _kind_name = "entry"

    def __init__(self, internal: Connection, record: Record) -> None:
        self._internal = internal
        self._id: uuid.UUID = record.id
        self._seen: Record = record

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._seen.name!r}, id={self.id})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, Entry) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self._id)

    def _lookup(self, entry_id: uuid.UUID) -> Record | None:
        raise NotImplementedError

    def _current(self) -> Record:
        record = self._lookup(self._id)
        if record is None or record.deleted:
            raise NotFoundError(f"{self._kind_name} {self._seen.name!r} ({self._id}) was deleted")
        self._seen = record
        return record

    @property
    def id(self) -> uuid.UUID:
        return self._id

    @property
    def name(self) -> str:
        return self._current().name

    @property
    def created_at(self) -> datetime:
        return self._seen.created_at

    @property
    def updated_at(self) -> datetime:
        return self._current().updated_at
