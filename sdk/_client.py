"""The catalog client, in the shape of rerun-sdk's ``rerun.catalog.CatalogClient``: entries
(datasets and tables) by name or id, creating them, the change feed, and the DataFusion session
every DataFrame it returns belongs to."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa

import settings
from commands import entries
from projector import Change, Rejection, feed, views
from recordings import ObjectStoreConfig, ObjectStoreSettings
from sdk._connection import Connection, no_kafka
from sdk._dataset import DatasetEntry
from sdk._endpoint import is_endpoint_url, locate
from sdk._operations import Operation
from sdk._table_entry import TableEntry, table_entry
from sdk._wait import DEFAULT_TIMEOUT_SECS
from sdk._writes import WriteOutcome
from sdk.errors import AlreadyExistsError


@dataclasses.dataclass(frozen=True)
class VersionInfo:
    """Version and deployment of the catalog server, with the fields of Rerun's ``VersionInfo``."""

    version: str
    cloud_provider: str | None
    """None: strata is not a managed cloud service."""
    cloud_region: str | None
    features: list[str]
    """Optional Rerun server features it advertises: none."""


def _strata_version() -> str:
    try:
        return importlib.metadata.version("strata")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


class CatalogClient:
    """A client of a strata catalog: writes go to Kafka, reads come from the projection store.

    ``store`` is the projection store the stack's projector writes: its SQLite file (on the
    projector's host) or its PostgreSQL URL (from any host). The client only reads it, and raises
    ``StoreUnavailableError`` if it cannot (``ValueError`` for a location of an unknown kind,
    ``MissingExtraError`` for a ``postgresql://`` URL without ``strata[postgres]``). Without
    ``store``, the first argument is a URL that says where both are, as Rerun's
    ``CatalogClient(url)`` takes one (``Server.url()``): a stack's ``strata://HOST:PORT?store=...``,
    or the ``rerun+http://HOST:PORT`` of a strata endpoint of Rerun's catalog protocol, which the
    client asks for them (``EndpointUnavailableError`` if nothing answers there, ``ValueError``
    if what answers is Rerun's own server, ``MissingExtraError`` without ``strata[protocol]``);
    ``ValueError`` if it is neither. An endpoint that asks for tokens is asked with ``token``
    (default ``REDAP_TOKEN``, as Rerun's client), and refuses a missing or invalid one with
    ``EndpointRefusedError`` (a ``PermissionError``); ``rerun+https://`` trusts the CA roots
    of ``SSL_CERT_FILE``, else gRPC's own.

    Without ``bootstrap_servers`` (only ``store`` given) the client reads the store and never
    talks to Kafka: every read works, while a write, ``url``, and an ``as_of`` point that must
    be looked up in the log (a ``datetime``, or an offset past what the store has folded) raise
    ``ValueError`` saying that the Kafka cluster is needed. The producer of a client that has
    the bootstrap servers connects on its first write.

    ``workers`` worker processes (default ``STRATA_WORKERS``, else one per usable core) read the
    segments of ``reader()`` scans and the files of ``register()`` calls, started by the first
    call with more than one of them and stopped by ``close()``; ``workers=0`` reads in this
    process.

    Examples:
        >>> client = CatalogClient("localhost:9092", ".strata/store.db")  # doctest: +SKIP
        >>> client = CatalogClient("kafka-1:9092", store="postgresql://reader@db/strata")  # doctest: +SKIP
        >>> client = CatalogClient.from_state_dir(".strata")  # doctest: +SKIP
        >>> client = CatalogClient(server.url())  # strata://HOST:PORT?store=...  # doctest: +SKIP
        >>> client = CatalogClient("rerun+http://localhost:51234")  # strata up's endpoint  # doctest: +SKIP
        >>> reader = CatalogClient(store=".strata/store.db")  # reads only  # doctest: +SKIP
    """

    def __init__(
        self,
        bootstrap_servers: str | None = None,
        store: str | Path | None = None,
        *,
        kafka_config: Mapping[str, Any] | None = None,
        producer_id: str | None = None,
        delivery_timeout_secs: float = 15.0,
        object_store_config: ObjectStoreSettings = None,
        workers: int | None = None,
        token: str | None = None,
    ) -> None:
        if store is None:  # one URL, as Rerun's CatalogClient(url): Server.url()
            if bootstrap_servers is None:
                raise ValueError("CatalogClient needs a store to read (and bootstrap_servers to write), "
                                 "or a stack's URL: CatalogClient('localhost:9092', '.strata/store.db'), "
                                 "CatalogClient(store='.strata/store.db'), CatalogClient(server.url())")
            if is_endpoint_url(bootstrap_servers):
                endpoint_url: str | None = bootstrap_servers
                bootstrap_servers, store = locate(bootstrap_servers, token=token)
            else:
                endpoint_url = None
                bootstrap_servers, store = settings.parse_stack_url(bootstrap_servers)
        else:
            endpoint_url = None
        self._internal = Connection(bootstrap_servers, store, kafka_config=kafka_config,
                                    producer_id=producer_id, delivery_timeout_secs=delivery_timeout_secs,
                                    object_store_config=object_store_config, workers=workers)
        self._internal.catalog = self
        self._endpoint_url = endpoint_url

    @classmethod
    def from_state_dir(cls, state_dir: str | Path | None = None, **kwargs: Any) -> CatalogClient:
        """Connect to the stack that ``strata up`` runs on ``state_dir`` (default: $STRATA_HOME
        or ./.strata). Raises ``FileNotFoundError`` if nothing was started there."""
        directory = Path(state_dir) if state_dir is not None else settings.home()
        info = settings.running_stack(directory)
        if not info:
            raise FileNotFoundError(f"no {settings.SERVER_FILE} in {directory}: start the stack with "
                                    f"'strata up --data-dir {directory}' first")
        return cls(info["bootstrap_servers"], info["store"], **kwargs)

    @property
    def url(self) -> str:
        """Rerun's ``CatalogClient.url``: the one string that reaches this catalog again, the
        endpoint's ``rerun+http://HOST:PORT`` for a client made with one, else
        ``strata://HOST:PORT?store=...`` (as ``Server.url()`` gives it). ``ValueError`` for a
        client made without either and without ``bootstrap_servers``, which a stack's URL cannot
        describe."""
        if self._endpoint_url is not None:
            return self._endpoint_url
        if self._internal.bootstrap_servers is None:
            raise ValueError(no_kafka("a stack's URL"))
        return settings.stack_url(self._internal.bootstrap_servers, self._internal.location)

    @property
    def bootstrap_servers(self) -> str | None:
        """The Kafka cluster this client writes to; None for a client that reads the store only."""
        return self._internal.bootstrap_servers

    @property
    def store(self) -> str:
        """The projection store's location: a SQLite file's absolute path, or a URL."""
        return self._internal.location

    @property
    def producer_id(self) -> str:
        return self._internal.producer_id

    @property
    def object_store_config(self) -> ObjectStoreConfig:
        """Where ``s3://`` recordings are read from: the AWS variables, overridden key by key by
        ``object_store_config``."""
        return self._internal.object_store_config

    @property
    def worker_pids(self) -> list[int]:
        """The process ids of this client's worker processes serving now (see ``workers``): none
        before the first call that spreads its reads over them, nor with ``workers=0``."""
        return self._internal.workers.pids

    def start_workers(self) -> None:
        """Start this client's worker processes now rather than at the first call that spreads
        its reads over them (``workers``); it returns at once, and they start in the background.
        A server calls it as it starts, so that its first registration finds them ready (on a
        2-core machine, a first call of 100 files otherwise shares the cores with their start).
        Nothing with ``workers=0``."""
        self._internal.workers.start()

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The DataFusion session of this client: every DataFrame it returns belongs to it.

        Every table is in it by name, as it is now (``client.ctx.sql('SELECT * FROM labels')``;
        quote names with capitals or spaces). To query a dataset with SQL, register a
        ``reader()`` or ``segment_table()`` DataFrame with ``ctx.register_view()``, as in Rerun.
        """
        return self._internal.ctx

    def __repr__(self) -> str:
        return f"CatalogClient({self._internal!r})"

    def version_info(self) -> VersionInfo:
        """Rerun's ``version_info()``: ``version`` is strata's (``strata/0.1.0``), with no cloud
        provider or region and no optional Rerun server features."""
        return VersionInfo(version=f"strata/{_strata_version()}", cloud_provider=None,
                           cloud_region=None, features=[])

    def flush(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> list[WriteOutcome]:
        """Wait until the catalog has applied every write of this client, and return the
        outcomes of those not yet reported, in the order they were sent.

        A bulk write (a table's ``append``, ``overwrite`` and ``upsert``; a dataset's
        ``register``, ``register_prefix`` and ``unregister``) returns once Kafka has it. Every read
        through this client waits for its writes first, and raises the refusals of those it
        settles; ``flush`` does the same without reading. Raises ``WriteRefusedError`` naming
        each refused write and its reason (the others are applied), ``ProjectionTimeoutError`` if
        the projection does not get there within ``timeout_secs``.

        Examples:
            >>> table.append(rows); client.flush()  # doctest: +SKIP
            [WriteOutcome(what="append of 10000 rows to table 'labels'", status=<Status.ACCEPTED...>)]
        """
        return self._internal.settle(timeout_secs)

    def close(self, *, flush: bool = True) -> None:
        """Flush (``flush``: its refusals are raised), then stop the client's workers and close
        its producer and store connection. ``flush=False`` closes without waiting for the
        projection (no projector runs, say): the writes are in the log all the same, but a
        refusal among them is not reported."""
        self._internal.close(flush=flush)

    def as_of(self, point: int | datetime) -> CatalogClient:
        """The catalog as it was at ``point``: a log offset (the catalog the records before it
        make) or a timezone-aware ``datetime`` (the records produced up to then). Its entries
        are those of that point (a dataset deleted later is there, one created later is not),
        each read as of the point; it shares this client's connection, and a write through it is a
        ``ValueError``. ``ValueError`` for an offset past the end of the log.

        Examples:
            >>> client.as_of(datetime(2026, 3, 3, tzinfo=timezone.utc)).dataset_names()  # doctest: +SKIP
        """
        view = object.__new__(CatalogClient)
        view._internal = self._internal.at(point)
        view._internal.catalog = view
        view._endpoint_url = self._endpoint_url
        return view

    @property
    def point(self) -> int | None:
        """The log offset this client shows the catalog as of (``as_of``); None: as it is now."""
        return self._internal.point

    def __enter__(self) -> CatalogClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- entries ------------------------------------------------------------------------------

    def create_dataset(
        self, name: str, *, exist_ok: bool = False, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
    ) -> DatasetEntry:
        """Create a dataset and wait until the catalog has it.

        Raises ``AlreadyExistsError`` if the name is taken (unless ``exist_ok``, which returns
        the existing dataset), ``ValueError`` for an invalid name (nothing is sent).

        Examples:
            >>> client.create_dataset("droid")  # doctest: +SKIP
            DatasetEntry(name='droid', id=...)
        """
        operation = Operation.send(self._internal, uuid.uuid4(), entries.create_dataset(name))
        try:
            operation.wait(timeout_secs)
        except AlreadyExistsError:
            if exist_ok:
                return self.get_dataset(name=name)
            raise
        return self.get_dataset(id=operation.event.entry_id)

    def get_dataset(self, name: str | None = None, *, id: uuid.UUID | str | None = None) -> DatasetEntry:
        """A dataset, hidden ones too, by name (``LookupError`` if unknown) or by id
        (``NotFoundError``)."""
        return DatasetEntry(self._internal, self._internal.find_dataset(name, id))

    def datasets(self, *, include_hidden: bool = False) -> list[DatasetEntry]:
        """All datasets, oldest first; with ``include_hidden``, also every dataset's and table's
        hidden blueprint and asset datasets (``__bp_<owner id>``, ``__as_<owner id>``)."""
        return [DatasetEntry(self._internal, d) for d in self._internal.wait_for_store().datasets()
                if include_hidden or not d.hidden]

    def tables(self, *, include_hidden: bool = False) -> list[TableEntry]:
        """All tables, oldest first; with ``include_hidden``, first the system table
        ``__entries``, which lists every entry (``get_table(name="__entries")`` reads it too)."""
        return [table_entry(self._internal, t) for t in self._internal.tables(include_hidden=include_hidden)]

    def entries(self, *, include_hidden: bool = False) -> list[DatasetEntry | TableEntry]:
        """Every dataset and table, oldest first; ``entry.kind`` says which."""
        entries: list[DatasetEntry | TableEntry] = [*self.datasets(include_hidden=include_hidden),
                                                    *self.tables(include_hidden=include_hidden)]
        return sorted(entries, key=lambda e: (e.created_at, str(e.id)))

    def dataset_table(self) -> datafusion.DataFrame:
        """One row per dataset (not the hidden ones), oldest first, with what a listing of the
        catalog shows: ``name``, ``id`` (as text), ``segments``, ``layers`` (of all its
        segments), ``size_bytes`` (of the recordings its layers name) and ``updated_at`` (UTC).
        Counted in the store, without an entry object per dataset; as of the client's point for
        ``as_of``. Raises ``StoreUnavailableError`` if the store cannot be read.

        Examples:
            >>> client.dataset_table().sort(col("size_bytes"), ascending=False).limit(5)  # doctest: +SKIP
        """
        return self._internal.dataframe(views.datasets_table(self._internal.wait_for_store()))

    def dataset_names(self, *, include_hidden: bool = False) -> list[str]:
        return [d.name for d in self.datasets(include_hidden=include_hidden)]

    def table_names(self, *, include_hidden: bool = False) -> list[str]:
        return [t.name for t in self._internal.tables(include_hidden=include_hidden)]

    def entry_names(self, *, include_hidden: bool = False) -> list[str]:
        return [e.name for e in self.entries(include_hidden=include_hidden)]

    def changes(self, since: int | Change | None = None, *, dataset: str | DatasetEntry | None = None,
                timeout_secs: float | None = None) -> Iterator[Change]:
        """The catalog's changes as the projector commits them, in log order: datasets created,
        renamed or deleted, layers and segments added, replaced or removed, blueprints, tables and
        their writes, and rejected records with their reasons (``Change.kind`` says which).

        ``since=None`` yields only changes still to come; an offset, the changes made by the
        records from that offset on (0: all of them); a ``Change``, those after it, so a reader
        that stops and passes its last change resumes with every later change exactly once.
        ``dataset`` (a name or an entry) keeps one dataset's changes, across renames. The iterator
        blocks for new changes and ends once ``timeout_secs`` pass with none (``None``: never).
        Raises ``ValueError`` for a bad ``since``, ``LookupError`` for an unknown dataset.

        Examples:
            >>> for change in client.changes(0, dataset="droid", timeout_secs=5):  # doctest: +SKIP
            ...     print(change.position.offset, change.kind, change.segment_id, change.layer_name)
        """
        after = feed.start(self._internal.wait_for_store(), since)
        entry_id = None
        if dataset is not None:
            entry_id = dataset.id if isinstance(dataset, DatasetEntry) else self.get_dataset(dataset).id
        return feed.follow(self._internal.wait_for_store(), after, entry_id=entry_id,
                           timeout_secs=timeout_secs)

    def rejections(self) -> list[Rejection]:
        """The records the projector rejected as bad input (an undecodable record, an unknown
        event type, an invalid command), by topic, partition and offset: each with its
        ``position``, its ``raw`` bytes as the log has them and the ``reason``, so none is lost.
        The stream went on past each of them. As of the client's point for ``as_of``. Raises
        ``StoreUnavailableError`` if the store cannot be read.

        Examples:
            >>> for r in client.rejections():  # doctest: +SKIP
            ...     print(r.position.offset, len(r.raw), r.reason)
        """
        return self._internal.wait_for_store().rejections()

    def get_table(self, name: str | None = None, *, id: uuid.UUID | str | None = None) -> TableEntry:
        """A table by name (``LookupError`` if unknown) or by id (``NotFoundError``)."""
        return table_entry(self._internal, self._internal.find_table(name, id))

    def create_table(self, name: str, schema: pa.Schema, url: str | None = None) -> TableEntry:
        """Create an empty table with ``schema`` and wait until the catalog has it. A field with
        metadata ``rerun:is_table_index = true`` is the index ``upsert`` matches rows by.

        Its rows are kept in strata's log and projection. With ``url`` (a local path, ``file://``
        or ``s3://`` URL, as Rerun's), the projector also keeps a Lance dataset there equal to the
        table, one Lance version per change it sees, so tools that read Lance see the table; it
        is its ``storage_url``. ``AlreadyExistsError`` if an entry has the name, ``ValueError``
        for an invalid name or schema, or a ``url`` that already holds a Lance dataset (nothing
        is sent).

        Examples:
            >>> client.create_table("labels", pa.schema([("id", pa.int64())]))  # doctest: +SKIP
            TableEntry(name='labels', id=...)
        """
        operation = Operation.send(self._internal, uuid.uuid4(), entries.create_table(name, schema, url))
        operation.wait()
        return self.get_table(id=operation.event.entry_id)

    def register_table(self, name: str, url: str) -> TableEntry:
        """Register the Lance table at a ``file://`` URL as a table entry, read at its current
        version: later writes to the Lance table are not seen, and strata does not write it.
        ``NotFoundError`` if there is nothing at the URL, ``ValueError`` if it is not a Lance
        table, ``AlreadyExistsError`` if an entry has the name, ``MissingExtraError`` without
        ``strata[lance]``."""
        operation = Operation.send(self._internal, uuid.uuid4(), entries.register_table(name, url))
        operation.wait()
        return self.get_table(id=operation.event.entry_id)

