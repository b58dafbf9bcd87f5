"""One session on a catalog, for every client: where its commands go (``CommandLog``), the
projection store it reads them back from, the workers its registrations read files on, and the
object store settings they read with. Its reads wait for every write made through it (one wait
by log position, ``Horizon``), and a write's outcome is read by its place in the log, raising
the refusal as the error of its kind (``outcome_error``). It keeps no ledger of its callers'
writes: a refusal is reported to the call that waits for that write's outcome, and to no other.

``sdk``'s client keeps Rerun's shape over it (adding its ledger of open writes and DataFusion);
an endpoint of Rerun's protocol serves its calls over one, all at once.
"""

from __future__ import annotations

import collections
import copy
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self, TypeVar

import pyarrow as pa

import settings
from commands.errors import outcome_error
from commands.lance import lance_table
from commands.log import CommandLog, Submitted, Write
from events import CATALOG_TOPIC, DefineSchema
from producers import EventProducer, Position, end_offsets, offset_after
from projector import Dataset, Outcome, ProjectionReader, Table, open_store, views, wait_for_positions
from projector.stores import describe, normalize
from recordings import (
    NotFoundError,
    ObjectStore,
    ObjectStoreConfig,
    ObjectStoreSettings,
    WorkerPool,
    object_store,
)

DEFAULT_TIMEOUT_SECS = 60.0
"""How long a call waits for the projection to apply its events, unless told otherwise."""
KEPT_READS = 32
"""Reads a catalog keeps for the current version of the store (``Catalog.kept``)."""
Found = TypeVar("Found", Dataset, Table)
T = TypeVar("T")


def no_kafka(what: str) -> str:
    """The message of a call a catalog without a Kafka cluster cannot make."""
    return (f"{what} needs the Kafka cluster, and this client was made without bootstrap_servers: it "
            "reads the store only (give it bootstrap_servers, or a stack's URL, or use "
            "CatalogClient.from_state_dir())")


