"""Dataset entries, in the shape of rerun-sdk's ``DatasetEntry``: registering recordings as
layers of segments (``sdk._registration``), blueprints, and the catalog's reads of a dataset
(segment table, manifest, schema); the recordings' data through ``DatasetSelection``.

Every mutation is a command event appended to the log; the call's operation waits until the
projection has passed the event's offset and reports the outcome the projector recorded for it.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import datafusion
import pyarrow as pa
import pyarrow.compute as pc

from events import (
    AssetMode,
    AssetScopeEdit,
    CreateTag,
    DeleteDataset,
    DeleteTag,
    OnDuplicate,
    RenameDataset,
    ScopeAsset,
    UnregisterLayers,
)
from events.names import check_dataset_name, check_tag_name
from projector import (
    AssetScope,
    CatalogReader,
    Dataset,
    DatasetKind,
    EntryKind,
    Tag,
    companion_id,
    schemas,
    views,
)
from recordings import (
    Contents,
    LayerFile,
    NotFoundError,
    ObjectStore,
    ObjectStoreSettings,
    Progress,
    WorkerPool,
    layer_files,
    read_recording,
    rerun_schema,
    segment_store,
)
from sdk import _registration
from sdk._connection import Connection
from sdk._entry import Entry
from sdk._operations import Operation, RegistrationOperation
from sdk._registration import Properties
from sdk._selection import DatasetSelection
from sdk._wait import DEFAULT_TIMEOUT_SECS

if TYPE_CHECKING:
    from rerun.catalog import Schema


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




class DatasetEntry(Entry[Dataset]):
    """A dataset in the catalog: a collection of segments, each the union of named layers.

    ``name``, ``updated_at`` and the tables are read from the projection at each access.
    """

    _kind_name = "dataset"

    def _lookup(self, store: CatalogReader, entry_id: uuid.UUID) -> Dataset | None:
        return store.dataset(entry_id)

    @property
    def kind(self) -> EntryKind:
        """``DATASET``, or for a hidden one ``BLUEPRINT_DATASET`` or ``ASSET_DATASET``."""
        return self._seen.entry_kind

    def as_of(self, point: int | datetime | str) -> DatasetEntry:
        """The dataset as the catalog had it at ``point``: a log offset (the catalog the records
        before it make), a timezone-aware ``datetime`` (the records produced up to then) or the
        name of one of its tags (``create_tag``; ``LookupError`` if it has none by that name). Its
        reads (``segment_table``, ``manifest``, ``segment_ids``, ``schema``, ``filter_segments``,
        ``filter_contents``, ``reader``, ``get_index_ranges``) show the segments and layers of
        that point, reading the files those layers name; a write through it is a ``ValueError``.
        ``NotFoundError`` if the dataset did not exist then, ``ValueError`` for an offset past
        the end of the log.

        Examples:
            >>> before = dataset.as_of(1200)  # doctest: +SKIP
            >>> before.segment_table().to_arrow_table()  # doctest: +SKIP
        """
        view = self._at(point)
        return DatasetEntry(view, self._record_at(view))

    def _at(self, point: int | datetime | str) -> Connection:
        return self._internal.at(self._tag(point).offset if isinstance(point, str) else point)

    def diff(self, before: int | datetime | str, after: int | datetime | str | None = None
             ) -> datafusion.DataFrame:
        """What changed in the dataset from point ``before`` to point ``after`` (default: now),
        points as ``as_of`` takes them: a row per segment added or removed, per layer added,
        removed or replaced (with both storage URLs and registration times) and per property
        whose merged value changed (both values as text); columns ``rerun_segment_id``,
        ``rerun_layer_name``, ``change``, ``old_storage_url``, ``new_storage_url``,
        ``old_registration_time``, ``new_registration_time``, ``property``, ``old_value``,
        ``new_value``.

        Examples:
            >>> dataset.diff("train-2026-11-25").filter(col("change") == "layer_replaced")  # doctest: +SKIP
        """
        old = self._at(before).wait_for_store()
        new = self._internal.wait_for_store() if after is None else self._at(after).wait_for_store()
        return self._internal.dataframe(views.diff_table(old, new, self._id))

    def create_tag(self, name: str, point: int | datetime | None = None, *,
                   timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> Tag:
        """Name a point of the dataset's history, so that ``as_of(name)`` reads the catalog of
        that point however the dataset changes later: by default just after this client's last
        write (or the catalog now, if it has written nothing), else a log offset or a
        timezone-aware ``datetime`` as ``as_of`` takes them. The tag is a command in the log,
        replayed like the others. ``AlreadyExistsError`` if the dataset has a tag of that name
        (to move a tag, delete it first), ``ValueError`` for an invalid name or point (nothing is
        sent).

        Examples:
            >>> dataset.create_tag("train-2026-11-25")  # doctest: +SKIP
            Tag(dataset_id=..., name='train-2026-11-25', offset=48213, ...)
        """
        check_tag_name(name)
        self._internal.writable()
        offset = self._internal.here() if point is None else self._internal.resolve(point)
        what = f"tagging offset {offset} of dataset {self._seen.name!r} as {name!r}"
        Operation.submit(self._internal, self._id, CreateTag(name, offset), what).wait(timeout_secs)
        return self._tag(name)

    def tags(self) -> list[Tag]:
        """The dataset's tags, by offset then name."""
        return self._internal.wait_for_store().tags(self._id)

    def delete_tag(self, name: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Remove a tag; the name may name another point afterwards. ``NotFoundError`` if the
        dataset has no tag of that name."""
        Operation.submit(self._internal, self._id, DeleteTag(name),
                         f"deleting tag {name!r} of dataset {self._seen.name!r}").wait(timeout_secs)

    def _tag(self, name: str) -> Tag:
        tag = self._internal.wait_for_store().tag(self._id, name)
        if tag is None:
            names = ", ".join(repr(t.name) for t in self.tags()) or "none"
            raise LookupError(f"dataset {self._seen.name!r} has no tag {name!r} (its tags: {names})")
        return tag

    # -- entry lifecycle ----------------------------------------------------------------------

    def set_name(self, name: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Rename the dataset. ``AlreadyExistsError`` if another dataset has the name,
        ``ValueError`` for an invalid name (nothing is sent)."""
        check_dataset_name(name)
        Operation.submit(self._internal, self._id, RenameDataset(name), f"renaming to {name!r}").wait(
            timeout_secs)

    def delete(self, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Delete the dataset, and its hidden blueprint and asset datasets: its segments disappear
        from every table, its name is free again, its id is never reused. ``NotFoundError`` if it
        is already deleted."""
        Operation.submit(self._internal, self._id, DeleteDataset(),
                         f"deleting dataset {self._seen.name!r}").wait(timeout_secs)

    # -- registration -------------------------------------------------------------------------

    def register(
        self,
        uris: str | Sequence[str],
        *,
        layer_name: str | Sequence[str] = "base",
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
        properties: Properties | Sequence[Properties | None] | None = None,
        object_store_config: ObjectStoreSettings = None,
        progress: Progress | None = None,
    ) -> RegistrationOperation:
        """Register recordings (``file://`` or ``s3://`` URIs) as layers of their segments.

        Each file's recording id becomes its segment id. ``s3://`` objects are read with the
        client's object store settings, overridden key by key by ``object_store_config``
        (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
        ``session_token``, as a mapping or its JSON text); only their headers, footers and
        property chunks are fetched. ``layer_name`` is one name or one per
        URI. ``properties`` (``{entity: {field: value}}``, one mapping or one per URI) become
        ``property:<entity>:<field>`` columns, over the file's own properties. ``progress`` is
        called with (recordings read, total) while the files are read, in the calling thread:
        first with (0, total), then as they are read. All files are read before anything is
        sent: a missing file raises ``NotFoundError``; an unreadable one, a bad argument, or the
        same (segment, layer) twice in one call raises ``ValueError``; and then nothing is
        produced. Returns an operation to ``wait()`` on.

        Examples:
            >>> dataset.register(["file:///data/a.rrd"], layer_name="quality").wait()  # doctest: +SKIP
            RegistrationResult(segment_ids=['ILIAD_50aee79f_2023_07_12_20h_55m_08s'])
            >>> dataset.register(uris, progress=lambda done, total: bar.update(done))  # doctest: +SKIP
        """
        self._internal.writable()
        request = _registration.request(uris, layer_name, on_duplicate, properties)
        return _registration.register(self._internal, self._id, request,
                                      objects=self._internal.objects(object_store_config),
                                      blueprint=self._seen.kind is DatasetKind.BLUEPRINT, progress=progress)

    def register_prefix(
        self,
        recordings_prefix: str,
        layer_name: str | None = None,
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
        *,
        object_store_config: ObjectStoreSettings = None,
        progress: Progress | None = None,
    ) -> RegistrationOperation:
        """Register every ``.rrd`` under a ``file://`` directory or an ``s3://`` prefix,
        recursively, in path order (``object_store_config`` and ``progress`` as in ``register``).

        ``ValueError`` if the prefix holds no recording, ``NotFoundError`` if it (or its bucket)
        does not exist.
        """
        self._internal.writable()
        objects = self._internal.objects(object_store_config)
        request = _registration.prefix_request(recordings_prefix, layer_name, on_duplicate, objects)
        return _registration.register(self._internal, self._id, request, objects=objects,
                                      blueprint=self._seen.kind is DatasetKind.BLUEPRINT, progress=progress)

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
        return Operation.submit(self._internal, self._id, UnregisterLayers(tuple(segments), tuple(layers)),
                                "unregistering")

    # -- hidden datasets ----------------------------------------------------------------------

    def blueprint_dataset(self) -> DatasetEntry | None:
        """The hidden dataset of this dataset's blueprints (None for a hidden dataset); deleted
        with the dataset. ``NotFoundError`` if it was deleted on its own."""
        return None if self._seen.hidden else self._companion(DatasetKind.BLUEPRINT)

    def register_blueprint(self, uri: str, set_default: bool = True, *, segment_table: bool = False,
                           object_store_config: ObjectStoreSettings = None,
                           timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> str:
        """Register an ``.rbl`` file (``rr.blueprint.Blueprint.save``) in the blueprint dataset,
        replacing a blueprint with its id, and by default make it the default: of the dataset's
        recordings, or with ``segment_table`` of its segment table. Returns its name, the
        blueprint's id, as ``blueprints()`` lists it. ``ValueError`` for a file that holds no
        blueprint, ``LookupError`` for a hidden dataset (it has no blueprint dataset)."""
        return self._register_blueprint(uri, set_default, segment_table, object_store_config, timeout_secs)

    def default_segment_table_blueprint(self) -> str | None:
        """The name of the segment table's default blueprint, or None."""
        return self._current().default_segment_table_blueprint

    def set_default_segment_table_blueprint(self, blueprint_name: str | None, *,
                                            timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make ``blueprint_name`` the segment table's default blueprint (None: no default)."""
        self._set_default(blueprint_name, True, timeout_secs)

    def asset_dataset(self) -> DatasetEntry | None:
        """The hidden dataset of this dataset's assets (None for a hidden dataset); deleted with
        the dataset. ``NotFoundError`` if it was deleted on its own."""
        return None if self._seen.hidden else self._companion(DatasetKind.ASSET)

    def _companion(self, kind: DatasetKind) -> DatasetEntry:
        return companion_dataset(self._internal, self._id, kind)

    # -- assets -------------------------------------------------------------------------------
    # An asset is a static recording (meshes, a URDF, calibration) registered as a segment of the
    # asset dataset, with a scope: the segments of this dataset it applies to.

    def assets(self) -> list[str]:
        """The segment ids of the registered assets, in registration order."""
        assets = self.asset_dataset()
        return [] if assets is None else assets.segment_ids()

    def register_asset(self, uri: str, *, mode: AssetMode | str = AssetMode.OPT_OUT,
                       segments: str | Sequence[str] | None = None,
                       object_store_config: ObjectStoreSettings = None,
                       timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> str:
        """Register an ``.rrd`` of static data only as an asset, replacing an asset with its
        recording id, and return that id. ``mode="opt_out"`` (the default) applies it to every
        segment but ``segments``; ``"opt_in"`` only to ``segments``. ``ValueError`` for a file with
        temporal data or another mode, ``NotFoundError`` if the asset dataset was deleted."""
        asset_mode = _asset_mode(mode)
        assets = self._asset_dataset_of("register_asset")
        registration = assets.register([uri], on_duplicate=OnDuplicate.REPLACE,
                                       object_store_config=object_store_config)
        [segment_id] = registration.wait(timeout_secs).segment_ids
        assets._scope(segment_id, AssetScopeEdit.SET, segments or (), asset_mode, timeout_secs)
        return segment_id

    def unregister_asset(self, segment_id: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Unregister an asset and its scope; an asset that is not registered is a no-op."""
        assets = self._asset_dataset_of("unregister_asset")
        assets.unregister(segments_to_drop=[segment_id]).wait(timeout_secs)

    def add_segments_to_asset(self, asset_segment_id: str, segments: str | Sequence[str], *,
                              timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make an asset apply to ``segments`` too, in its mode (added to an opt-in list, removed
        from an opt-out one). Applied by the projector in log order, so concurrent edits of one
        asset all count. ``NotFoundError`` for an asset that is not registered."""
        self._asset_dataset_of("add_segments_to_asset")._scope(
            asset_segment_id, AssetScopeEdit.APPLY, segments, AssetMode.OPT_OUT, timeout_secs)

    def remove_segments_from_asset(self, asset_segment_id: str, segments: str | Sequence[str], *,
                                   timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Stop an asset from applying to ``segments``; the inverse of ``add_segments_to_asset``."""
        self._asset_dataset_of("remove_segments_from_asset")._scope(
            asset_segment_id, AssetScopeEdit.UNAPPLY, segments, AssetMode.OPT_OUT, timeout_secs)

    def assets_for_segment(self, segment_id: str) -> list[str]:
        """The assets that apply to ``segment_id``, in registration order."""
        assets = self._asset_dataset_of("assets_for_segment")
        store = self._internal.wait_for_store()
        scopes = {scope.segment_id: scope for scope in store.asset_scopes(assets.id)}
        return [asset for asset in assets.segment_ids()
                if scopes.get(asset, AssetScope(assets.id, asset)).applies_to(segment_id)]

    def _asset_dataset_of(self, call: str) -> DatasetEntry:
        assets = self.asset_dataset()
        if assets is None:
            raise LookupError(f"{call}: {self._seen.name!r} is a hidden dataset and has no asset dataset")
        return assets

    def _scope(self, asset: str, edit: AssetScopeEdit, segments: str | Sequence[str], mode: AssetMode,
               timeout_secs: float | None) -> None:
        named = (segments,) if isinstance(segments, str) else tuple(segments)  # one id, or several
        Operation.submit(self._internal, self._id, ScopeAsset(asset, edit, mode, named),
                         f"scoping asset {asset!r}").wait(timeout_secs)

    # -- reads --------------------------------------------------------------------------------

    def schema(self) -> Schema:
        """Rerun's ``Schema`` of the dataset: its index columns and the component columns of
        every layer (``index_columns()``, ``component_columns()``, ``entity_paths()``,
        ``column_names()``, ``to_arrow()``...); empty before the first layer."""
        return rerun_schema(self.arrow_schema())

    def arrow_schema(self) -> pa.Schema:
        """The merged Arrow schema of every layer's data, with Rerun's field metadata (empty
        before the first layer). The schema of a layer registered without one (a producer may
        leave it out) is read from its file, once per process."""
        dataset = self._current()
        schema = dataset.schema
        if dataset.schemaless_layers:
            schema = _with_file_schemas(schema, self._layer_table(), self._internal.objects(),
                                        self._internal.workers)
        return pa.ipc.read_schema(pa.py_buffer(schema)) if schema else pa.schema([])

    def segment_ids(self) -> list[str]:
        """The dataset's segment ids, in registration order."""
        return [s.segment_id for s in self._internal.wait_for_store().segments(self._id)]

    def info(self) -> DatasetInfo:
        """Segments, bytes, segments per layer, property columns and schema width."""
        layers = self._layer_table()
        table = views.segment_table(layers, self._property_schemas(layers))
        return DatasetInfo(
            dataset_name=self._current().name,
            num_segments=table.num_rows,
            size_bytes=sum(layers.column("size_bytes").to_pylist()),
            layers=frozenset(LayerInfo(name, count) for name, count in
                             Counter(layers.column("layer_name").to_pylist()).items()),
            property_columns=frozenset(n for n in table.column_names if n.startswith("property:")),
            num_component_columns=len(self.arrow_schema()),
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
        table = self._internal.dataframe(views.segment_table(layers, self._property_schemas(layers)))
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
        return self._internal.wait_for_store().layer_table(self._id)

    def _property_schemas(self, layers: pa.Table) -> dict[str, bytes]:
        """The schemas the layers' properties name, by digest."""
        return views.property_schemas(self._internal.wait_for_store(), layers)

    def manifest(self) -> datafusion.DataFrame:
        """One row per (segment, layer): ``rerun_segment_id``, ``rerun_layer_name``,
        ``rerun_storage_url``, ``rerun_registration_time``, ``rerun_last_updated_at``,
        ``rerun_size_bytes``, ``rerun_schema_sha256``, and each layer's own properties."""
        layers = self._layer_table()
        return self._internal.dataframe(views.manifest_table(layers, self._property_schemas(layers)))

    # -- data ---------------------------------------------------------------------------------

    def segment_store(self, segment_id: str, *, include_assets: bool = True) -> Any:
        """Rerun's ``segment_store``: the segment (every layer, and with ``include_assets`` the
        assets that apply to it) as rerun-sdk's ``LazyStore``, whose ``schema()``, ``summary()``
        and ``len()`` come from its chunk manifest and whose ``stream()`` reads chunks on demand
        (``stream().collect()`` loads them all). Several files are merged into one temporary
        ``.rrd`` first. Raises ``NotFoundError`` naming the segment if the dataset has none of
        that id."""
        layers = self._layer_table()
        layers = layers.filter(pc.equal(layers.column("segment_id"), segment_id))
        if not layers.num_rows:
            raise NotFoundError(f"Segment {segment_id!r} not found in dataset {self.name!r}")
        config = self._internal.object_store_config
        files = layer_files(layers, config)[segment_id]
        asset_files: list[LayerFile] = []
        applying = self.assets_for_segment(segment_id) if include_assets and not self._seen.hidden else []
        if applying:
            assets = self._companion(DatasetKind.ASSET)._layer_table()
            assets = assets.filter(pc.is_in(assets.column("segment_id"), pa.array(applying)))
            by_asset = layer_files(assets, config)
            asset_files = [file for asset in applying for file in by_asset[asset]]
        return segment_store(files, self.name, asset_files)

    def filter_segments(self, segment_ids: str | Sequence[str] | datafusion.DataFrame) -> DatasetSelection:
        """A selection of these segments (see ``DatasetSelection.filter_segments``)."""
        return DatasetSelection(self._internal, self).filter_segments(segment_ids)

    def filter_contents(self, exprs: Contents) -> DatasetSelection:
        """A selection of the entities the expressions select (see
        ``DatasetSelection.filter_contents``)."""
        return DatasetSelection(self._internal, self).filter_contents(exprs)

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

        Examples:
            >>> dataset.reader(index="real_time").select("rerun_segment_id", "real_time")  # doctest: +SKIP
        """
        return DatasetSelection(self._internal, self).reader(
            index, include_semantically_empty_columns=include_semantically_empty_columns,
            include_tombstone_columns=include_tombstone_columns, fill_latest_at=fill_latest_at,
            using_index_values=using_index_values)

    def to_spark(self, spark: Any, index: str | None, **options: Any) -> Any:
        """Every segment's data as a Spark DataFrame, a partition per segment (see
        ``DatasetSelection.to_spark``)."""
        return DatasetSelection(self._internal, self).to_spark(spark, index, **options)

    def get_index_ranges(self) -> datafusion.DataFrame:
        """The first and last value of every index, per segment (see
        ``DatasetSelection.get_index_ranges``)."""
        return DatasetSelection(self._internal, self).get_index_ranges()


_FILE_SCHEMAS: dict[tuple[str, int], bytes] = {}
"""The schemas read from the files of layers registered without one, by (URL, size): a
registered file never changes (``RecordingChangedError`` otherwise)."""


def _with_file_schemas(merged: bytes, layers: pa.Table, objects: ObjectStore, workers: WorkerPool) -> bytes:
    """``merged`` (a dataset's schema) with the schemas of its layers registered without one,
    read from their files (by ``workers`` when there are several); each distinct schema merged
    once. ``ValueError`` naming a layer whose file's schema conflicts."""
    unknown = layers.filter(pc.is_null(layers.column("schema_sha256")))
    columns = [unknown.column(n).to_pylist()
               for n in ("segment_id", "layer_name", "storage_url", "size_bytes")]
    unread = sorted(set(zip(columns[2], columns[3], strict=True)) - set(_FILE_SCHEMAS))
    read = functools.partial(read_recording, objects=objects)
    spread = workers.spreads(len(unread))
    futures = [workers.submit(url, read, url, spread=spread) for url, _ in unread]
    for key, future in zip(unread, futures, strict=True):
        _FILE_SCHEMAS[key] = future.result().schema_bytes()
    distinct: dict[bytes, tuple[str, str, str]] = {}
    for segment_id, layer_name, url, size in zip(*columns, strict=True):
        distinct.setdefault(_FILE_SCHEMAS[(url, size)], (segment_id, layer_name, url))
    for schema, (segment_id, layer_name, url) in distinct.items():
        try:
            merged = schemas.merge_serialized(merged, schema)
        except schemas.SchemaConflict as conflict:
            raise ValueError(f'segment "{segment_id}", layer "{layer_name}" ({url}) was registered without '
                             f"a schema, and its file's conflicts with the dataset's: {conflict}; "
                             "unregister it, or register the file with the SDK") from None
    return merged


def _asset_mode(mode: AssetMode | str) -> AssetMode:
    try:
        return AssetMode(mode)
    except ValueError:
        raise ValueError(f"mode={mode!r}: an asset's mode is 'opt_out' (every segment but those "
                         "listed) or 'opt_in' (only those listed)") from None


def companion_dataset(internal: Connection, owner_id: uuid.UUID, kind: DatasetKind) -> DatasetEntry:
    """An entry's hidden dataset of ``kind``; ``NotFoundError`` if it was deleted."""
    return DatasetEntry(internal, internal.find_dataset(None, companion_id(owner_id, kind)))
