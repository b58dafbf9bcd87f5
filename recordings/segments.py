"""Reading the recordings a dataset points to, segment by segment, with rerun-sdk's query engine.

A segment is the union of its layers: the chunks of every layer's ``.rrd`` file go into one
``rerun.chunk.ChunkStore``, whose ``reader()`` gives the rows Rerun's own server would give for
that segment. Every segment is conformed to one schema, the dataset's (all its index columns, the
component columns the contents select), so the segments stack into one table.

The table DataFusion sees is a ``pyarrow`` dataset with one fragment per segment, each fragment a
virtual Arrow IPC file that is only produced when DataFusion scans it. A fragment carries its
segment id as its partition expression, so a filter on ``rerun_segment_id`` prunes the other
segments before any of their files is opened, and the dataset is streamed a segment at a time,
never loaded whole.
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import functools
import hashlib
import re
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datafusion
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.ipc

from projector import layer_table
from recordings.contents import PROPERTIES_ENTITY, selects
from recordings.errors import NotFoundError, RecordingChangedError
from recordings.files import manifest_summary
from recordings.locations import is_object_url, local_path
from recordings.objects import ObjectStoreConfig, object_store
from recordings.workers import WorkerPool

if TYPE_CHECKING:
    from rerun.catalog import Schema

SEGMENT_ID = "rerun_segment_id"
_KIND = b"rerun:kind"
_ENTITY_PATH = b"rerun:entity_path"
_IS_STATIC = b"rerun:is_static"


@dataclass(frozen=True)
class LayerFile:
    """One registered layer of a segment: where its recording is and how big it was."""

    segment_id: str
    layer_name: str
    storage_url: str
    size_bytes: int
    object_store: ObjectStoreConfig | None = None
    """Where an ``s3://`` recording is read from (default: the AWS variables)."""

    def path(self) -> Path:
        """The local file (for an ``s3://`` recording, a copy downloaded once per process),
        checked against what was registered.

        Raises ``NotFoundError`` if it is gone and ``RecordingChangedError`` if its size changed,
        each naming the segment, the layer and the URL.
        """
        remote = is_object_url(self.storage_url)
        objects = object_store(self.object_store or ObjectStoreConfig.resolve()) if remote else None
        try:
            if objects is not None:
                size = objects.size(self.storage_url)
            else:
                path = local_path(self.storage_url)
                size = path.stat().st_size
        except (FileNotFoundError, NotFoundError):
            raise NotFoundError(
                f'segment "{self.segment_id}", layer "{self.layer_name}": the recording at '
                f"{self.storage_url} no longer exists; register it again or unregister the layer"
            ) from None
        if size != self.size_bytes:
            raise RecordingChangedError(
                f'segment "{self.segment_id}", layer "{self.layer_name}": the recording at '
                f"{self.storage_url} has {size} bytes, but {self.size_bytes} were registered; "
                "layers are immutable, so register the new file (on_duplicate='replace')")
        return objects.local_copy(self.storage_url, size) if objects is not None else path


@dataclass(frozen=True)
class ReadOptions:
    """What ``reader()`` was asked for; the same for every segment."""

    index: str | None
    content_groups: tuple[tuple[str, ...], ...]
    """One group of filter expressions per ``filter_contents`` call; an entity must pass all."""
    include_semantically_empty_columns: bool = False
    include_tombstone_columns: bool = False
    fill_latest_at: bool = False


def _meta(field: pa.Field, key: bytes) -> bytes | None:
    """One of Rerun's field metadata entries (``rerun:kind``, ...), None if absent."""
    return (field.metadata or {}).get(key)


def _index_fields(dataset_schema: pa.Schema) -> list[pa.Field]:
    return [f for f in dataset_schema if _meta(f, _KIND) == b"index"]


def index_names(dataset_schema: pa.Schema) -> list[str]:
    """The dataset's timelines, in schema order."""
    return [f.name for f in _index_fields(dataset_schema)]


def selected_schema(dataset_schema: pa.Schema, content_groups: tuple[tuple[str, ...], ...]) -> pa.Schema:
    """The dataset's index columns and the component columns (static or not) the contents
    select, in the dataset's order."""
    return pa.schema([f for f in dataset_schema if _meta(f, _KIND) == b"index" or (
        _meta(f, _KIND) == b"data" and selects(content_groups, (_meta(f, _ENTITY_PATH) or b"").decode()))])