class Catalog:
    """A session on the catalog: writes go to Kafka, reads come from the projection store, which
    it opens read-only. Without ``bootstrap_servers`` it only reads: its writes raise
    ``ValueError`` (``writable``). ``workers`` worker processes (default ``STRATA_WORKERS``, else
    one per usable core; 0: the caller) read registrations' files, started on first use. Safe to
    share between threads. Raises ``StoreUnavailableError`` if the store cannot be opened."""

    def __init__(
        self,
        bootstrap_servers: str | None,
        store: str | Path,
        *,
        kafka_config: Mapping[str, Any] | None = None,
        producer_id: str | None = None,
        delivery_timeout_secs: float = 15.0,
        object_store_config: ObjectStoreSettings = None,
        workers: int | None = None,
    ) -> None:
        self.workers = WorkerPool(settings.workers() if workers is None else workers)
        """The processes bulk reads and registrations run in, started on first use."""
        weakref.finalize(self, self.workers.close)
        self.bootstrap_servers = bootstrap_servers
        self.object_store_config = ObjectStoreConfig.resolve(object_store_config)
        self.location = normalize(store)
        self.producer_id = producer_id or f"strata-sdk@{os.uname().nodename}:{os.getpid()}"
        self._store: ProjectionReader = open_store(self.location, read_only=True)
        self._kafka_config = {**settings.kafka_options(), **(kafka_config or {})}
        producer = None if bootstrap_servers is None else EventProducer(
            bootstrap_servers, config=self._kafka_config, delivery_timeout_secs=delivery_timeout_secs)
        self.log = CommandLog(producer, self._store, self.producer_id)
        """Where this catalog's commands go, and their outcomes come from."""
        self._kept: collections.OrderedDict[tuple[object, ...], Any] = collections.OrderedDict()
        self._kept_lock = threading.Lock()

    point: int | None = None
    """The log offset this catalog is read as of (``at``); None: as it is now."""
    shared = False
    """Whether this is a view of another catalog (``at``), whose producer, store and workers that
    one closes."""

    def __repr__(self) -> str:
        return f"bootstrap_servers={self.bootstrap_servers!r}, store={describe(self.location)!r}"

    def at(self, point: int | datetime) -> Self:
        """This catalog as of ``point`` (see ``resolve``). Read-only: a write through it is a
        ``ValueError``."""
        view = copy.copy(self)
        view.point = self.resolve(point)
        view.shared = True
        return view

    def resolve(self, point: int | datetime) -> int:
        """The log offset of ``point``: a log offset (the catalog the records before it make) or
        a timezone-aware ``datetime`` (the records produced up to then). ``ValueError`` for an
        offset past the end of the log or a naive ``datetime``; also, without a Kafka cluster
        to ask, for a ``datetime`` and an offset past what the store has folded."""
        if isinstance(point, datetime):
            if point.tzinfo is None:
                raise ValueError(f"point {point!r}: give a timezone-aware datetime, such as "
                                 "datetime.now(timezone.utc): a naive one depends on this machine's zone")
            if self.bootstrap_servers is None:
                raise ValueError(no_kafka(f"point {point.isoformat()} (a time, looked up in the log)"))
            offset = offset_after(self.bootstrap_servers, point, config=self._kafka_config)
        elif isinstance(point, int) and not isinstance(point, bool):
            offset = point
            folded = self._store.next_offsets().get((CATALOG_TOPIC, 0), 0)
            # A point the store has folded up to is in the log; only one past it asks the broker.
            if offset <= folded:
                end = folded
            elif self.bootstrap_servers is None:
                raise ValueError(f"point {point} is past the store's {folded} (the log offsets it has "
                                 f"folded): {no_kafka('a later point')}")
            else:
                ends = end_offsets(self.bootstrap_servers, config=self._kafka_config)
                end = ends.get((CATALOG_TOPIC, 0), 0)
            if not 0 <= offset <= end:
                raise ValueError(f"point {point}: the log has offsets 0 to {end} (the catalog as of "
                                 f"{end} is the catalog now); give one of them, or a datetime")
        else:
            raise TypeError(f"a point is a log offset (int) or a datetime, got {type(point).__name__}")
        return offset

    def here(self) -> int:
        """The point a new tag names by default: just after this catalog's last write, or the
        store's current offset if it has written nothing (once the store has its writes)."""
        written = self.log.horizon.written(CATALOG_TOPIC, 0)
        if written is not None:
            return written + 1
        return self.wait_for_store().next_offsets().get((CATALOG_TOPIC, 0), 0)

    def writable(self) -> None:
        """Raises ``ValueError`` if this catalog is read as of a point, or knows no Kafka cluster
        to write to."""
        if self.point is not None:
            raise ValueError(f"this is the catalog as of log offset {self.point}, which is read-only: "
                             "write through the client or entry itself")
        if self.log.producer is None:
            raise ValueError(no_kafka("writing"))

    def close(self) -> None:
        """Release the workers, the producer (delivering what is queued) and the store; nothing
        for a view ``at`` a point, whose catalog they are."""
        if self.shared:
            return
        try:
            self.workers.close()
        finally:
            self.log.close()
            self._store.close()

    # -- reads --------------------------------------------------------------------------------

    def wait_for_store(self) -> ProjectionReader:
        """The projection, read-only, once it has passed every write made through this catalog
        (and, for a catalog as of a point, every record before the point): blocks for up to
        ``DEFAULT_TIMEOUT_SECS``, raises ``ProjectionTimeoutError`` if the projection does not
        get there in time. ``peek`` is the projection without waiting."""
        pending = self.log.horizon.pending()
        if pending:
            self.wait(pending, DEFAULT_TIMEOUT_SECS)
        if self.point is None:
            return self._store
        if self.point:  # the projection must have folded every record before the point
            last = Position(CATALOG_TOPIC, 0, self.point - 1)
            wait_for_positions(self._store, [last], DEFAULT_TIMEOUT_SECS)
        return self._store.at(self.point)

    @property
    def projection(self) -> ProjectionReader:
        """The projection as it is, without waiting for anything: for a read of what the
        projector decided at given positions, which waits for those alone."""
        return self._store

    @property
    def peek(self) -> ProjectionReader:
        """The projection as it is, without waiting for this catalog's writes: for the checks a
        write makes before it is sent, which must not wait for the writes before it."""
        self.writable()
        return self._store

    def kept(self, key: tuple[object, ...], read: Callable[[], T]) -> T:
        """``read()``, a read of the projection as ``wait_for_store`` gives it, kept until the
        projector commits again (the store's ``data_version`` moves) for the next call with the
        same ``key`` at the same point: a segment table asked for again and again (a dashboard, a
        protocol endpoint's schema and scan calls) is made once per commit. The version is read
        before the data, so what is kept is never older than its version."""
        self.wait_for_store()
        entry = (*key, self.point, self._store.data_version())
        with self._kept_lock:
            if entry in self._kept:
                self._kept.move_to_end(entry)
                value: T = self._kept[entry]
                return value
        value = read()
        with self._kept_lock:
            self._kept[entry] = value
            while len(self._kept) > KEPT_READS:
                self._kept.popitem(last=False)
        return value

    def objects(self, override: ObjectStoreSettings = None) -> ObjectStore:
        """The object store of this catalog's settings, with ``override`` winning key by key."""
        return object_store(self.object_store_config.updated(override))

    def table_data(self, table: Table) -> pa.Table:
        """A table's rows: from the projection, a registered table's Lance version, or for the
        system table the entries as they are now."""
        if table.system:
            return views.entries_table(self.wait_for_store())
        if not table.registered:
            return self.wait_for_store().table_data(table)
        return lance_table(table.storage_url).checkout_version(table.lance_version).to_table()

    # -- entries ------------------------------------------------------------------------------

    def find_dataset(self, name: str | None, id: uuid.UUID | str | None) -> Dataset:
        """The live dataset named ``name`` or with id ``id`` (see ``_find``)."""
        store = self.wait_for_store()
        return self._find("dataset", name, id, store.dataset_by_name, store.dataset)

    def find_table(self, name: str | None, id: uuid.UUID | str | None) -> Table:
        """The live table named ``name`` or with id ``id``, the system table too (see ``_find``)."""
        def by_name(table_name: str) -> Table | None:
            system = table_name == views.ENTRIES_TABLE.name
            return views.ENTRIES_TABLE if system else self.wait_for_store().table_by_name(table_name)

        def by_id(table_id: uuid.UUID) -> Table | None:
            system = table_id == views.ENTRIES_TABLE.id
            return views.ENTRIES_TABLE if system else self.wait_for_store().table(table_id)
        return self._find("table", name, id, by_name, by_id)

    def tables(self, *, include_hidden: bool = False) -> list[Table]:
        """The live tables, oldest first, after the system table with ``include_hidden``."""
        return [views.ENTRIES_TABLE] * include_hidden + self.wait_for_store().tables()

    def _find(self, kind: str, name: str | None, id: uuid.UUID | str | None,
              by_name: Callable[[str], Found | None], by_id: Callable[[uuid.UUID], Found | None]) -> Found:
        """The live ``kind`` entry named ``name`` or with id ``id`` (exactly one of them). A name
        of no entry raises ``LookupError``, a name of an entry of the other kind ``NotFoundError``,
        as Rerun's server does; an unknown id ``NotFoundError``."""
        if (name is None) == (id is None):
            raise ValueError(f"get_{kind}() takes exactly one of name or id")
        if name is not None:
            found = by_name(name)
            if found is not None:
                return found
            store = self.wait_for_store()
            others = {"dataset": store.dataset_by_name, "table": store.table_by_name}
            for other, other_by_name in others.items():
                if other != kind and other_by_name(name) is not None:
                    raise NotFoundError(f"{name!r} is a {other}, not a {kind}: use get_{other}({name!r})")
            raise LookupError(f"No {kind} found with name {name!r}")
        try:
            entry_id = id if isinstance(id, uuid.UUID) else uuid.UUID(str(id))
        except ValueError:
            raise ValueError(f"a {kind} id is a UUID, got {id!r}") from None
        record = by_id(entry_id)
        if record is None or record.deleted:
            raise NotFoundError(f"no {kind} with id {id}")
        return record

    # -- writes -------------------------------------------------------------------------------

    def submit(self, entry_id: uuid.UUID, writes: Sequence[Write], *,
               schemas: Sequence[DefineSchema] = ()) -> list[Submitted]:
        """Append ``writes``, commands on the entry ``entry_id``, to the log in order, in one batch
        (``CommandLog.submit``: those of ``schemas`` the log lacks go first); this catalog's later
        reads wait for them. Raises ``ValueError`` for a catalog that cannot write (``writable``;
        nothing is sent), ``DeliveryError`` if Kafka does not acknowledge the events in time."""
        self.writable()
        return self.log.submit(entry_id, writes, schemas=schemas)

    def wait(self, positions: Sequence[Position], timeout_secs: float | None) -> None:
        """Block until the projection has passed ``positions`` (``CommandLog.wait``)."""
        self.log.wait(positions, timeout_secs)

    def accepted(self, position: Position, what: str) -> Outcome:
        """The outcome of the event at ``position`` (``CommandLog.outcome``), raising its error
        (see ``outcome_error``) if it was not accepted."""
        outcome = self.log.outcome(position)
        error = outcome_error(outcome, what)
        if error is not None:
            raise error
        return outcome

    def command(self, entry_id: uuid.UUID, write: Write, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
                ) -> Submitted:
        """Send ``write`` on the entry ``entry_id`` and wait until the projection has applied it;
        raise its refusal (``AlreadyExistsError``, ``NotFoundError``, ``RevisionConflictError``,
        ``ValueError``), ``ProjectionTimeoutError`` if it is not applied in time."""
        [submitted] = self.submit(entry_id, [write])
        self.wait(submitted.positions, timeout_secs)
        for position in submitted.positions:
            self.accepted(position, write.what)
        return submitted
