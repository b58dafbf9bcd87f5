"""An ``.rrd`` file's footer and chunks, read as rerun-sdk 0.41 writes them, with protobuf (the
installed rerun-sdk's own definitions, ``recordings.definitions``) and pyarrow: no rerun-sdk
store is built, and only the bytes asked for are read.

The layout, little-endian throughout:

- a 12-byte stream header: ``RRF2``, the writer's version (major, minor, patch, build), the
  compression and serializer bytes, two reserved bytes;
- messages, each a 16-byte header (kind, length) and a protobuf payload: ``SetStoreInfo``,
  ``ArrowMsg`` (a chunk), ``BlueprintActivationCommand``, and last the ``End`` message, whose
  payload is the ``RrdFooter``: one ``RrdManifest`` per store (recording or blueprint), with the
  store's id, its sorbet schema (an Arrow IPC stream of the schema alone), that schema's SHA-256
  and its chunk index (an Arrow IPC stream, LZ4-compressed as a raw block);
- a 32-byte trailer: the footer's offset and length, its checksum, ``RRF2FOOT`` and the number of
  footers.

A chunk index row's ``chunk_byte_offset`` and ``chunk_byte_size`` are where the chunk's
``ArrowMsg`` payload is, after its message header; that payload holds the chunk's record batch as
an Arrow IPC stream, compressed the same way.

A file without a trailer (a writer that never finished, a file cut short) has no manifest to
read, and is refused with what to do. ``tests/unit/test_rrd.py`` checks every result against
rerun-sdk's own reader on the same files.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc
from google.protobuf.message import DecodeError

from recordings.definitions import message_class

__all__ = ["BLUEPRINT", "RECORDING", "Manifest", "Ranges", "chunk_batches", "file_ranges", "manifests"]

RECORDING = 1
BLUEPRINT = 2
"""``StoreKind``: what a manifest's store is."""

Ranges = Callable[[list[tuple[int, int]]], list[bytes]]
"""Reads byte ranges (offset, size) of one file, all at once: a local file's, or an object's
ranged reads in flight together."""

_HEADER = struct.Struct("<4s4BBBH")
_TRAILER = struct.Struct("<QQI8sI")
_TRAILER_MAGIC = b"RRF2FOOT"
_LZ4 = 2
"""``rerun.common.v1alpha1.Compression.COMPRESSION_LZ4``: a raw LZ4 block."""
_SUPPORTED = (0, 41)
"""The writer version (major, minor) whose files this module reads; others go to rerun-sdk's
reader, which knows their migrations."""
TAIL_BYTES = 64 << 10
"""Read at once from a file's end: the trailer and, for most recordings, the whole footer."""