def output_schema(dataset_schema: pa.Schema, options: ReadOptions) -> pa.Schema:
    """The reader's columns, in Rerun's order: the segment id, every index column of the dataset
    in the reverse of the dataset's order (``log_time`` before ``log_tick``, a later layer's
    timelines first), then the component columns the contents select (only static ones for the
    static view) in the dataset's order (a later layer's entities after the others).

    Raises ``ValueError`` for an index the dataset does not have, listing the ones it has.
    """
    indexes = _index_fields(dataset_schema)
    if options.index is not None and options.index not in [f.name for f in indexes]:
        known = ", ".join(repr(f.name) for f in indexes) or "none (the dataset has no temporal data)"
        raise ValueError(f"Index {options.index!r} does not exist in the dataset; its timelines "
                         f"are: {known}")
    data = [f for f in selected_schema(dataset_schema, options.content_groups)
            if _meta(f, _KIND) == b"data" and (options.index is not None or _meta(f, _IS_STATIC) == b"true")]
    return pa.schema([pa.field(SEGMENT_ID, pa.string(), nullable=False), *reversed(indexes), *data])


_local = threading.local()


def _context() -> datafusion.SessionContext:
    """A DataFusion context per thread for the per-segment queries (fragments are read in parallel)."""
    if not hasattr(_local, "ctx"):
        _local.ctx = datafusion.SessionContext()
    ctx: datafusion.SessionContext = _local.ctx
    return ctx


