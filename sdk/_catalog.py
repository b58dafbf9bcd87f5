"""The catalog client and its dataset entries, in the shape of rerun-sdk's ``rerun.catalog``.

Every mutation is a command event appended to the log; the call waits until the projection has
passed the event's offset and reports the outcome the projector recorded for it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa

import settings
from events import (
    Command,
    CreateDataset,
    CreateTable,
    DefineSchema,
    DeleteDataset,
    Event,
    OnDuplicate,
    RegisterBlueprint,
    RegisterTable,
    RenameDataset,
    SetDefaultBlueprint,
    UnregisterLayers,
)
from events.names import check_dataset_name, check_layer_name, check_table_name
from producers import EventProducer, Position
from projector import CatalogReader, Change, Dataset, Outcome, Status, Table, open_store, table_rows
from projector.backends import describe, normalize
from projector.fold import MAX_PROPERTIES_BYTES
from sdk import _feed, _tables
from sdk._contents import Contents
from sdk._objects import ObjectStore, ObjectStoreConfig, ObjectStoreSettings, is_object_url, object_store
from sdk._recordings import Recording, local_path, read_blueprint_id, read_recording, with_properties
from sdk._selection import DatasetSelection
from sdk._table_entry import Entry, EntryKind, TableEntry, lance_table
from sdk._wait import DEFAULT_TIMEOUT_SECS, wait_for_positions
from sdk.errors import AlreadyExistsError, NotFoundError

SERVER_FILE = "server.json"
"""What a running ``Server`` writes about itself in its state directory, removed when it stops."""


def running_stack(state_dir: Path) -> dict[str, str]:
    """What the stack running on ``state_dir`` wrote about itself (bootstrap servers, store,
    Spark master); empty if none runs there."""
    path = state_dir / SERVER_FILE
    return json.loads(path.read_text()) if path.exists() else {}

RECORDING_SUFFIXES = (".rrd",)
"""What ``register_prefix`` registers."""

Properties = Mapping[str, Mapping[str, Any]]
"""Properties given with a URI: ``{entity: {field: value}}``, like ``rr.send_property``."""


def outcome_error(outcome: Outcome, what: str) -> Exception | None:
    """The exception a rejected outcome raises in the SDK, None if it was accepted."""
    message = f"{what}: {outcome.reason}"
    match outcome.status:
        case Status.ACCEPTED:
            return None
        case Status.ALREADY_EXISTS:
            return AlreadyExistsError(message)
        case Status.NOT_FOUND:
            return NotFoundError(message)
        case _:
            return ValueError(message)


@dataclass(frozen=True)
class RegistrationResult:
    """The segment ids of a registration, in the order of its URIs."""

    segment_ids: list[str]


@dataclass(frozen=True)
class SegmentRegistrationResult:
    uri: str
    segment_id: str
    error: str | None
    """None on success, else why this item failed."""

    @property
    def is_success(self) -> bool:
        return self.error is None

    @property
    def is_error(self) -> bool:
        return self.error is not None


@dataclass(frozen=True)
class _Item:
    uri: str
    segment_id: str
    event: Event
    position: Position


class RegistrationOperation:
    """A registration in flight: ``wait()`` for its outcome, or ``iter_results()`` per URI."""

    def __init__(self, client: CatalogClient, items: list[_Item]) -> None:
        self._client = client
        self._items = items

    def iter_results(
        self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
    ) -> Iterator[SegmentRegistrationResult]:
        """Wait, then yield ``(uri, segment_id, error)`` for each URI in request order."""
        self._client._wait([item.position for item in self._items], timeout_secs)
        for item in self._items:
            outcome = self._client._outcome(item.event)
            error = None if outcome.status is Status.ACCEPTED else outcome.reason
            yield SegmentRegistrationResult(item.uri, item.segment_id, error)

    def wait(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> RegistrationResult:
        """Block until the projection has applied every event of this registration.

        Returns the segment ids in request order. Raises ``ValueError`` naming each failed item
        (the others are registered), and ``TimeoutError`` (``ProjectionTimeoutError``) saying
        how far the projection got.

        >>> dataset.register([uri]).wait(timeout_secs=10).segment_ids  # doctest: +SKIP
        ['ILIAD_50aee79f_2023_07_12_20h_55m_08s']
        """
        results = list(self.iter_results(timeout_secs))
        failed = [r for r in results if r.error is not None]
        if failed:
            lines = "\n".join(f"- {r.uri}: {r.error}" for r in failed)
            raise ValueError(f"Registration failed for {len(failed)} of {len(results)} "
                             f"recordings:\n{lines}")
        return RegistrationResult([r.segment_id for r in results])


class Operation:
    """One command in flight: ``wait()`` raises what its outcome was, if it was not accepted."""

    def __init__(self, client: CatalogClient, event: Event, position: Position, what: str) -> None:
        self._client = client
        self._event = event
        self._position = position
        self._what = what

    def wait(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> Outcome:
        self._client._wait([self._position], timeout_secs)
        outcome = self._client._outcome(self._event)
        error = outcome_error(outcome, self._what)
        if error is not None:
            raise error
        return outcome


@dataclass(frozen=True)
class LayerInfo:
    name: str
    num_segments: int
    """Number of segments that have this layer."""


@dataclass(frozen=True)
class DatasetInfo:
    """An overview of a dataset, as ``DatasetEntry.info()`` returns it."""

    dataset_name: str
    num_segments: int
    size_bytes: int
    layers: frozenset[LayerInfo]
    property_columns: frozenset[str]
    num_component_columns: int
    """Columns of the dataset schema."""

    def __repr__(self) -> str:
        lines = [f"DatasetInfo({self.dataset_name}: {self.num_segments} segments, "
                 f"{self.size_bytes} bytes)",
                 f"  contents: {self.num_component_columns} columns",
                 f"  properties: {', '.join(sorted(self.property_columns)) or '(none)'}"]
        lines += [f"    {x.name}: in {x.num_segments} segments"
                  for x in sorted(self.layers, key=lambda x: x.name)]
        return "\n".join(lines)


class DatasetEntry(Entry):
    """A dataset in the catalog: a collection of segments, each the union of named layers.

    ``name``, ``updated_at`` and the tables are read from the projection at each access.
    """

    _kind_name = "dataset"

    def _lookup(self, entry_id: uuid.UUID) -> Dataset | None:
        return self._client._store.dataset(entry_id)

    @property
    def kind(self) -> EntryKind:
        return EntryKind.DATASET

    # -- entry lifecycle ----------------------------------------------------------------------

    def set_name(self, name: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Rename the dataset. ``AlreadyExistsError`` if another dataset has the name,
        ``ValueError`` for an invalid name (nothing is sent)."""
        check_dataset_name(name)
        self._client._submit(self._id, RenameDataset(name), f"renaming to {name!r}").wait(timeout_secs)

    def delete(self, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Delete the dataset: its segments disappear from every table, its name is free again,
        its id is never reused. ``NotFoundError`` if it is already deleted."""
        self._client._submit(self._id, DeleteDataset(), f"deleting dataset {self._seen.name!r}").wait(
            timeout_secs)

    # -- registration -------------------------------------------------------------------------

    def register(
        self,
        uris: str | Sequence[str],
        *,
        layer_name: str | Sequence[str] = "base",
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
        properties: Properties | Sequence[Properties | None] | None = None,
        object_store_config: ObjectStoreSettings = None,
    ) -> RegistrationOperation:
        """Register recordings (``file://`` or ``s3://`` URIs) as layers of their segments.

        Each file's recording id becomes its segment id. ``s3://`` objects are read with the
        client's object store settings, overridden key by key by ``object_store_config``
        (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
        ``session_token``, as a mapping or its JSON text); only their headers, footers and
        property chunks are fetched. ``layer_name`` is one name or one per
        URI. ``properties`` (``{entity: {field: value}}``, one mapping or one per URI) become
        ``property:<entity>:<field>`` columns, over the file's own properties. All files are read
        before anything is sent: a missing file raises ``NotFoundError``; an unreadable one, a bad
        argument, or the same (segment, layer) twice in one call raises ``ValueError``; and then
        nothing is produced. Returns an operation to ``wait()`` on.

        >>> dataset.register(["file:///data/a.rrd"], layer_name="quality").wait()  # doctest: +SKIP
        RegistrationResult(segment_ids=['ILIAD_50aee79f_2023_07_12_20h_55m_08s'])
        """
        uri_list = [uris] if isinstance(uris, str) else list(uris)
        if not uri_list:
            raise ValueError("register() needs at least one URI")
        layer_names = _per_uri("layer_name", layer_name, len(uri_list), str)
        for name in layer_names:
            check_layer_name(name)
        property_list = _per_uri("properties", properties, len(uri_list), Mapping)
        mode = _on_duplicate(on_duplicate)
        recordings = _read_recordings(uri_list, self._client._objects(object_store_config))
        recordings = [r if p is None else with_properties(r, p)
                      for r, p in zip(recordings, property_list, strict=True)]
        return self._register(recordings, layer_names, mode)

    def register_prefix(
        self,
        recordings_prefix: str,
        layer_name: str | None = None,
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
        *,
        object_store_config: ObjectStoreSettings = None,
    ) -> RegistrationOperation:
        """Register every ``.rrd`` under a ``file://`` directory or an ``s3://`` prefix,
        recursively, in path order (``object_store_config`` as in ``register``).

        Prints progress to stderr while reading a large prefix. ``ValueError`` if the prefix
        holds no recording, ``NotFoundError`` if it (or its bucket) does not exist.
        """
        objects = self._client._objects(object_store_config)
        if is_object_url(recordings_prefix):
            uris = objects.list(recordings_prefix, RECORDING_SUFFIXES)
        else:
            directory = local_path(recordings_prefix)
            if not directory.is_dir():
                raise NotFoundError(f"no directory at {recordings_prefix} ({directory})")
            uris = [p.as_uri() for p in sorted(directory.rglob("*"))
                    if p.is_file() and p.suffix.lower() in RECORDING_SUFFIXES]
        if not uris:
            raise ValueError(f"no recordings ({', '.join(RECORDING_SUFFIXES)}) under {recordings_prefix}")
        name = check_layer_name(layer_name if layer_name is not None else "base")
        mode = _on_duplicate(on_duplicate)
        recordings = _read_recordings(uris, objects)
        return self._register(recordings, [name] * len(recordings), mode)

    def _register(
        self, recordings: list[Recording], layer_names: list[str], mode: OnDuplicate
    ) -> RegistrationOperation:
        seen: dict[tuple[str, str], str] = {}
        for recording, name in zip(recordings, layer_names, strict=True):
            key = (recording.recording_id, name)
            if key in seen:
                raise ValueError(f'Segment "{key[0]}", layer "{name}" appears twice in one call: '
                                 f"{seen[key]} and {recording.uri}")
            seen[key] = recording.uri
            size = recording.properties.nbytes if recording.properties is not None else 0
            if size > MAX_PROPERTIES_BYTES:
                raise ValueError(f"{recording.uri}: its properties take {size} bytes, more than the "
                                 f"{MAX_PROPERTIES_BYTES} a layer may have; store large values in "
                                 "the recording's data instead")
        # Schemas travel by reference: each distinct one is defined once, before its first use.
        definitions: dict[str, bytes] = {}
        events = []
        for recording, name in zip(recordings, layer_names, strict=True):
            command, named = recording.register_layer(name, mode)
            for digest, schema in named.items():
                definitions.setdefault(digest, schema)
            events.append(self._client._event(self._id, command))
        unknown = self._client._undefined_schemas(list(definitions))
        events = [self._client._event(self._id, DefineSchema(digest, definitions[digest]))
                  for digest in unknown] + events
        positions = self._client._send(events)
        self._client._defined.update(unknown)
        registered = len(unknown)
        return RegistrationOperation(self._client, [
            _Item(r.uri, r.recording_id, event, position) for r, event, position in
            zip(recordings, events[registered:], positions[registered:], strict=True)
        ])

    def unregister(
        self, *, segments_to_drop: str | Sequence[str] = (), layers_to_drop: str | Sequence[str] = ()
    ) -> Operation:
        """Remove every (segment, layer) in the product of the two lists; an empty list means
        all. A segment disappears with its last layer. Both empty is a ``ValueError``.
        Unregistering what is not there changes nothing."""
        segments = [segments_to_drop] if isinstance(segments_to_drop, str) else list(segments_to_drop)
        layers = [layers_to_drop] if isinstance(layers_to_drop, str) else list(layers_to_drop)
        if not segments and not layers:
            raise ValueError("unregister() needs segments_to_drop or layers_to_drop (an empty "
                             "list means all, but not both)")
        return self._client._submit(self._id, UnregisterLayers(tuple(segments), tuple(layers)),
                                    "unregistering")

    # -- blueprints ---------------------------------------------------------------------------

    def register_blueprint(self, uri: str, set_default: bool = True, *,
                           timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> str:
        """Register an ``.rbl`` blueprint file (replacing one with the same blueprint id) and, by
        default, make it the dataset's default. Returns the blueprint id."""
        blueprint_id = read_blueprint_id(uri)
        self._client._submit(self._id, RegisterBlueprint(blueprint_id, uri, set_default),
                             f"registering blueprint {uri}").wait(timeout_secs)
        return blueprint_id

    def blueprints(self) -> list[str]:
        """The registered blueprint ids, in registration order."""
        return [b.blueprint_id for b in self._client._store.blueprints(self._id)]

    def default_blueprint(self) -> str | None:
        return self._current().default_blueprint

    def set_default_blueprint(self, blueprint_id: str | None, *,
                              timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make a registered blueprint the default (``NotFoundError`` if it is not registered),
        or clear the default with None."""
        self._client._submit(self._id, SetDefaultBlueprint(blueprint_id),
                             f"setting the default blueprint to {blueprint_id!r}").wait(timeout_secs)

    # -- reads --------------------------------------------------------------------------------

    def schema(self) -> pa.Schema:
        """The merged Arrow schema of every layer's data (empty before the first layer)."""
        schema = self._current().schema
        return pa.ipc.read_schema(pa.py_buffer(schema)) if schema else pa.schema([])

    def segment_ids(self) -> list[str]:
        """The dataset's segment ids, in registration order."""
        return [s.segment_id for s in self._client._store.segments(self._id)]

    def info(self) -> DatasetInfo:
        """Segments, bytes, segments per layer, property columns and schema width."""
        layers = self._layer_table()
        table = _tables.segment_table(layers, self._property_schemas(layers))
        return DatasetInfo(
            dataset_name=self._current().name,
            num_segments=table.num_rows,
            size_bytes=sum(layers.column("size_bytes").to_pylist()),
            layers=frozenset(LayerInfo(name, count) for name, count in
                             Counter(layers.column("layer_name").to_pylist()).items()),
            property_columns=frozenset(n for n in table.column_names if n.startswith("property:")),
            num_component_columns=len(self.schema()),
        )

    def segment_table(self, join_meta: datafusion.DataFrame | None = None,
                      join_key: str = "rerun_segment_id") -> datafusion.DataFrame:
        """One row per segment: ``rerun_segment_id``, ``rerun_layer_names`` (registration order),
        ``rerun_storage_urls``, ``rerun_last_updated_at``, ``rerun_size_bytes``, and one
        ``property:<entity>:<field>`` column per property (the latest layer with a value wins).

        ``join_meta`` (a DataFrame with a ``join_key`` column) is left-joined on ``join_key``, as
        in Rerun. Raises ``ValueError`` if either side lacks ``join_key``.
        """
        layers = self._layer_table()
        table = self._client._dataframe(_tables.segment_table(layers, self._property_schemas(layers)))
        if join_meta is None:
            return table
        if join_key not in table.schema().names:
            raise ValueError(f"Dataset segment table must contain join_key column '{join_key}'.")
        if join_key not in join_meta.schema().names:
            raise ValueError(f"join_meta must contain join_key column '{join_key}'.")
        renamed = f"{join_key}_meta"
        return table.join(join_meta.with_column_renamed(join_key, renamed), left_on=join_key,
                          right_on=renamed, how="left").drop(renamed)

    def _layer_table(self) -> pa.Table:
        return self._client._store.layer_table(self._id)

    def _property_schemas(self, layers: pa.Table) -> dict[str, bytes]:
        """The schemas the layers' properties name, by digest."""
        return _tables.property_schemas(self._client._store, layers)

    def manifest(self) -> datafusion.DataFrame:
        """One row per (segment, layer): ``rerun_segment_id``, ``rerun_layer_name``,
        ``rerun_storage_url``, ``rerun_registration_time``, ``rerun_last_updated_at``,
        ``rerun_size_bytes``, ``rerun_schema_sha256``, and each layer's own properties."""
        layers = self._layer_table()
        return self._client._dataframe(_tables.manifest_table(layers, self._property_schemas(layers)))

    # -- data ---------------------------------------------------------------------------------

    def filter_segments(self, segment_ids: str | Sequence[str] | datafusion.DataFrame) -> DatasetSelection:
        """A selection of these segments (see ``DatasetSelection.filter_segments``)."""
        return DatasetSelection(self).filter_segments(segment_ids)

    def filter_contents(self, exprs: Contents) -> DatasetSelection:
        """A selection of the entities the expressions select (see
        ``DatasetSelection.filter_contents``)."""
        return DatasetSelection(self).filter_contents(exprs)

    def reader(
        self,
        index: str | None,
        *,
        include_semantically_empty_columns: bool = False,
        include_tombstone_columns: bool = False,
        fill_latest_at: bool = False,
        using_index_values: Any = None,
    ) -> datafusion.DataFrame:
        """Every segment's data as a DataFusion DataFrame (see ``DatasetSelection.reader``).

        >>> dataset.reader(index="real_time").select("rerun_segment_id", "real_time")  # doctest: +SKIP
        """
        return DatasetSelection(self).reader(
            index, include_semantically_empty_columns=include_semantically_empty_columns,
            include_tombstone_columns=include_tombstone_columns, fill_latest_at=fill_latest_at,
            using_index_values=using_index_values)

    def to_spark(self, spark: Any, index: str | None, **options: Any) -> Any:
        """Every segment's data as a Spark DataFrame, a partition per segment (see
        ``DatasetSelection.to_spark``)."""
        return DatasetSelection(self).to_spark(spark, index, **options)

    def get_index_ranges(self) -> datafusion.DataFrame:
        """The first and last value of every index, per segment (see
        ``DatasetSelection.get_index_ranges``)."""
        return DatasetSelection(self).get_index_ranges()


def _per_uri(name: str, value: Any, count: int, single: type) -> list[Any]:
    """``value`` repeated for each URI if it is one, else checked to have one per URI."""
    if value is None or isinstance(value, single):
        return [value] * count
    values = list(value)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries for {count} URIs; pass one, or one per URI")
    return values


def _on_duplicate(value: OnDuplicate | str) -> OnDuplicate:
    try:
        return OnDuplicate(str(value.value if isinstance(value, OnDuplicate) else value).lower())
    except ValueError:
        raise ValueError(f"on_duplicate must be one of {[m.value for m in OnDuplicate]}, "
                         f"got {value!r}") from None


OBJECT_READERS = 16
"""Recordings in object storage read at once by one registration: each costs round trips, not
CPU."""


def _read_recordings(uris: list[str], objects: ObjectStore) -> list[Recording]:
    """What registration needs of each URI, in order; ``s3://`` ones read in parallel. Prints
    progress to stderr for 100 or more."""
    recordings: list[Recording] = []

    def read(uri: str) -> Recording:
        return read_recording(uri, objects)

    with concurrent.futures.ThreadPoolExecutor(OBJECT_READERS) as pool:
        try:
            for recording in (pool.map if any(map(is_object_url, uris)) else map)(read, uris):
                recordings.append(recording)
                done = len(recordings)
                if len(uris) >= 100 and (done % 100 == 0 or done == len(uris)):
                    print(f"\rreading recordings: {done}/{len(uris)}", end="", file=sys.stderr)
        except BaseException:
            pool.shutdown(cancel_futures=True)  # the first error is the call's: stop the rest
            raise
    if len(uris) >= 100:
        print(file=sys.stderr)
    return recordings


class CatalogClient:
    """A client of a strata catalog: writes go to Kafka, reads come from the projection store.

    ``store`` is the projection store the stack's projector writes: its SQLite file (on the
    projector's host) or its PostgreSQL URL (from any host). The client only reads it, and raises
    ``StoreUnavailableError`` if it cannot (``ValueError`` for a location of an unknown kind).

    >>> client = CatalogClient("localhost:9092", ".strata/store.db")  # doctest: +SKIP
    >>> client = CatalogClient("kafka-1:9092", store="postgresql://reader@db/strata")  # doctest: +SKIP
    >>> client = CatalogClient.from_state_dir(".strata")  # written by ``strata up``
    """

    def __init__(
        self,
        bootstrap_servers: str,
        store: str | Path,
        *,
        kafka_config: Mapping[str, Any] | None = None,
        producer_id: str | None = None,
        delivery_timeout_secs: float = 15.0,
        object_store_config: ObjectStoreSettings = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.object_store_config = ObjectStoreConfig.resolve(object_store_config)
        """Where ``s3://`` recordings are read from: the AWS variables, overridden key by key by
        ``object_store_config``."""
        self.store = normalize(store)
        self.producer_id = producer_id or f"strata-sdk@{os.uname().nodename}:{os.getpid()}"
        self._store: CatalogReader = open_store(self.store, read_only=True)
        self._producer = EventProducer(bootstrap_servers,
                                       config={**settings.kafka_options(), **(kafka_config or {})},
                                       delivery_timeout_secs=delivery_timeout_secs)
        self._ctx = datafusion.SessionContext()
        self._ctx_tables: dict[str, tuple[uuid.UUID, int]] = {}
        """The tables registered in ``ctx`` by name, with the revision registered."""
        self._ctx_version: int | None = None
        self._defined: set[str] = set()
        """Schema digests this client has seen defined, in the store or by its own events."""

    @classmethod
    def from_state_dir(cls, state_dir: str | Path | None = None, **kwargs: Any) -> CatalogClient:
        """Connect to the stack that ``strata up`` runs on ``state_dir`` (default: $STRATA_HOME
        or ./.strata). Raises ``FileNotFoundError`` if nothing was started there."""
        directory = Path(state_dir) if state_dir is not None else settings.home()
        info = running_stack(directory)
        if not info:
            raise FileNotFoundError(f"no {SERVER_FILE} in {directory}: start the stack with "
                                    f"'strata up --data-dir {directory}' first")
        return cls(info["bootstrap_servers"], info["store"], **kwargs)

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The DataFusion session of this client: every DataFrame it returns belongs to it.

        Every table is in it by name, as it is now (``client.ctx.sql('SELECT * FROM labels')``;
        quote names with capitals or spaces). To query a dataset with SQL, register a
        ``reader()`` or ``segment_table()`` DataFrame with ``ctx.register_view()``, as in Rerun.
        """
        version = self._store.data_version()
        if version != self._ctx_version:
            self._ctx_version = version
            current = {t.name: t for t in self._store.tables()}
            for name, registered in list(self._ctx_tables.items()):
                table = current.get(name)
                if table is None or (table.id, table.revision) != registered:
                    self._ctx.deregister_table(name)
                    del self._ctx_tables[name]
            for name, table in current.items():
                if name not in self._ctx_tables:
                    self._ctx.register_view(name, self._dataframe(self._table_data(table)))
                    self._ctx_tables[name] = (table.id, table.revision)
        return self._ctx

    def __repr__(self) -> str:
        return f"CatalogClient(bootstrap_servers={self.bootstrap_servers!r}, store={describe(self.store)!r})"

    def _objects(self, override: ObjectStoreSettings = None) -> ObjectStore:
        """The object store of this client's settings, with ``override`` winning key by key."""
        return object_store(self.object_store_config.updated(override))

    def close(self) -> None:
        self._producer.close()
        self._store.close()

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

        >>> client.create_dataset("droid")  # doctest: +SKIP
        DatasetEntry(name='droid', id=...)
        """
        check_dataset_name(name)
        operation = self._submit(uuid.uuid4(), CreateDataset(name), f"creating dataset {name!r}")
        try:
            operation.wait(timeout_secs)
        except AlreadyExistsError:
            if exist_ok:
                return self.get_dataset(name=name)
            raise
        return self.get_dataset(id=operation._event.dataset_id)

    def get_dataset(self, name: str | None = None, *, id: uuid.UUID | str | None = None) -> DatasetEntry:
        """A dataset by name (``LookupError`` if unknown) or by id (``NotFoundError``)."""
        return DatasetEntry(self, self._entry("dataset", name, id))

    def datasets(self, *, include_hidden: bool = False) -> list[DatasetEntry]:
        """All datasets, oldest first. strata has no hidden entries: ``include_hidden`` is
        accepted, as in Rerun, and changes nothing."""
        return [DatasetEntry(self, d) for d in self._store.datasets()]

    def tables(self, *, include_hidden: bool = False) -> list[TableEntry]:
        """All tables, oldest first."""
        return [TableEntry(self, t) for t in self._store.tables()]

    def entries(self, *, include_hidden: bool = False) -> list[DatasetEntry | TableEntry]:
        """Every dataset and table, oldest first; ``entry.kind`` says which."""
        return sorted([*self.datasets(), *self.tables()], key=lambda e: (e.created_at, str(e.id)))

    def dataset_names(self, *, include_hidden: bool = False) -> list[str]:
        return [d.name for d in self._store.datasets()]

    def table_names(self, *, include_hidden: bool = False) -> list[str]:
        return [t.name for t in self._store.tables()]

    def entry_names(self, *, include_hidden: bool = False) -> list[str]:
        return [e.name for e in self.entries()]

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

        >>> for change in client.changes(0, dataset="droid", timeout_secs=5):  # doctest: +SKIP
        ...     print(change.position.offset, change.kind, change.segment_id, change.layer_name)
        """
        after = _feed.start(self._store, since)
        entry_id = None
        if dataset is not None:
            entry_id = dataset.id if isinstance(dataset, DatasetEntry) else self.get_dataset(dataset).id
        return _feed.follow(self._store, after, entry_id=entry_id, timeout_secs=timeout_secs)

    def get_table(self, name: str | None = None, *, id: uuid.UUID | str | None = None) -> TableEntry:
        """A table by name (``LookupError`` if unknown) or by id (``NotFoundError``)."""
        return TableEntry(self, self._entry("table", name, id))

    def create_table(self, name: str, schema: pa.Schema, url: str | None = None) -> TableEntry:
        """Create an empty table with ``schema`` and wait until the catalog has it. A field with
        metadata ``rerun:is_table_index = true`` is the index ``upsert`` matches rows by.

        Its rows are kept in strata's log and projection, so ``url`` (where Rerun's server would
        put a Lance table) must be None. ``AlreadyExistsError`` if an entry has the name,
        ``ValueError`` for an invalid name or schema (nothing is sent).

        >>> client.create_table("labels", pa.schema([("id", pa.int64())]))  # doctest: +SKIP
        TableEntry(name='labels', id=...)
        """
        check_table_name(name)
        if url is not None:
            raise ValueError(f"create_table(url={url!r}): strata keeps a created table's rows in its "
                             "log, not at a URL; leave url out, or write a Lance table there and "
                             "register_table() it to read it")
        if not isinstance(schema, pa.Schema):
            raise ValueError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        table_rows.check_schema(schema)
        operation = self._submit(uuid.uuid4(), CreateTable(name, schema.serialize().to_pybytes()),
                                 f"creating table {name!r}")
        operation.wait()
        return self.get_table(id=operation._event.dataset_id)

    def register_table(self, name: str, url: str) -> TableEntry:
        """Register the Lance table at a ``file://`` URL as a table entry, read at its current
        version: later writes to the Lance table are not seen, and strata does not write it.
        ``NotFoundError`` if there is nothing at the URL, ``ValueError`` if it is not a Lance
        table, ``AlreadyExistsError`` if an entry has the name."""
        check_table_name(name)
        lance = lance_table(url)
        schema = lance.schema
        table_rows.check_schema(schema)
        command = RegisterTable(name, url, schema.serialize().to_pybytes(), lance.version)
        operation = self._submit(uuid.uuid4(), command, f"registering table {name!r}")
        operation.wait()
        return self.get_table(id=operation._event.dataset_id)

    # -- plumbing shared by entries and operations --------------------------------------------

    def _entry(self, kind: str, name: str | None, id: uuid.UUID | str | None) -> Any:
        """The live ``kind`` entry named ``name`` or with id ``id`` (exactly one of them). A name
        of no entry raises ``LookupError``, a name of an entry of the other kind ``NotFoundError``,
        as Rerun's server does."""
        lookups = {"dataset": (self._store.dataset_by_name, self._store.dataset),
                   "table": (self._store.table_by_name, self._store.table)}
        by_name, by_id = lookups[kind]
        if (name is None) == (id is None):
            raise ValueError(f"get_{kind}() takes exactly one of name or id")
        if name is not None:
            found = by_name(name)
            if found is not None:
                return found
            for other, (other_by_name, _) in lookups.items():
                if other != kind and other_by_name(name) is not None:
                    raise NotFoundError(f"{name!r} is a {other}, not a {kind}: use get_{other}({name!r})")
            raise LookupError(f"No {kind} found with name {name!r}")
        try:
            entry_id = id if isinstance(id, uuid.UUID) else uuid.UUID(str(id))
        except ValueError:
            raise ValueError(f"a {kind} id is a UUID, got {id!r}") from None
        found = by_id(entry_id)
        if found is None or found.deleted:
            raise NotFoundError(f"no {kind} with id {id}")
        return found

    def _event(self, dataset_id: uuid.UUID, command: Command) -> Event:
        return Event(dataset_id=dataset_id, command=command, producer_id=self.producer_id)

    def _undefined_schemas(self, digests: list[str]) -> list[str]:
        """Of ``digests``, those neither in the store nor defined earlier by this client (its
        definitions are in the log before anything it produces next), in the given order."""
        candidates = [d for d in digests if d not in self._defined]
        stored = set(self._store.schemas(candidates))
        self._defined.update(stored)
        return [d for d in candidates if d not in stored]

    def _send(self, events: list[Event]) -> list[Position]:
        return self._producer.send(events)

    def _submit(self, dataset_id: uuid.UUID, command: Command, what: str) -> Operation:
        event = self._event(dataset_id, command)
        [position] = self._send([event])
        return Operation(self, event, position, what)

    def _wait(self, positions: list[Position], timeout_secs: float | None) -> None:
        wait_for_positions(self._store, positions, timeout_secs)

    def _outcome(self, event: Event) -> Outcome:
        outcome = self._store.outcome(event.event_id)
        if outcome is None:
            # The projection passed the event's offset but recorded no outcome: the record was
            # rejected as undecodable, which our own encoder never produces.
            raise RuntimeError(f"the projector recorded no outcome for event {event.event_id}")
        return outcome

    def _dataframe(self, table: pa.Table) -> datafusion.DataFrame:
        return self._ctx.from_arrow(table)

    def _table_data(self, table: Table) -> pa.Table:
        """A table's rows: from the projection, or a registered table's Lance version."""
        if not table.storage_url:
            return self._store.table_data(table)
        return lance_table(table.storage_url).checkout_version(table.lance_version).to_table()