@contextmanager
def file_ranges(path: Path) -> Iterator[Ranges]:
    """Reads byte ranges of the local file at ``path`` while open."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        yield lambda ranges: [os.pread(descriptor, size, offset) for offset, size in ranges]
    finally:
        os.close(descriptor)


class NotThisFormat(ValueError):
    """The file is an ``.rrd`` that this module does not read (another writer version); rerun-sdk's
    reader may."""


@dataclass(frozen=True)
class Manifest:
    """One store of an ``.rrd``: its kind (``RECORDING``, ``BLUEPRINT``), recording id, sorbet
    schema (fields in rerun-sdk's order) and chunk index (one row per chunk)."""

    kind: int
    recording_id: str
    schema: pa.Schema
    index: pa.Table


def manifests(read: Ranges, size: int, uri: str) -> list[Manifest]:
    """The manifests of the ``.rrd`` of ``size`` bytes that ``read`` reads (``uri`` in errors):
    one ranged read of its start and end, a second only when its footer is larger than
    ``TAIL_BYTES``.

    Raises ``NotThisFormat`` for a file another rerun version wrote, ``ValueError`` for a file that
    is not an ``.rrd`` or has no footer."""
    if size < _HEADER.size + _TRAILER.size:
        raise ValueError(f"{uri} is not a readable .rrd recording: {size} bytes is too short for one")
    tail = min(size, TAIL_BYTES)
    head, end = read([(0, _HEADER.size), (size - tail, tail)])
    magic, major, minor, _, _, _, serializer, _ = _HEADER.unpack(head)
    if magic != b"RRF2" or serializer != 2:
        raise ValueError(f"{uri} is not a readable .rrd recording: it does not start as one of rerun "
                         f"0.23 or later does ({magic!r})")
    if (major, minor) != _SUPPORTED:
        raise NotThisFormat(f"{uri} was written by rerun {major}.{minor}")
    offset, length, _, trailer_magic, _ = _TRAILER.unpack(end[-_TRAILER.size:])
    if trailer_magic != _TRAILER_MAGIC or offset + length + _TRAILER.size != size:
        raise ValueError(f"{uri} is not a readable .rrd recording: it has no footer, its writer did not "
                         "finish it (a recording still being written, or cut short). Rewrite it with "
                         "`rerun rrd merge FILE > NEW.rrd`, which adds the footer, and register that file")
    start = size - tail
    footer = end[offset - start:offset - start + length] if offset >= start else read([(offset, length)])[0]
    try:
        parsed = message_class("rerun.log_msg.v1alpha1.RrdFooter").FromString(footer)
        return [_manifest(m) for m in parsed.manifests]
    except (DecodeError, pa.ArrowException, ValueError) as exc:  # a corrupt footer
        raise ValueError(f"{uri} is not a readable .rrd recording: its footer is corrupt ({exc})") from exc


def _manifest(message: Any) -> Manifest:
    sha256 = bytes(message.sorbet_schema_sha256)
    schema = _schema(sha256, bytes(message.sorbet_schema.arrow_schema))
    data = message.data
    index = pa.ipc.open_stream(_payload(data.payload, data.compression, data.uncompressed_size)).read_all()
    return Manifest(message.store_id.kind, message.store_id.recording_id, schema, index)


def _payload(payload: bytes, compression: int, size: int) -> pa.Buffer:
    if compression == _LZ4:
        return pa.decompress(payload, decompressed_size=size, codec="lz4_raw")
    return pa.py_buffer(payload)


def _schema(sha256: bytes, message: bytes) -> pa.Schema:
    """The sorbet schema, fields in rerun-sdk's order; the footer's order is a hash map's. Equal
    hashes, equal schemas: a dataset's files share theirs, parsed and sorted once."""
    known = _SCHEMAS.get(sha256) if sha256 else None
    if known is not None:
        return known
    schema = pa.ipc.open_stream(message).schema
    ordered = pa.schema(sorted(schema, key=_field_order), metadata=schema.metadata)
    if sha256:
        with _SCHEMAS_LOCK:  # an endpoint reads files on several threads
            if len(_SCHEMAS) >= 256:
                _SCHEMAS.pop(next(iter(_SCHEMAS)))
            _SCHEMAS[sha256] = ordered
    return ordered


_SCHEMAS: dict[bytes, pa.Schema] = {}
"""The sorted schemas met, by hash: at most 256, the oldest dropped first."""
_SCHEMAS_LOCK = threading.Lock()


_KINDS = {b"control": 0, b"index": 1, b"data": 2}


def _field_order(field: pa.Field) -> tuple[Any, ...]:
    """rerun-sdk's order of a sorbet schema's columns: the row id, the timelines, then the data
    columns by entity path (part by part, ``/__properties`` last), archetype and component."""
    metadata = field.metadata or {}
    entity = metadata.get(b"rerun:entity_path", b"").decode()
    return (_KINDS.get(metadata.get(b"rerun:kind", b""), 3), entity.startswith("/__properties"),
            [part for part in entity.split("/") if part], metadata.get(b"rerun:archetype", b""),
            metadata.get(b"rerun:component", b""), field.name)


def chunk_batches(read: Ranges, ranges: list[tuple[int, int]]) -> list[pa.RecordBatch]:
    """The record batches of the chunks at ``ranges`` (``chunk_byte_offset``,
    ``chunk_byte_size`` of the index), read together."""
    arrow_msg = message_class("rerun.log_msg.v1alpha1.ArrowMsg")
    batches = []
    for data in read(ranges):
        message = arrow_msg.FromString(data)
        stream = pa.ipc.open_stream(_payload(message.payload, message.compression, message.uncompressed_size))
        batches.extend(stream)
    return batches
