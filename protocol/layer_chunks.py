"""A dataset's registered layers, as its manifest lists them (``commands.reads``), and each
layer's chunks: the chunk index of its ``.rrd`` (``recordings.chunk_index``: byte offsets and
sizes from the file's footer, no chunk read) with each chunk's signed ``chunk_key``, and the
layer's Arrow schema.

Both are read once per layer and kept (``LayerChunks``, bounded): a layer is immutable, so what
its file held when it was registered is what it holds; the cache is keyed by the layer's file,
its registered size and its registration time, so a layer registered again (``replace``) is read
again. The catalog's state is never kept here: which layers exist is asked of the store on each
call.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

import recordings
from commands import Catalog, reads
from projector import Dataset
from protocol.chunk_keys import CHUNK_KEY, ChunkKeys, LayerRef
from protocol.chunk_rows import DIRECT_URL_FIELDS, layer_rows
from protocol.direct import DirectServer, direct_keys

MANIFEST_COLUMNS = ("rerun_segment_id", "rerun_layer_name", "rerun_storage_url", "rerun_size_bytes",
                    "rerun_registration_time")
"""The columns of the dataset's manifest a read needs."""
T = TypeVar("T")
MAX_LAYERS = 16_384
"""Layers whose chunk index is kept (a DROID-like episode's is about 25 rows)."""


@dataclass(frozen=True)
class Layer:
    """A registered layer: its file (``ref``) and when it was registered."""

    ref: LayerRef
    registered_at: datetime | None


def layers(catalog: Catalog, dataset: Dataset, segment_ids: Sequence[str] | None = None) -> list[Layer]:
    """The dataset's layers (of ``segment_ids`` only, if given: the manifest of those segments
    alone), by segment id, each segment's in the manifest's order (sorting is stable)."""
    if segment_ids is None:
        manifest = reads.manifest(catalog, dataset.id)
    elif not segment_ids:
        return []
    else:
        table = reads.layer_table(catalog, dataset.id)
        wanted = pa.array(sorted(set(segment_ids)), pa.string())
        manifest = reads.manifest_of(catalog, table.filter(pc.is_in(table.column("segment_id"), wanted)))
    rows = manifest.select(list(MANIFEST_COLUMNS)).to_pydict()
    found = [Layer(LayerRef(url, segment, layer, int(size or 0)), registered)
             for segment, layer, url, size, registered in zip(*(rows[name] for name in MANIFEST_COLUMNS),
                                                              strict=True)]
    return sorted(found, key=lambda layer: layer.ref.segment_id)


def layers_by_schema(catalog: Catalog, dataset: Dataset, digests: Sequence[bytes]) -> dict[bytes, Layer]:
    """A layer of the dataset whose schema has each digest (the manifest's
    ``rerun_schema_sha256``), the first registered; a digest no layer has is left out."""
    wanted = set(digests)
    rows = reads.manifest(catalog, dataset.id).select(["rerun_schema_sha256", *MANIFEST_COLUMNS]).to_pydict()
    found: dict[bytes, Layer] = {}
    for digest, segment, layer, url, size, registered in zip(
            rows["rerun_schema_sha256"], *(rows[name] for name in MANIFEST_COLUMNS), strict=True):
        if digest in wanted and digest not in found:
            found[digest] = Layer(LayerRef(url, segment, layer, int(size or 0)), registered)
    return found