def read_segment(segment_id: str, layers: Sequence[LayerFile], options: ReadOptions,
                 schema: pa.Schema, index_values: Any = None,
                 entities: frozenset[str] | None = None) -> pa.Table:
    """The rows of one segment (all its layers as one recording) in ``schema``.

    Chunks of entities the contents exclude are dropped while the files are streamed, so a query
    of joint positions never decodes camera frames. ``entities`` narrows the read further to
    those entity paths (``narrowed_entities``): the rows are then those where one of them has data.
    """
    from rerun.chunk import LazyChunkStream, RrdReader

    streams = [RrdReader(layer.path()).stream() for layer in layers]
    stream = streams[0] if len(streams) == 1 else LazyChunkStream.merge(*streams)
    groups = [list(group) for group in options.content_groups]
    if entities is not None:
        groups.append(sorted(entities))
    for group in groups:
        stream = stream.filter(content=group)
    store = stream.collect()
    if options.index is not None and options.index not in {c.name for c in store.schema().index_columns()}:
        return schema.empty_table()  # this segment has no data on the index
    result = store.reader(
        options.index, contents=groups[-1],
        include_semantically_empty_columns=options.include_semantically_empty_columns,
        include_tombstone_columns=options.include_tombstone_columns,
        fill_latest_at=options.fill_latest_at, using_index_values=index_values,
        ctx=_context()).to_arrow_table()
    names = set(result.column_names)
    if options.index is None and not any(f.name in names and _meta(f, _KIND) == b"data" for f in schema):
        return schema.empty_table()  # no static data in this segment: no row, as in Rerun
    rows = result.num_rows
    columns = []
    for field in schema:
        if field.name == SEGMENT_ID:
            columns.append(pa.array([segment_id] * rows, pa.string()))
        elif field.name in names:
            column = result.column(field.name).combine_chunks()
            columns.append(column if column.type == field.type else column.cast(field.type))
        else:
            columns.append(pa.nulls(rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def ipc_file(make: Callable[[], pa.Table]) -> pa.Buffer:
    """The table ``make`` gives, as an Arrow IPC file (what a worker sends back)."""
    table = make()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


class _SegmentFiles(pafs.FileSystemHandler):  # type: ignore[misc]  # pyarrow is untyped
    """A read-only file system of virtual Arrow IPC files, one per segment, made on demand.

    Once the scan's fragments are known (``expect``), the next ones are made in advance, in the
    client's worker processes when there are several (else on threads of the caller), so reading
    segments overlaps with consuming them: at most ``ahead`` made-but-unread segments (two per
    worker, at least ``AHEAD``) and ``CACHED`` read ones are held at any time, whatever the
    dataset's size.
    """

    AHEAD = 4
    CACHED = 4
    """Segments kept after being read: pyarrow opens a fragment twice (inspect, then scan)."""

    def __init__(self, make: dict[str, Any], segment_ids: dict[str, str], workers: WorkerPool) -> None:
        self._make = make
        self._segment_ids = segment_ids
        self._workers = workers
        self._spread = False
        self.ahead = self.AHEAD
        self._lock = threading.Lock()
        self._made: collections.OrderedDict[str, concurrent.futures.Future[pa.Buffer]] = (
            collections.OrderedDict())
        self._read: set[str] = set()
        self._pending: collections.deque[str] = collections.deque()

    def _start(self, path: str) -> concurrent.futures.Future[pa.Buffer]:
        segment = self._segment_ids.get(path)
        what = f'segment "{segment}"' if segment is not None else "an empty scan"
        self._made[path] = self._workers.submit(what, ipc_file, self._make[path], spread=self._spread)
        return self._made[path]

    def _fill(self) -> None:
        """Start the next expected segments while fewer than ``ahead`` are made but unread."""
        while self._pending and len(self._made) - len(self._read) < self.ahead:
            path = self._pending.popleft()
            if path not in self._made:
                self._start(path)

    def narrowed(self, fragment: pads.FileFragment, entities: frozenset[str]) -> pads.FileFragment:
        """``fragment``'s segment read for ``entities`` only: a file of its own, made on demand."""
        path = f"{fragment.path.removesuffix('.arrow')}-{'|'.join(sorted(entities))}.arrow"
        with self._lock:
            if path not in self._make:
                self._make[path] = functools.partial(self._make[fragment.path], entities=entities)
                self._segment_ids[path] = self._segment_ids[fragment.path]
        return fragment.format.make_fragment(path, fragment.filesystem,
                                             partition_expression=fragment.partition_expression)

    def empty(self, format: pads.FileFormat, schema: pa.Schema,
              filesystem: pafs.FileSystem) -> pads.FileFragment:
        """A fragment of no rows, on ``filesystem`` (this handler's)."""
        with self._lock:
            self._make.setdefault("empty.arrow", schema.empty_table)
        return format.make_fragment("empty.arrow", filesystem)

    def expect(self, paths: Sequence[str]) -> None:
        """The fragments a scan will read, in order: start making the first ones, in the
        workers if there are several."""
        with self._lock:
            self._spread = self._workers.spreads(len(paths))
            self.ahead = max(self.AHEAD, 2 * self._workers.size) if self._spread else self.AHEAD
            self._pending = collections.deque(paths)
            self._fill()

    def _buffer(self, path: str) -> pa.Buffer:
        with self._lock:
            future = self._made.get(path) or self._start(path)
            self._made.move_to_end(path)
            self._read.add(path)
        try:
            return future.result()
        finally:
            with self._lock:
                while len(self._read) > self.CACHED:
                    oldest = next(p for p in self._made if p in self._read)
                    del self._made[oldest]
                    self._read.discard(oldest)
                self._fill()

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._buffer(path))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self.open_input_file(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [pafs.FileInfo(p, pafs.FileType.File if p in self._make else pafs.FileType.NotFound)
                for p in paths]

    def get_type_name(self) -> str:
        return "strata-segments"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: object) -> bool:
        return self is other

    def _read_only(self, *args: object) -> None:
        raise OSError("the segments of a dataset reader are read-only")

    get_file_info_selector = create_dir = delete_dir = delete_dir_contents = _read_only
    delete_root_dir_contents = delete_file = move = copy_file = _read_only
    open_output_stream = open_append_stream = _read_only


def narrowed_entities(schema: pa.Schema, columns: Sequence[str] | None,
                      filter: pads.Expression | None) -> frozenset[str] | None:
    """The entity paths a scan of ``columns`` with ``filter`` needs, as Rerun's server narrows a
    query to them: those of the component columns the scan projects or the filter names (index
    and segment id columns name no entity). None when nothing narrows: every column, or none of
    the component columns."""
    if columns is None:
        return None
    named = set(columns)
    text = str(filter) if filter is not None else ""
    entities = set()
    data = [f for f in schema if _meta(f, _KIND) == b"data"]
    for field in data:
        if field.name in named or (text and re.search(
                rf"(?<![\w/:]){re.escape(field.name)}(?![\w:])", text)):
            entities.add(field.metadata[_ENTITY_PATH].decode())
    every = {f.metadata[_ENTITY_PATH].decode() for f in data}
    return frozenset(entities) if entities and entities != every else None


class _SegmentsDataset(pads.FileSystemDataset):  # type: ignore[misc]  # pyarrow is untyped
    """The segments' fragments; DataFusion asks for the fragments that survive its pushed-down
    filters, and those are the ones read ahead.

    DataFusion plans a scan by calling ``scanner(columns=..., filter=...)`` and then
    ``get_fragments(filter)`` on one thread: the columns the first call names narrow the
    fragments the second one returns to the entities they need (``narrowed_entities``), unless
    the reader fills latest-at values, where other entities' rows are the caller's.
    """

    def scanner(self, *args: Any, **kwargs: Any) -> pads.Scanner:
        if not self.read_options.fill_latest_at:
            _planning.narrowing = (self, narrowed_entities(self.schema, kwargs.get("columns"),
                                                           kwargs.get("filter")))
        return super().scanner(*args, **kwargs)

    def get_fragments(self, filter: pads.Expression | None = None) -> list[pads.Fragment]:
        fragments = list(super().get_fragments(filter=filter))
        planned, entities = getattr(_planning, "narrowing", (None, None))
        _planning.narrowing = (None, None)
        if planned is self and entities is not None:
            fragments = [self.segment_files.narrowed(f, entities) for f in fragments]
        if not fragments:
            # A scan of no fragment is planned as no partition at all, which an operator that
            # needs one partition (a sort) refuses: an empty one instead.
            fragments = [self.segment_files.empty(self.format, self.schema, self.filesystem)]
        self.segment_files.expect([f.path for f in fragments])
        return fragments


_planning = threading.local()
"""What a scan being planned on this thread narrows to (``_SegmentsDataset``)."""


def segments_dataset(segments: Mapping[str, Sequence[LayerFile]], options: ReadOptions,
                     schema: pa.Schema, workers: WorkerPool, index_values: Mapping[str, Any] | None = None,
                     ranges: Mapping[str, tuple[pa.Scalar, pa.Scalar]] | None = None) -> pads.Dataset:
    """A pyarrow dataset of the segments, in segment id order, one fragment each, read lazily
    (by ``workers`` when a scan reads several).

    ``ranges`` gives a segment's first and last value on the queried index, where known: a
    fragment then promises that its rows lie within them, so a filter on the index column skips
    the segments outside it without reading them.
    """
    makers = {}
    segment_ids = {}
    fragments = []
    format = pads.IpcFileFormat()
    for number, segment_id in enumerate(sorted(segments)):
        path = f"{number}.arrow"
        segment_ids[path] = segment_id
        values = None if index_values is None else index_values[segment_id]
        makers[path] = functools.partial(read_segment, segment_id, segments[segment_id], options,
                                         schema, values)
        expression = pads.field(SEGMENT_ID) == segment_id
        if ranges and segment_id in ranges:
            start, end = ranges[segment_id]
            expression &= (pads.field(options.index) >= start) & (pads.field(options.index) <= end)
        fragments.append((path, expression))
    files = _SegmentFiles(makers, segment_ids, workers)
    # The file system holds the handler; the handler must not hold it back: a cycle through
    # pyarrow's C++ is one the garbage collector cannot see, and each scan would stay in memory.
    filesystem = pafs.PyFileSystem(files)
    dataset = _SegmentsDataset(
        [format.make_fragment(path, filesystem, partition_expression=expr) for path, expr in fragments],
        schema, format, filesystem)
    dataset.segment_files = files
    dataset.read_options = options
    return dataset


def rerun_schema(schema: pa.Schema) -> Schema:
    """``schema`` (a dataset's, with Rerun's field metadata) as rerun-sdk's ``Schema``: the one
    rerun-sdk derives from a store holding one row of each column (a one-item list of null, so
    that no column is semantically empty), static columns in a static chunk."""
    from rerun.chunk import Chunk, ChunkStore

    def one_row(fields: list[pa.Field]) -> pa.RecordBatch:
        def value(field: pa.Field) -> pa.Array:
            if _meta(field, _KIND) == b"index":
                return pa.array([0], field.type)
            if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
                return pa.array([[None]], field.type)
            return pa.nulls(1, field.type)
        return pa.RecordBatch.from_arrays([value(f) for f in fields], schema=pa.schema(fields))

    data = [f for f in schema if _meta(f, _KIND) == b"data"]
    temporal = [f for f in data if _meta(f, _IS_STATIC) != b"true"]
    static = [f for f in data if _meta(f, _IS_STATIC) == b"true"]
    chunks = []
    if temporal:
        chunks += Chunk.from_record_batch(one_row([*_index_fields(schema), *temporal]))
    if static:
        chunks += Chunk.from_record_batch(one_row(static), index=None)
    rerun: Schema = ChunkStore.from_chunks(chunks).schema()
    return rerun


def layer_files(layers: pa.Table, object_store: ObjectStoreConfig) -> dict[str, list[LayerFile]]:
    """The layers' files, by segment id (``s3://`` ones read with ``object_store``)."""
    segments: dict[str, list[LayerFile]] = {}
    columns = [layers.column(n).to_pylist()
               for n in ("segment_id", "layer_name", "storage_url", "size_bytes")]
    for segment_id, layer_name, url, size in zip(*columns, strict=True):
        segments.setdefault(segment_id, []).append(LayerFile(segment_id, layer_name, url, size, object_store))
    return segments


def segment_store(files: Sequence[LayerFile], application_id: str, assets: Sequence[LayerFile] = ()) -> Any:
    """The segment of ``files`` (its layers), with the chunks of ``assets`` but their properties,
    as rerun-sdk's ``LazyStore`` of ``segment_rrd``: its chunk manifest in memory, chunks read on
    demand.

    Raises ``NotFoundError`` or ``RecordingChangedError`` naming the segment, layer and URL if a
    registered file is gone or changed."""
    from rerun.chunk import RrdReader

    return RrdReader(segment_rrd(files, application_id, assets)).store()


def segment_rrd(files: Sequence[LayerFile], application_id: str, assets: Sequence[LayerFile] = ()) -> Path:
    """The segment of ``files`` (its layers) as one ``.rrd``, with the chunks of ``assets`` but
    their properties: one file is itself (a local copy if it is in object storage); several are
    merged once per process into a temporary ``.rrd`` (every chunk read and written) under the
    segment's id as recording id. Raises what ``LayerFile.path`` raises."""
    from rerun.chunk import LazyChunkStream, RrdReader

    paths = [file.path() for file in files]
    asset_paths = [file.path() for file in assets]
    if len(paths) == 1 and not asset_paths:
        return paths[0]
    named = "\n".join(f"{f.storage_url} {f.size_bytes}" for f in [*files, *assets])
    key = hashlib.sha256(f"{application_id}\n{named}".encode()).hexdigest()
    merged = _merged_dir() / f"{key}.rrd"
    if not merged.exists():
        partial = merged.with_suffix(f".{threading.get_ident()}.partial")
        streams = [RrdReader(p).stream() for p in paths]
        streams += [RrdReader(p).stream().filter(content=["+ /**", f"- {PROPERTIES_ENTITY}/**"])
                    for p in asset_paths]
        LazyChunkStream.merge(*streams).write_rrd(
            partial, application_id=application_id, recording_id=files[0].segment_id)
        partial.replace(merged)
    return merged


@functools.cache
def _merged_dir() -> Path:
    """Where merged segments are kept while this process runs."""
    directory = tempfile.TemporaryDirectory(prefix="strata-segments-")
    atexit.register(directory.cleanup)
    return Path(directory.name)


def with_manifest_ranges(layers: pa.Table) -> pa.Table:
    """The layer table with ``num_chunks`` and ``index_ranges`` read from the files' chunk
    manifests (no chunk data) for the layers whose registration did not carry them (events
    written before envelope v4)."""
    from rerun.chunk import RrdReader

    unknown = layers.column("num_chunks").is_null().to_numpy(zero_copy_only=False)
    if not unknown.any():
        return layers
    chunks = layers.column("num_chunks").to_pylist()
    ranges = layers.column("index_ranges").to_pylist()
    for row in np.flatnonzero(unknown):
        layer = LayerFile(*(layers.column(n)[row].as_py() for n in ("segment_id", "layer_name",
                                                                     "storage_url", "size_bytes")))
        chunks[row], found = manifest_summary(RrdReader(layer.path()).store())
        ranges[row] = layer_table.range_structs(found)
    layers = layers.set_column(layers.schema.get_field_index("num_chunks"), "num_chunks",
                               pa.array(chunks, pa.int64()))
    field = layers.schema.field("index_ranges")
    return layers.set_column(layers.schema.get_field_index("index_ranges"), field,
                             pa.array(ranges, field.type))
