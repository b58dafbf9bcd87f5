"""What datasets and tables share, as rerun-sdk's ``Entry``: an id, a name and times, read from
the projection at each access, and blueprints, kept in the entry's hidden blueprint dataset
(``sdk._blueprints``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Generic, TypeVar

from projector import Dataset, ProjectionReader, Table
from recordings import ObjectStoreSettings
from sdk import _blueprints
from sdk._blueprints import BlueprintDataset
from sdk._connection import Connection
from sdk._wait import DEFAULT_TIMEOUT_SECS
from sdk.errors import NotFoundError

Record = TypeVar("Record", Dataset, Table)


class EntryId(uuid.UUID):
    """An entry's id: a UUID (it compares and hashes as one), with ``as_bytes()`` as rerun-sdk's
    ``EntryId`` has it.

    >>> EntryId("00000000-0000-0000-0000-000000000001").as_bytes().hex()
    '00000000000000000000000000000001'
    """

    def as_bytes(self) -> bytes:
        """The id's 16 bytes (``uuid.UUID.bytes``), as Rerun's ``EntryId.as_bytes()``."""
        return self.bytes


class Entry(Generic[Record]):
    """An entry of the catalog (``NotFoundError`` from its reads once it is deleted)."""

    _kind_name = "entry"

    def __init__(self, internal: Connection, record: Record) -> None:
        self._internal = internal
        self._id: uuid.UUID = record.id
        self._seen: Record = record

    def __repr__(self) -> str:
        point = "" if self._internal.point is None else f", as_of={self._internal.point}"
        return f"{type(self).__name__}(name={self._seen.name!r}, id={self.id}{point})"

    @property
    def point(self) -> int | None:
        """The log offset this entry shows the catalog as of (``as_of``); None: as it is now."""
        return self._internal.point

    def __eq__(self, other: object) -> bool:
        """As Rerun's: the same entry, or its id (a ``UUID``), or its name (a ``str``), so
        ``"droid" in client.entries()`` and ``dataset.id in client.entries()`` work."""
        match other:
            case Entry():
                return other.id == self.id
            case str():
                return self.name == other
            case uuid.UUID():
                return other == self.id
            case _:
                return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a view of a changing entry, as Rerun's

    @property
    def catalog(self) -> Any:
        """The ``CatalogClient`` this entry was handed out by."""
        return self._internal.catalog

    def _lookup(self, store: ProjectionReader, entry_id: uuid.UUID) -> Record | None:
        raise NotImplementedError

    def _current(self, *, settle: bool = True) -> Record:
        """The entry as the store has it now, once it has passed this client's writes; without
        ``settle``, as it is (for a write's checks)."""
        store = self._internal.wait_for_store() if settle else self._internal.peek
        record = self._lookup(store, self._id)
        if record is None or record.deleted:
            raise NotFoundError(f"{self._kind_name} {self._seen.name!r} ({self._id}) was deleted")
        self._seen = record
        return record

    def _record_at(self, view: Connection) -> Record:
        """The entry as ``view`` (a connection as of a point) has it; ``NotFoundError`` if it did
        not exist yet or was deleted then."""
        record = self._lookup(view.wait_for_store(), self._id)
        if record is None or record.deleted:
            what = "did not exist yet" if record is None else "was deleted"
            raise NotFoundError(f"{self._kind_name} {self._seen.name!r} ({self._id}) {what} as of log offset "
                                f"{view.point}")
        return record

    @property
    def id(self) -> EntryId:
        """The entry's id, a UUID with rerun-sdk's ``as_bytes()``."""
        return EntryId(int=self._id.int)

    @property
    def name(self) -> str:
        return self._current().name

    @property
    def created_at(self) -> datetime:
        return self._seen.created_at

    @property
    def updated_at(self) -> datetime:
        return self._current().updated_at

    # -- blueprints ---------------------------------------------------------------------------

    def blueprint_dataset(self) -> BlueprintDataset | None:
        """The hidden dataset of the entry's blueprints, one segment per ``.rbl``; deleted with
        the entry. ``NotFoundError`` if it was deleted on its own."""
        raise NotImplementedError

    def register_blueprint(self, uri: str, set_default: bool = True, *,
                           object_store_config: ObjectStoreSettings = None,
                           timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> str:
        """Register an ``.rbl`` file (``rr.blueprint.Blueprint.save``) in the blueprint dataset,
        replacing a blueprint with its id, and by default make it the default. Returns its name,
        the blueprint's id, as ``blueprints()`` lists it. ``LookupError`` for an entry without a
        blueprint dataset (a hidden dataset), ``ValueError`` for a file that holds no blueprint."""
        return _blueprints.register(self._internal, self._id, self._seen.name, self.blueprint_dataset(), uri,
                                    make_default=set_default, segment_table=False,
                                    object_store_config=object_store_config, timeout_secs=timeout_secs)

    def blueprints(self) -> list[str]:
        """The names of the registered blueprints, in registration order."""
        return _blueprints.names(self.blueprint_dataset())

    def default_blueprint(self) -> str | None:
        """The name of the default blueprint, or None."""
        return self._current().default_blueprint

    def set_default_blueprint(self, blueprint_name: str | None, *,
                              timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make ``blueprint_name`` the default (None: no default). As in Rerun, the name is not
        checked against ``blueprints()``; ``NotFoundError`` if the blueprint dataset was deleted."""
        _blueprints.set_default(self._internal, self._id, blueprint_name, False, timeout_secs)
