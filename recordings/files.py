"""A recording file, read without loading its data, from a local path or an object store: its
id, size, Arrow schema and properties (``read_recording``), and an ``.rrd``'s chunk index with
each chunk's byte offset and size (``chunk_index``).

Of an ``.rrd``, only its header, footer (the chunk index) and property chunks are read, by
``recordings.rrd``; a file another rerun version wrote goes to rerun-sdk's reader, which knows
that version's migrations. Parquet and Arrow IPC files carry the recording id in their schema
metadata (``recording_id``).
"""

from __future__ import annotations

import dataclasses
import os
import struct
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
import pyarrow.parquet as pq

from events import IndexKind, IndexRange
from projector import schemas
from recordings import rrd
from recordings.contents import PROPERTIES_ENTITY
from recordings.errors import NotFoundError, ObjectStoreError
from recordings.locations import is_object_url, local_path
from recordings.objects import ObjectStore, ObjectStoreConfig, RemoteObject, object_store

RECORDING_ID_KEY = b"recording_id"


@dataclass(frozen=True)
class Recording:
    """What ``read_recording`` read of a recording file."""

    uri: str
    recording_id: str
    size_bytes: int
    arrow_schema: pa.Schema
    properties: pa.Table | None
    """One row, one column per ``property:<entity>:<field>``; None if the file has none."""
    num_chunks: int | None = None
    """Chunks in the file (``.rrd`` only)."""
    index_ranges: tuple[IndexRange, ...] = ()
    """Each timeline's first and last value (``.rrd`` only)."""
    schema_message: bytes | None = None
    """``schema_bytes()``, when ``read_recording`` made it (in the worker that read the file)."""

    def schema_bytes(self) -> bytes:
        """The schema as an Arrow IPC message, metadata in key order: equal schemas, equal bytes."""
        if self.schema_message is not None:
            return self.schema_message
        return schemas.canonical_bytes(self.arrow_schema)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (from a worker that read the file to its caller) with its schema as the IPC
        message, which the caller parses once per distinct schema (``schemas.parse`` remembers
        it): a dataset's files share theirs, and pickling the ``pa.Schema`` itself cost about
        0.8 ms a DROID-like episode between the two processes."""
        return (_unpickled, (self.uri, self.recording_id, self.size_bytes, self.schema_bytes(),
                             self.properties, self.num_chunks, self.index_ranges))

    def properties_bytes(self) -> bytes:
        """The properties as one Arrow IPC stream; empty if the recording has none."""
        if self.properties is None or self.properties.num_columns == 0:
            return b""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.properties.schema) as writer:
            writer.write_table(self.properties)
        data: bytes = sink.getvalue().to_pybytes()
        return data


def _unpickled(uri: str, recording_id: str, size_bytes: int, schema_message: bytes,
               properties: pa.Table | None, num_chunks: int | None, index_ranges: tuple[IndexRange, ...]
               ) -> Recording:
    return Recording(uri, recording_id, size_bytes, schemas.parse(schema_message), properties, num_chunks,
                     index_ranges, schema_message)


def read_recording(uri: str, objects: ObjectStore | None = None, *, blueprint: bool = False) -> Recording:
    """Read a recording's id, size, schema and properties from a ``file://`` or ``s3://`` URL;
    with ``blueprint``, a blueprint's from an ``.rbl`` or ``.rrd`` file.

    Only what those need is read: an ``.rrd``'s header, footer (its chunk manifest) and property
    chunks; a Parquet or Arrow IPC file's schema. ``s3://`` objects are read with ``objects``
    (default: the AWS variables' settings).

    Raises ``ValueError`` for another kind of URL or a file that is not a recording,
    ``NotFoundError`` for a path or object that does not exist, ``ObjectStoreError`` for an object
    store that cannot be reached or refuses the credentials.

    >>> read_recording("file:///data/ILIAD_50aee79f.rrd").recording_id  # doctest: +SKIP
    'ILIAD_50aee79f_2023_07_12_20h_55m_08s'
    """
    remote = is_object_url(uri)
    suffix = PurePosixPath(urlparse(uri).path).suffix.lower() if remote else ""
    if remote:
        store = objects or object_store(ObjectStoreConfig.resolve())
        _check_suffix(uri, suffix, blueprint)
        remote_object = store.open(uri)
        size = remote_object.size
    else:
        path = _local_file(uri)
        size, suffix = path.stat().st_size, path.suffix.lower()
        _check_suffix(uri, suffix, blueprint)

    unread = [remote_object.file] if remote else []

    def open_file() -> pa.NativeFile:
        """The file for pyarrow's readers: the opened object first, then a new one each time."""
        if remote:
            return unread.pop() if unread else store.open(uri).file
        return pa.memory_map(str(path))

    try:
        num_chunks: int | None = None
        index_ranges: tuple[IndexRange, ...] = ()
        if suffix in (".rrd", ".rbl"):
            if remote:
                found = _rrd_facts(remote_object.read_ranges, size, uri, blueprint=blueprint,
                                   replica=lambda: _rrd_replica(remote_object, store))
            else:
                with rrd.file_ranges(path) as read:
                    found = _rrd_facts(read, size, uri, blueprint=blueprint, replica=lambda: _local(path))
            recording_id, schema, properties, (num_chunks, index_ranges) = found
        elif suffix == ".parquet":
            schema = pq.read_schema(open_file())
            recording_id, properties = _recording_id_from_metadata(schema, uri), None
        else:
            schema = _read_ipc_schema(open_file)
            recording_id, properties = _recording_id_from_metadata(schema, uri), None
    except ObjectStoreError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{uri} is not a readable recording: {exc}") from exc
    return Recording(uri, recording_id, size, schema, properties, num_chunks, index_ranges,
                     schemas.canonical_bytes(schema))


def chunk_index(uri: str, objects: ObjectStore | None = None) -> pa.Table:
    """The chunk index of the recording in the ``.rrd`` at a ``file://`` or ``s3://`` URL (its
    first recording), read from the file's footer: no chunk is read, and of an ``s3://`` object
    (read with ``objects``, default the AWS variables' settings) only the header and footers are
    fetched.

    One row per chunk, as rerun-sdk indexes it: ``chunk_id``, ``chunk_entity_path``,
    ``chunk_is_static``, ``chunk_num_rows``, ``chunk_byte_offset`` and ``chunk_byte_size`` (where
    the chunk's bytes are in the file), ``chunk_byte_size_uncompressed``, and the chunk's first and
    last value on each timeline (``<timeline>:start``, ``<timeline>:end``, and the same per
    component), with Rerun's field metadata.

    Raises ``ValueError`` for another kind of URL or a file that is not an ``.rrd`` recording,
    ``NotFoundError`` for a path or object that does not exist, ``ObjectStoreError`` for an object
    store that cannot be reached or refuses the credentials.

    Examples:
        >>> index = chunk_index("file:///data/ep_1.rrd")  # doctest: +SKIP
        >>> where = ["chunk_entity_path", "chunk_byte_offset", "chunk_byte_size"]  # doctest: +SKIP
        >>> index.select(where).slice(0, 1).to_pylist()  # doctest: +SKIP
        [{'chunk_entity_path': '/__properties', 'chunk_byte_offset': 176, 'chunk_byte_size': 961}]
    """
    if is_object_url(uri):
        store = objects or object_store(ObjectStoreConfig.resolve())
        _check_rrd_suffix(uri, PurePosixPath(urlparse(uri).path).suffix.lower())
        remote_object = store.open(uri)
        try:
            return _recording_manifest(remote_object.read_ranges, remote_object.size, uri).index
        except rrd.NotThisFormat:
            with _rrd_replica(remote_object, store) as (replica, _):
                return _read_chunk_index(replica, uri)
    path = _local_file(uri)
    _check_rrd_suffix(uri, path.suffix.lower())
    try:
        with rrd.file_ranges(path) as read:
            return _recording_manifest(read, path.stat().st_size, uri).index
    except rrd.NotThisFormat:
        return _read_chunk_index(path, uri)


def _local_file(uri: str) -> Path:
    """The readable local file of a ``file://`` URI. ``ValueError`` for another kind of URL, a
    directory or an unreadable file, ``NotFoundError`` for a path that does not exist."""
    if isinstance(uri, str) and ":" in uri and not uri.lower().startswith("file:"):
        raise ValueError(f"{uri!r} is not a file:// or s3:// URL; recordings are read from those")
    path = local_path(uri)
    if not path.exists():
        raise NotFoundError(f"no file at {uri} ({path} does not exist)")
    if not path.is_file():
        raise ValueError(f"{uri} is not a file ({path} is a directory or special file)")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{uri} cannot be read (permission denied for {path})")
    return path


_IPC_SUFFIXES = (".arrow", ".arrows", ".feather", ".ipc")


def _check_suffix(uri: str, suffix: str, blueprint: bool) -> None:
    if blueprint and suffix not in (".rbl", ".rrd"):
        raise ValueError(f"{uri}: unsupported file type {suffix or '(none)'} for a blueprint; "
                         "expected an .rbl file (rr.blueprint.Blueprint.save)")
    if not blueprint and suffix not in (".rrd", ".parquet", *_IPC_SUFFIXES):
        raise ValueError(
            f"{uri}: unsupported file type {suffix or '(none)'}; expected .rrd, .parquet or "
            "an Arrow IPC file (.arrow, .arrows, .feather)")


def _check_rrd_suffix(uri: str, suffix: str) -> None:
    if suffix != ".rrd":
        raise ValueError(f"{uri}: unsupported file type {suffix or '(none)'}; a chunk index is "
                         "read from an .rrd recording")


_RRD_HEADER_BYTES = 12
"""An ``.rrd`` starts with its stream header: ``RRF2``, the version and the encoding options."""
_RRD_STREAM_FOOTER = struct.Struct("<QQ4s8s4s")
"""An ``.rrd`` (rerun 0.23 and later) ends with a stream footer: the offset and length of the
footer that holds the chunk manifests, a checksum, ``RRF2FOOT`` and the footer's version."""
_RRD_FOOTER_MAGIC = b"RRF2FOOT"
_TAIL_BYTES = 64 << 10
"""The end of an object fetched at once: the stream footer and, for most recordings, the whole
manifest footer."""


@contextmanager
def _rrd_replica(remote: RemoteObject, objects: ObjectStore
                 ) -> Iterator[tuple[Path, Callable[[list[tuple[int, int]]], None] | None]]:
    """A sparse local file as large as the object that holds only the bytes rerun-sdk's reader
    needs for the manifest (the header and the footers), and a function that fetches more ranges
    into it. A recording without a stream footer (older rerun) is downloaded whole (no function
    then: everything is there)."""
    size = remote.size
    with tempfile.TemporaryDirectory(prefix="strata-rrd-") as directory:
        replica = Path(directory) / "recording.rrd"
        with replica.open("wb") as file:
            file.truncate(size)

        def fill(ranges: list[tuple[int, int]]) -> None:
            parts = remote.read_ranges(ranges)
            with replica.open("r+b") as file:
                for (offset, _), data in zip(ranges, parts, strict=True):
                    file.seek(offset)
                    file.write(data)

        tail = min(size, _TAIL_BYTES)
        fill([(0, min(size, _RRD_HEADER_BYTES)), (size - tail, tail)])
        with replica.open("rb") as reader:
            reader.seek(max(0, size - _RRD_STREAM_FOOTER.size))
            end = reader.read()
        if len(end) == _RRD_STREAM_FOOTER.size and _RRD_STREAM_FOOTER.unpack(end)[3] == _RRD_FOOTER_MAGIC:
            offset, length = _RRD_STREAM_FOOTER.unpack(end)[:2]
            if offset < size - tail and offset + length <= size:
                fill([(offset, size - tail - offset)])
            yield replica, fill
        else:
            objects.download(remote.uri, replica)
            yield replica, None


RrdFacts = tuple[str, pa.Schema, pa.Table | None, tuple[int, tuple[IndexRange, ...]]]
"""An ``.rrd``'s recording id, schema, properties and manifest summary."""


def _rrd_facts(read: rrd.Ranges, size: int, uri: str, *, blueprint: bool,
               replica: Callable[[], AbstractContextManager[tuple[Path, Any]]]) -> RrdFacts:
    """The facts of the first recording of an ``.rrd`` (with ``blueprint``, of its blueprint)
    from its footer and property chunks, read with ``read``. A file another rerun version wrote,
    or one holding several recordings, is read with rerun-sdk's reader from ``replica()`` (the
    file, or a sparse copy of the object), which knows older formats' migrations."""
    try:
        manifest = _recording_manifest(read, size, uri, blueprint=blueprint)
    except rrd.NotThisFormat:
        with replica() as (path, fill):
            return _read_rrd(path, uri, fill, blueprint=blueprint)
    properties = rrd.chunk_batches(read, _property_chunk_ranges(manifest.index))
    return (manifest.recording_id, manifest.schema, _properties_table(properties),
            _summary(manifest.index))


def _recording_manifest(read: rrd.Ranges, size: int, uri: str, *, blueprint: bool = False) -> rrd.Manifest:
    """The manifest of the one recording (with ``blueprint``, blueprint) of an ``.rrd``.
    ``rrd.NotThisFormat`` when rerun-sdk's reader must read it: another version's file, or
    several recordings (rerun-sdk knows which is first), ``ValueError`` when it holds none."""
    found = rrd.manifests(read, size, uri)
    kind = rrd.BLUEPRINT if blueprint else rrd.RECORDING
    wanted = [manifest for manifest in found if manifest.kind == kind]
    if len(wanted) > 1:
        raise rrd.NotThisFormat(f"{uri} holds {len(wanted)} recordings")
    if not wanted and blueprint:
        raise ValueError(f"{uri} holds no blueprint: save one with rr.blueprint.Blueprint.save")
    if not wanted:
        holds = ("a blueprint: register it with register_blueprint()"
                 if any(manifest.kind == rrd.BLUEPRINT for manifest in found)
                 else "nothing: it is empty or truncated")
        raise ValueError(f"{uri} holds no recording, {holds}")
    if not wanted[0].recording_id:
        raise ValueError(f"{uri} has no recording id")
    return wanted[0]


@contextmanager
def _local(path: Path) -> Iterator[tuple[Path, None]]:
    yield path, None


def _read_rrd(path: Path, uri: str, fill: Callable[[list[tuple[int, int]]], None] | None = None, *,
              blueprint: bool = False) -> RrdFacts:
    """The recording id, schema, properties and manifest summary of the first recording in an
    ``.rrd`` (with ``blueprint``, of its first blueprint). Reads the header, the footer and the
    property chunks only; ``fill`` is first given the (offset, size) of those chunks when the
    file is a sparse replica."""
    try:
        reader, recordings = _rrd_recordings(path, uri, blueprint=blueprint)
        store = reader.store(store=recordings[0])
        schema = store.schema().to_arrow()
        manifest = _chunk_index(store)
        if fill is not None:
            fill(_property_chunk_ranges(manifest))
        chunks = list(store.stream().filter(content=f"{PROPERTIES_ENTITY}/**", is_static=True))
    except ValueError:
        raise
    except Exception as exc:  # rerun raises its own exception types for corrupt files
        raise ValueError(f"{uri} is not a readable .rrd recording: {exc}") from exc
    recording_id = str(recordings[0].recording_id or "")
    if not recording_id:
        raise ValueError(f"{uri} has no recording id")
    return recording_id, schema, _properties_table([c.to_record_batch() for c in chunks]), _summary(manifest)


def _read_chunk_index(path: Path, uri: str) -> pa.Table:
    """The chunk index of the first recording in the ``.rrd`` at ``path`` (``uri`` for errors)."""
    try:
        reader, recordings = _rrd_recordings(path, uri, blueprint=False)
        return _chunk_index(reader.store(store=recordings[0]))
    except ValueError:
        raise
    except Exception as exc:  # rerun raises its own exception types for corrupt files
        raise ValueError(f"{uri} is not a readable .rrd recording: {exc}") from exc


def _rrd_recordings(path: Path, uri: str, *, blueprint: bool) -> tuple[Any, list[Any]]:
    """rerun-sdk's reader of the ``.rrd`` at ``path`` and its recordings (with ``blueprint``, its
    blueprints): at least one, else ``ValueError`` saying what the file holds."""
    from rerun.chunk import RrdReader  # rerun-sdk is heavy: imported on first .rrd

    reader = RrdReader(path)
    recordings = reader.blueprints() if blueprint else reader.recordings()
    if not recordings and blueprint:
        raise ValueError(f"{uri} holds no blueprint: save one with rr.blueprint.Blueprint.save")
    if not recordings:
        holds = ("a blueprint: register it with register_blueprint()" if reader.blueprints()
                 else "nothing: it is empty or truncated")
        raise ValueError(f"{uri} holds no recording, {holds}")
    return reader, list(recordings)


CHUNK_INDEX_COLUMNS = ("chunk_id", "chunk_entity_path", "chunk_is_static", "chunk_byte_offset",
                       "chunk_byte_size")
"""The columns of rerun-sdk's chunk index that strata reads."""


def _chunk_index(store: Any) -> pa.Table:
    """The chunk index of a ``rerun.chunk.LazyStore``, from its footer.

    The one call of rerun-sdk's private ``LazyStore._chunk_index()`` (rerun-sdk 0.41 has no public
    way to it); tests/unit/test_recordings.py pins what it returns, so an upgrade that changes it
    fails there. Raises ``ValueError`` if it lacks a column of ``CHUNK_INDEX_COLUMNS``.
    """
    index = pa.Table.from_batches([store._chunk_index().to_arrow()])  # rerun-sdk gives one batch
    missing = [name for name in CHUNK_INDEX_COLUMNS if name not in index.column_names]
    if missing:
        raise ValueError(f"rerun-sdk's chunk index has no column {', '.join(missing)}: this version "
                         "of rerun-sdk is not the one strata supports")
    return index


def _property_chunk_ranges(manifest: pa.Table) -> list[tuple[int, int]]:
    """Where the static chunks of ``/__properties`` and its children are, from the manifest."""
    entity = manifest.column("chunk_entity_path")
    wanted = pc.and_(manifest.column("chunk_is_static"), pc.or_(
        pc.equal(entity, PROPERTIES_ENTITY), pc.starts_with(entity, PROPERTIES_ENTITY + "/")))
    found = manifest.select(["chunk_byte_offset", "chunk_byte_size"]).filter(wanted)
    return list(zip(found.column(0).to_pylist(), found.column(1).to_pylist(), strict=True))


_INDEX_KINDS = ((pa.types.is_timestamp, IndexKind.TIMESTAMP), (pa.types.is_duration, IndexKind.DURATION),
                (pa.types.is_integer, IndexKind.SEQUENCE))


def manifest_summary(store: Any) -> tuple[int, tuple[IndexRange, ...]]:
    """The number of chunks and each timeline's first and last value, from a
    ``rerun.chunk.LazyStore``'s chunk manifest: no chunk data is read.

    The manifest is rerun-sdk's chunk index (``_chunk_index``), one row per chunk with a
    ``<timeline>:start`` and ``<timeline>:end`` column per timeline. Raises ``ValueError`` if it
    lacks a column strata reads.
    """
    return _summary(_chunk_index(store))


def _summary(manifest: pa.Table) -> tuple[int, tuple[IndexRange, ...]]:
    ranges = []
    for field in manifest.schema:
        if not field.name.endswith(":start"):
            continue
        metadata = field.metadata or {}
        timeline = metadata.get(b"rerun:index", b"").decode()
        if field.name != f"{timeline}:start" or b"rerun:component" in metadata:
            continue
        kind = next((k for test, k in _INDEX_KINDS if test(field.type)), None)
        if kind is None:
            continue
        first = pc.min(manifest.column(field.name).cast(pa.int64())).as_py()
        last = pc.max(manifest.column(f"{timeline}:end").cast(pa.int64())).as_py()
        if first is not None:
            ranges.append(IndexRange(timeline, kind, first, last))
    return manifest.num_rows, tuple(sorted(ranges, key=lambda r: r.timeline))


def _properties_table(batches: list[pa.RecordBatch]) -> pa.Table | None:
    """Static property chunks' record batches as one row: the last value logged for each
    component wins."""
    fields: dict[str, tuple[pa.Field, Any]] = {}
    for batch in batches:
        entity_path = batch.schema.metadata[b"rerun:entity_path"].decode()
        entity = entity_path.removeprefix(PROPERTIES_ENTITY).strip("/").replace("/", ":")
        for field, column in zip(batch.schema, batch.columns, strict=True):
            if (field.metadata or {}).get(b"rerun:kind") != b"data" or len(column) == 0:
                continue
            component = field.metadata.get(b"rerun:component", field.name.encode()).decode()
            name = f"property:{entity}:{component}" if entity else f"property:{component}"
            metadata = {k: v for k, v in field.metadata.items()
                        if k in (b"rerun:kind", b"rerun:component", b"rerun:archetype",
                                 b"rerun:component_type")}
            metadata[b"rerun:entity_path"] = entity_path.encode()
            fields[name] = (pa.field(name, field.type, metadata=metadata), column.slice(len(column) - 1))
    if not fields:
        return None
    names = sorted(fields)
    schema = pa.schema([fields[n][0] for n in names])
    return pa.Table.from_arrays([fields[n][1] for n in names], schema=schema)


def with_properties(recording: Recording, properties: Mapping[str, Mapping[str, Any]]) -> Recording:
    """The recording with ``properties`` ({entity: {field: value}}) added as
    ``property:<entity>:<field>`` list columns, as ``rr.send_property`` stores them; they win over
    the file's own values of the same name.

    Raises ``ValueError`` for an empty entity or field name or a value Arrow cannot hold.
    """
    columns: dict[str, pa.Array] = {}
    if recording.properties is not None:
        columns = {name: recording.properties.column(name).chunk(0)
                   for name in recording.properties.column_names}
    for entity, fields in properties.items():
        if not isinstance(entity, str) or not entity.strip("/") or not isinstance(fields, Mapping):
            raise ValueError(f"properties must map entity names to {{field: value}} mappings, got "
                             f"{entity!r}: {fields!r}")
        for field, value in fields.items():
            if not isinstance(field, str) or not field:
                raise ValueError(f"property fields of {entity!r} must be non-empty strings, got {field!r}")
            # Like rerun's properties, every value is a batch: a scalar becomes a list of one.
            batch = list(value) if isinstance(value, (list, tuple)) else [value]
            try:
                column = pa.array([batch])
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise ValueError(f"property {entity}:{field} = {value!r} cannot be stored: {exc}") from exc
            columns[f"property:{entity.strip('/').replace('/', ':')}:{field}"] = column
    names = sorted(columns)
    table = pa.table({name: columns[name] for name in names}) if names else None
    return dataclasses.replace(recording, properties=table)


def _read_ipc_schema(open_file: Callable[[], pa.NativeFile]) -> pa.Schema:
    try:
        with open_file() as source:
            return pa.ipc.open_file(source).schema
    except pa.ArrowInvalid:
        with open_file() as source:
            return pa.ipc.open_stream(source).schema


def _recording_id_from_metadata(schema: pa.Schema, uri: str) -> str:
    value = (schema.metadata or {}).get(RECORDING_ID_KEY)
    if not value:
        raise ValueError(f"{uri} has no 'recording_id' in its schema metadata")
    recording_id: str = value.decode()
    return recording_id
