"""Dataset entries, in the shape of rerun-sdk's ``DatasetEntry``: each method a few lines into
the client's connection or into the module of its job: registering recordings as layers of
segments (``commands``), the dataset's history (``sdk._history``), its assets
(``sdk._assets``), blueprints (``sdk._blueprints``), and the catalog's reads
of it (``commands.reads``, ``sdk._dataset_reads``); the recordings' data through ``DatasetSelection``.

Every mutation is a command event appended to the log; the call's operation waits until the
projection has passed the event's offset and reports the outcome the projector recorded for it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import datafusion
import pyarrow as pa

import commands
from commands import Properties, entries, reads
from commands import assets as scopes
from commands import search as searches
from events import AssetMode, AssetScopeEdit, OnDuplicate
from projector import Dataset, DatasetKind, EntryKind, ProjectionReader, Tag, companion_id
from recordings import Contents, ObjectStore, ObjectStoreSettings, Progress, rerun_schema, segment_store
from sdk import _assets, _blueprints, _dataset_reads, _history, _search
from sdk._connection import Connection
from sdk._dataset_reads import DatasetInfo
from sdk._entry import Entry
from sdk._operations import Operation, RegistrationOperation
from sdk._segment import Layer, Segment
from sdk._selection import DatasetSelection
from sdk._wait import DEFAULT_TIMEOUT_SECS
from sdk.errors import NotFoundError

if TYPE_CHECKING:
    from rerun.catalog import Schema


class DatasetEntry(Entry[Dataset]):
    """A dataset in the catalog: a collection of segments, each the union of named layers.

    ``name``, ``updated_at`` and the tables are read from the projection at each access.
    """

    _kind_name = "dataset"

    def _lookup(self, store: ProjectionReader, entry_id: uuid.UUID) -> Dataset | None:
        return store.dataset(entry_id)

    @property
    def kind(self) -> EntryKind:
        """``DATASET``, or for a hidden one ``BLUEPRINT_DATASET`` or ``ASSET_DATASET``."""
        return self._seen.entry_kind

    @property
    def record(self) -> Dataset:
        """The dataset's row in the projection, once it has this client's writes."""
        return self._current()

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
        view = _history.at(self._internal, self._id, self._seen.name, point)
        return DatasetEntry(view, self._record_at(view))

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
        return _history.diff(self._internal, self._id, self._seen.name, before, after)

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
        return _history.create_tag(self._internal, self._id, self._seen.name, name, point, timeout_secs)

    def tags(self) -> list[Tag]:
        """The dataset's tags, by offset then name."""
        return _history.tags(self._internal, self._id)

    def delete_tag(self, name: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Remove a tag; the name may name another point afterwards. ``NotFoundError`` if the
        dataset has no tag of that name."""
        _history.delete_tag(self._internal, self._id, self._seen.name, name, timeout_secs)

    # -- entry lifecycle ----------------------------------------------------------------------

    def set_name(self, name: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Rename the dataset. ``AlreadyExistsError`` if another dataset has the name,
        ``ValueError`` for an invalid name (nothing is sent)."""
        Operation.send(self._internal, self._id, entries.rename_dataset(name)).wait(timeout_secs)

    def delete(self, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Delete the dataset, and its hidden blueprint and asset datasets: its segments disappear
        from every table, its name is free again, its id is never reused. ``NotFoundError`` if it
        is already deleted."""
        Operation.send(self._internal, self._id, entries.delete_dataset(self._seen.name)).wait(timeout_secs)

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
        spark: Any = None,
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
        produced. With ``spark`` (a ``SparkSession``), a call of at least 1,000 files
        (``commands.registration.SPARK_MIN_FILES``) has them read by the session's executors
        instead of the client's workers: their files must be where the executors can read them
        (``s3://``, or a file system they share); the events are the same. Returns an operation
        to ``wait()`` on.

        Examples:
            >>> dataset.register(["file:///data/a.rrd"], layer_name="quality").wait()  # doctest: +SKIP
            RegistrationResult(segment_ids=['ILIAD_50aee79f_2023_07_12_20h_55m_08s'])
            >>> dataset.register(uris, progress=lambda done, total: print(done, total))  # doctest: +SKIP
        """
        self._internal.writable()
        request = commands.request(uris, layer_name, on_duplicate, properties)
        return self._register(request, self._internal.objects(object_store_config), progress, spark)

    def register_prefix(
        self,
        recordings_prefix: str,
        layer_name: str | None = None,
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
        *,
        object_store_config: ObjectStoreSettings = None,
        progress: Progress | None = None,
        spark: Any = None,
    ) -> RegistrationOperation:
        """Register every ``.rrd`` under a ``file://`` directory or an ``s3://`` prefix,
        recursively, in path order (``object_store_config``, ``progress`` and ``spark`` as in
        ``register``).

        ``ValueError`` if the prefix holds no recording, ``NotFoundError`` if it (or its bucket)
        does not exist.
        """
        self._internal.writable()
        objects = self._internal.objects(object_store_config)
        request = commands.prefix_request(recordings_prefix, layer_name, on_duplicate, objects)
        return self._register(request, objects, progress, spark)

    def _register(self, request: commands.Request, objects: ObjectStore, progress: Progress | None,
                  spark: Any = None) -> RegistrationOperation:
        registered = commands.register(self._internal.log, self._internal.workers, self._id, request,
                                       objects=objects, blueprint=self._seen.kind is DatasetKind.BLUEPRINT,
                                       progress=progress, spark=spark)
        return RegistrationOperation.tracked(self._internal, registered)

    def unregister(
        self, *, segments_to_drop: str | Sequence[str] = (), layers_to_drop: str | Sequence[str] = ()
    ) -> Operation:
        """Remove every (segment, layer) in the product of the two lists; an empty list means
        all. A segment disappears with its last layer. Both empty is a ``ValueError``.
        Unregistering what is not there changes nothing."""
        return Operation.send(self._internal, self._id, commands.unregister(segments_to_drop, layers_to_drop))

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
        return _blueprints.register(self._internal, self._id, self._seen.name, self.blueprint_dataset(), uri,
                                    make_default=set_default, segment_table=segment_table,
                                    object_store_config=object_store_config, timeout_secs=timeout_secs)

    def default_segment_table_blueprint(self) -> str | None:
        """The name of the segment table's default blueprint, or None."""
        return self._current().default_segment_table_blueprint

    def set_default_segment_table_blueprint(self, blueprint_name: str | None, *,
                                            timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make ``blueprint_name`` the segment table's default blueprint (None: no default)."""
        _blueprints.set_default(self._internal, self._id, blueprint_name, True, timeout_secs)

    def asset_dataset(self) -> DatasetEntry | None:
        """The hidden dataset of this dataset's assets (None for a hidden dataset); deleted with
        the dataset. ``NotFoundError`` if it was deleted on its own."""
        return None if self._seen.hidden else self._companion(DatasetKind.ASSET)

    def _companion(self, kind: DatasetKind) -> DatasetEntry:
        return companion_dataset(self._internal, self._id, kind)

    # -- assets (sdk._assets) -----------------------------------------------------------------

    def assets(self) -> list[str]:
        """The segment ids of the registered assets, in registration order."""
        return _assets.names(self.asset_dataset())

    def register_asset(self, uri: str, *, mode: AssetMode | str = AssetMode.OPT_OUT,
                       segments: str | Sequence[str] | None = None,
                       object_store_config: ObjectStoreSettings = None,
                       timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> str:
        """Register an ``.rrd`` of static data only as an asset, replacing an asset with its
        recording id, and return that id. ``mode="opt_out"`` (the default) applies it to every
        segment but ``segments``; ``"opt_in"`` only to ``segments``. ``ValueError`` for a file with
        temporal data or another mode, ``NotFoundError`` if the asset dataset was deleted."""
        asset_mode = scopes.asset_mode(mode)
        return _assets.register(self._internal, self._asset_dataset_of("register_asset"), uri, asset_mode,
                                segments, object_store_config, timeout_secs)

    def unregister_asset(self, segment_id: str, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Unregister an asset and its scope; an asset that is not registered is a no-op."""
        _assets.unregister(self._asset_dataset_of("unregister_asset"), segment_id, timeout_secs)

    def add_segments_to_asset(self, asset_segment_id: str, segments: str | Sequence[str], *,
                              timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Make an asset apply to ``segments`` too, in its mode (added to an opt-in list, removed
        from an opt-out one). Applied by the projector in log order, so concurrent edits of one
        asset all count. ``NotFoundError`` for an asset that is not registered."""
        assets = self._asset_dataset_of("add_segments_to_asset")
        scopes.scope(self._internal, assets.id, asset_segment_id, AssetScopeEdit.APPLY, segments,
                     AssetMode.OPT_OUT, timeout_secs)

    def remove_segments_from_asset(self, asset_segment_id: str, segments: str | Sequence[str], *,
                                   timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Stop an asset from applying to ``segments``; the inverse of ``add_segments_to_asset``."""
        assets = self._asset_dataset_of("remove_segments_from_asset")
        scopes.scope(self._internal, assets.id, asset_segment_id, AssetScopeEdit.UNAPPLY, segments,
                     AssetMode.OPT_OUT, timeout_secs)

    def assets_for_segment(self, segment_id: str) -> list[str]:
        """The assets that apply to ``segment_id``, in registration order."""
        assets = self._asset_dataset_of("assets_for_segment")
        return scopes.for_segment(self._internal, assets.id, segment_id)

    # -- segment properties (commands.assets): an asset's scope, as Rerun's client keeps it ---------

    def get_segment_properties(self, segment_id: str) -> tuple[pa.RecordBatch, int] | None:
        """The properties of segment ``segment_id`` kept beside its layers, and their revision;
        None if it has none. strata keeps one such property, the scope of an asset of an asset
        dataset, as Rerun's client reads it: one row of ``property:asset:mode`` (``OptOut`` or
        ``OptIn``) and ``property:asset:segments``."""
        return scopes.get_segment_properties(self._internal, self._seen, segment_id)

    def set_segment_properties(self, segment_id: str, properties: pa.RecordBatch | pa.Table, *,
                               expected_revision: int | None = None,
                               timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> int:
        """Replace the properties of ``segment_id`` (an asset of this asset dataset) with
        ``properties``, the ``asset`` property as ``get_segment_properties`` gives it, and return
        their new revision. With ``expected_revision`` (0: it has none), only if they are still
        at that revision: ``RevisionConflictError`` if they changed since. ``ValueError`` for
        another property or a dataset that is not an asset dataset, ``NotFoundError`` for an asset
        that is not registered."""
        return scopes.set_segment_properties(self._internal, self._seen, segment_id, properties,
                                             expected_revision, timeout_secs)

    def delete_segment_properties(self, segment_ids: str | Sequence[str], *,
                                  expected_revisions: Mapping[str, int] | None = None,
                                  timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Delete the properties of ``segment_ids``: an asset's scope, which then applies to
        every segment. Deleting properties a segment does not have is a no-op, as in Rerun. A
        segment in ``expected_revisions`` loses them only if they are still at that revision
        (``RevisionConflictError`` if not; the segments before it in ``segment_ids`` lost theirs)."""
        scopes.delete_segment_properties(self._internal, self._seen, segment_ids, expected_revisions,
                                         timeout_secs)

    def _asset_dataset_of(self, call: str) -> DatasetEntry:
        assets = self.asset_dataset()
        if assets is None:
            raise LookupError(f"{call}: {self._seen.name!r} is a hidden dataset and has no asset dataset")
        return assets

    # -- reads (commands.reads) ---------------------------------------------------------------

    def schema(self) -> Schema:
        """Rerun's ``Schema`` of the dataset: its index columns and the component columns of
        every layer (``index_columns()``, ``component_columns()``, ``entity_paths()``,
        ``column_names()``, ``to_arrow()``...); empty before the first layer."""
        return rerun_schema(self.arrow_schema())

    def arrow_schema(self) -> pa.Schema:
        """The merged Arrow schema of every layer's data, with Rerun's field metadata (empty
        before the first layer). The schema of a layer registered without one (a producer may
        leave it out) is read from its file and kept for later reads, of up to 4096 files per
        process (the least recently used dropped first)."""
        return reads.arrow_schema(self._internal, self._current())

    def segment_ids(self) -> list[str]:
        """The dataset's segment ids, in registration order."""
        return reads.segment_ids(self._internal, self._id)

    def info(self) -> DatasetInfo:
        """Segments, bytes, segments per layer, property columns and schema width."""
        return _dataset_reads.info(self._internal, self._current())

    def segment_table(self, join_meta: datafusion.DataFrame | None = None,
                      join_key: str = "rerun_segment_id") -> datafusion.DataFrame:
        """One row per segment: ``rerun_segment_id``, ``rerun_layer_names`` (registration order),
        ``rerun_storage_urls``, ``rerun_last_updated_at``, ``rerun_size_bytes``, and one
        ``property:<entity>:<field>`` column per property (the latest layer with a value wins).

        ``join_meta`` (a DataFrame with a ``join_key`` column) is left-joined on ``join_key``, as
        in Rerun. Raises ``ValueError`` if either side lacks ``join_key``.
        """
        return _dataset_reads.segment_table(self._internal, self._id, join_meta, join_key)

    def manifest(self) -> datafusion.DataFrame:
        """One row per (segment, layer): ``rerun_segment_id``, ``rerun_layer_name``,
        ``rerun_storage_url``, ``rerun_registration_time``, ``rerun_last_updated_at``,
        ``rerun_size_bytes``, ``rerun_schema_sha256``, and each layer's own properties."""
        return self._internal.dataframe(reads.manifest(self._internal, self._id))

    # -- data ---------------------------------------------------------------------------------

    def segment_store(self, segment_id: str, *, include_assets: bool = True) -> Any:
        """Rerun's ``segment_store``: the segment (every layer, and with ``include_assets`` the
        assets that apply to it) as rerun-sdk's ``LazyStore``, whose ``schema()``, ``summary()``
        and ``len()`` come from its chunk manifest and whose ``stream()`` reads chunks on demand
        (``stream().collect()`` loads them all). Several files are merged into one temporary
        ``.rrd`` first. Raises ``NotFoundError`` naming the segment if the dataset has none of
        that id."""
        name = self.name
        files = reads.segment_files(self._internal, self._id, name, segment_id)
        with_assets = include_assets and not self._seen.hidden
        assets = self._companion(DatasetKind.ASSET) if with_assets else None
        asset_files = [] if assets is None else scopes.files_for_segment(self._internal, assets.id,
                                                                         segment_id)
        return segment_store(files, name, asset_files)

    def segment(self, segment_id: str) -> Segment:
        """A handle of one segment (rerun-sdk's ``Segment``: ``schema()``, ``layers()``,
        ``delete_layer()``). Raises ``NotFoundError`` if the dataset has no segment of that id."""
        if segment_id not in self.segment_ids():
            raise NotFoundError(f"Segment {segment_id!r} not found in dataset {self.name!r}")
        return Segment(self._internal, self, segment_id)

    def layer(self, name: str) -> Layer:
        """A handle of one layer name (rerun-sdk's ``Layer``: ``segment_ids()``). A layer exists
        while a segment has it: ``ValueError`` naming the layers there are otherwise."""
        layers = reads.layer_table(self._internal, self._id)
        names = sorted(set(layers.column("layer_name").to_pylist()))
        if name not in names:
            raise ValueError(f"Layer {name!r} not found in dataset {self.name!r}. Available layers: "
                             f"{', '.join(map(repr, names)) or 'none'}")
        return Layer(self._internal, self, name)

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

    # -- search (the seed's indexes; commands.search) -----------------------------------------

    def create_vector_index(self, *, column: Any, time_index: Any, num_partitions: int | None = None,
                            target_partition_num_rows: int | None = None, num_sub_vectors: int = 16,
                            distance_metric: Any = "L2",
                            timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Index a column of embeddings (fixed-size lists of floats per instance; of bytes for
        ``"Hamming"``) on the timeline ``time_index``, for ``search_vector``. ``column`` is what
        ``schema().column_for_selector`` takes. Creating it again replaces the column's index.
        Below 20,000 rows the index is searched exactly; from there an IVF_SQ index is trained
        with ``target_partition_num_rows`` (default 4096) rows per partition (``num_partitions``
        wins if given); ``num_sub_vectors`` is kept for the seed's signature (IVF_SQ has no
        sub-vectors: see the search page of the docs). ``distance_metric``: ``"L2"``,
        ``"Cosine"``, ``"Dot"`` or ``"Hamming"``. The index is a command in the log; its rows are
        derived from the layers and kept current as they change. ``ValueError`` (from the
        projector) for a column of the wrong type, an unknown timeline or unfitting parameters,
        ``LookupError`` for an unknown column.

        Examples:
            >>> dataset.create_vector_index(column="/camera:embedding", time_index="frame",
            ...                             distance_metric="Cosine")  # doctest: +SKIP
        """
        entity_path, component = _search.column_of(self.arrow_schema(), column)
        write = searches.create_vector_index(
            entity_path, component, _search.timeline_of(time_index), num_partitions=num_partitions,
            target_partition_num_rows=target_partition_num_rows, num_sub_vectors=num_sub_vectors,
            distance_metric=distance_metric)
        _search.send(self._internal, self._id, write, timeout_secs)

    def create_fts_index(self, *, column: Any, time_index: Any, store_position: bool = False,
                         base_tokenizer: str = "simple",
                         timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Index a column of strings (a ``TextDocument``, a language instruction) on the timeline
        ``time_index`` for full-text search, ranked by BM25. ``store_position`` keeps token
        positions, for phrase searches (``search_fts('"red cup"', ...)``). ``base_tokenizer``:
        ``"simple"`` (words, lowercased), ``"whitespace"`` or ``"raw"`` (each value whole)."""
        entity_path, component = _search.column_of(self.arrow_schema(), column)
        write = searches.create_fts_index(entity_path, component, _search.timeline_of(time_index),
                                                store_position=store_position, base_tokenizer=base_tokenizer)
        _search.send(self._internal, self._id, write, timeout_secs)

    def delete_indexes(self, column: Any, *, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Delete the index of ``column``. ``NotFoundError`` if it has none."""
        entity_path, component = _search.column_of(self.arrow_schema(), column, known=False)
        _search.send(self._internal, self._id, searches.delete_indexes(entity_path, component),
                     timeout_secs)

    def list_indexes(self) -> datafusion.DataFrame:
        """The dataset's indexes, one row each: the column, its kind and timeline, the metric,
        how many rows its copy holds and how it is searched (``exact``, ``trained``,
        ``inverted``, or ``building`` before its first rows), the log offset its rows cover."""
        return self._internal.dataframe(searches.list_indexes(self._internal, self.record))

    def do_maintenance(self, optimize_indexes: bool = False, retrain_indexes: bool = False,
                       compact_fragments: bool = False, cleanup_before: datetime | None = None,
                       unsafe_allow_recent_cleanup: bool = False, *,
                       timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> None:
        """Maintain every index of the dataset: add the rows searched exactly since the last
        training to the index (``optimize_indexes``), train it again (``retrain_indexes``), merge
        small files (``compact_fragments``), remove versions older than ``cleanup_before``. The
        follower that keeps the indexes does it after this command is applied."""
        write = searches.maintain(
            optimize_indexes=optimize_indexes, retrain_indexes=retrain_indexes,
            compact_fragments=compact_fragments, cleanup_before=cleanup_before,
            unsafe_allow_recent_cleanup=unsafe_allow_recent_cleanup)
        _search.send(self._internal, self._id, write, timeout_secs)

    def search_vector(self, query: Any, column: Any, top_k: int, *,
                      where: Any = None) -> datafusion.DataFrame:
        """The ``top_k`` instances of ``column`` nearest the vector ``query``, nearest first:
        ``rerun_segment_id``, the index's timeline, ``rerun_instance_index``, the vector and
        ``_distance``. Waits until the index has every write of this client. ``where`` (a
        DataFusion expression or SQL text on the segment table's columns) narrows the segments
        before the top k is taken. ``ValueError`` for a query of the wrong length."""
        return DatasetSelection(self._internal, self).search_vector(query, column, top_k, where=where)

    def search_fts(self, query: str, column: Any, *, where: Any = None,
                   limit: int | None = None) -> datafusion.DataFrame:
        """The instances of ``column`` matching the words of ``query`` (a phrase in double
        quotes, with ``store_position``), best BM25 ``_score`` first: ``rerun_segment_id``, the
        index's timeline, ``rerun_instance_index``, the text and ``_score``."""
        return DatasetSelection(self._internal, self).search_fts(query, column, where=where, limit=limit)

    def to_spark(self, spark: Any, index: str | None, **options: Any) -> Any:
        """Every segment's data as a Spark DataFrame, a partition per segment (see
        ``DatasetSelection.to_spark``)."""
        return DatasetSelection(self._internal, self).to_spark(spark, index, **options)

    def get_index_ranges(self) -> datafusion.DataFrame:
        """The first and last value of every index, per segment (see
        ``DatasetSelection.get_index_ranges``)."""
        return DatasetSelection(self._internal, self).get_index_ranges()


def companion_dataset(internal: Connection, owner_id: uuid.UUID, kind: DatasetKind) -> DatasetEntry:
    """An entry's hidden dataset of ``kind``; ``NotFoundError`` if it was deleted."""
    return DatasetEntry(internal, internal.find_dataset(None, companion_id(owner_id, kind)))