class LayerChunks:
    """Each layer's chunk index with its chunk keys, and its schema, read once and kept (the
    ``MAX_LAYERS`` last used). With ``direct`` (the server of direct URLs, whose tokens are
    ``keys``'), a layer's candidate rows can also be had with direct URLs."""

    def __init__(self, keys: ChunkKeys | None = None, *, max_layers: int = MAX_LAYERS) -> None:
        self.keys = keys or ChunkKeys()
        self.direct: DirectServer | None = None
        self._max_layers = max_layers
        self._lock = threading.Lock()
        self._chunks: collections.OrderedDict[tuple[object, ...], pa.Table] = collections.OrderedDict()
        self._files: collections.OrderedDict[tuple[object, ...], tuple[pa.Schema, str]]
        self._files = collections.OrderedDict()
        self._rows: collections.OrderedDict[tuple[object, ...], pa.Table] = collections.OrderedDict()
        self.reads = 0
        """Files whose footer was read (for tests and measurements)."""

    def _cached(self, cache: collections.OrderedDict[tuple[object, ...], T], key: tuple[object, ...],
                read: Callable[[], T]) -> T:
        with self._lock:
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
        value = read()  # outside the lock: another layer's reads go on meanwhile
        with self._lock:
            cache[key] = value
            while len(cache) > self._max_layers:
                cache.popitem(last=False)
        return value

    def chunks(self, layer: Layer, objects: recordings.ObjectStoreConfig) -> pa.Table:
        """``layer``'s chunk index (``recordings.chunk_index``) with a ``chunk_key`` column.
        Raises what ``recordings.chunk_index`` raises."""

        def read() -> pa.Table:
            index = recordings.chunk_index(layer.ref.storage_url, _store(layer.ref, objects))
            with self._lock:
                self.reads += 1
            if isinstance(index, pa.RecordBatch):  # what rerun-sdk gives, whatever the annotation says
                index = pa.Table.from_batches([index])
            keys = self.keys.keys(layer.ref, index.column("chunk_byte_offset").to_pylist(),
                                  index.column("chunk_byte_size").to_pylist())
            return index.append_column(pa.field(CHUNK_KEY, pa.binary()), pa.array(keys, pa.binary()))

        return self._cached(self._chunks, (layer.ref, layer.registered_at), read)

    def rows(self, layer: Layer, objects: recordings.ObjectStoreConfig, *, direct: bool = False) -> pa.Table:
        """``layer``'s chunks as candidate rows (``chunk_rows.layer_rows``), made once. With
        ``direct``, when this server has direct URLs and the file's recording id is the segment id
        (the id Rerun's client reads from the chunks it fetches by URL), with the layer's direct
        URL and Rerun's ``ChunkKey``s (``protocol.direct``) instead of this server's keys."""
        if direct and self.direct is not None and self.recording_id(layer, objects) == layer.ref.segment_id:
            server, period = self.direct, self.direct.period()

            def with_urls() -> pa.Table:
                index = self.chunks(layer, objects)
                url, tag = server.locate(layer.ref, period)
                keys = direct_keys(url, tag, index.column("chunk_id").to_pylist(),
                                   index.column("chunk_byte_offset").to_pylist(),
                                   index.column("chunk_byte_size").to_pylist())
                rows = self.rows(layer, objects)
                rows = rows.set_column(rows.schema.get_field_index(CHUNK_KEY), rows.schema.field(CHUNK_KEY),
                                       pa.array(keys, pa.binary()))
                urls = pa.DictionaryArray.from_arrays(pa.array([0] * rows.num_rows, pa.int32()),
                                                      pa.array([url], pa.string()))
                expires = pa.nulls(rows.num_rows, DIRECT_URL_FIELDS[1].type)
                rows = rows.append_column(DIRECT_URL_FIELDS[0], urls)
                return rows.append_column(DIRECT_URL_FIELDS[1], expires)

            table = self._cached(self._rows, (layer.ref, layer.registered_at, period), with_urls)
        else:
            table = self._cached(self._rows, (layer.ref, layer.registered_at),
                                 lambda: layer_rows(layer.ref, self.chunks(layer, objects)))
        return table

    def _file(self, layer: Layer, objects: recordings.ObjectStoreConfig) -> tuple[pa.Schema, str]:
        def read() -> tuple[pa.Schema, str]:
            found = recordings.read_recording(layer.ref.storage_url, _store(layer.ref, objects))
            return found.arrow_schema, found.recording_id

        return self._cached(self._files, (layer.ref, layer.registered_at), read)

    def schema(self, layer: Layer, objects: recordings.ObjectStoreConfig) -> pa.Schema:
        """``layer``'s Arrow schema as its file has it. Raises what ``recordings.read_recording``
        raises."""
        return self._file(layer, objects)[0]

    def recording_id(self, layer: Layer, objects: recordings.ObjectStoreConfig) -> str:
        """The recording id ``layer``'s file holds. Raises what ``recordings.read_recording``
        raises."""
        return self._file(layer, objects)[1]


def _store(layer: LayerRef, objects: recordings.ObjectStoreConfig) -> recordings.ObjectStore | None:
    """The object store of an ``s3://`` layer, None for a local one."""
    return recordings.object_store(objects) if recordings.is_object_url(layer.storage_url) else None
