"""Reading recordings' data over the protocol, as Rerun's client does for ``reader()``,
``segment_store()`` and ``Segment.schema()``: the candidate chunks of a query (``FindChunks``, or
``QueryDataset`` for a client that was not told of ``dataset:find_chunks``), their bytes
(``FetchChunks``), a segment's chunk manifest (``GetRrdManifest``), the assets that apply to a
segment (``GetAssetsForSegment``) and layers' schemas by digest (``GetSchemas``).

Which layers a dataset has is read from the store's views through the catalog (``commands.reads``)
when the RPC is called; every read of a file (its footer, its schema, its chunks' bytes) happens as
the client reads the RPC's lazy stream. Chunk bytes are never decoded: each chunk's ``ArrowMsg`` is
copied from its file into hand-framed ``FetchChunksResponse`` messages of a few MB, with the segment
id set as its recording id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

import pyarrow as pa
from google.protobuf.message import Message

import recordings
from commands import assets
from projector import Dataset, DatasetKind, companion_id
from protocol import chunk_rows
from protocol.chunk_keys import CHUNK_KEY, ChunkLocation, LayerRef
from protocol.chunk_rows import FIND_CHUNKS_TIMELINE, Selection, query_dataset_timeline
from protocol.dataframes import decode, encode, ipc_stream, schema_message
from protocol.datasets import parts
from protocol.descriptors import cloud, common, enum_value, message_class
from protocol.entries import DATASET_KINDS
from protocol.errors import InvalidRequestError
from protocol.ids import entry_id
from protocol.layer_chunks import Layer, layers, layers_by_schema
from protocol.layer_files import changed, read_ranges
from protocol.requests import Request, Streaming

RESPONSE_BYTES = 4 << 20
"""Chunk bytes per ``FetchChunksResponse``: a few MB, so that a scan is a few messages, not one
per chunk."""
COALESCE_GAP_BYTES = 256 << 10
"""Chunks of one file closer than this are read in one read (one GET for an object)."""
FILL_MODE = "rerun.cloud.v1alpha1.FillMode"
DIRECT_URL_MODES = frozenset(enum_value("rerun.cloud.v1alpha1.DirectUrlMode", f"DIRECT_URL_MODE_{mode}")
                             for mode in ("SIGNED", "UNSIGNED"))
"""The ``FindChunks`` modes that ask for direct URLs (strata's are signed either way)."""


def _meta(dataset: Dataset) -> Message:
    return cloud("DatasetResponseMeta", entry_id=entry_id(dataset.id))


def _segments(selection: Message) -> list[str] | None:
    """The segment ids of a ``SegmentSelection`` (None: every segment)."""
    if selection.WhichOneof("selection") == "explicit":
        return [segment.id for segment in selection.explicit.ids]
    return None


def _entities(contents: Message) -> frozenset[str] | None:
    if contents.WhichOneof("selection") == "explicit":
        return frozenset(entity.entity_path.path for entity in contents.explicit.entities)
    return None


def find_chunks_selection(message: Message) -> tuple[Selection, list[str] | None]:
    """What a ``FindChunksRequest`` asks for, and of which segments (None: all)."""
    entities = _entities(message.contents) if message.HasField("contents") else None
    mode = message.WhichOneof("mode")
    if mode == "static":
        return Selection(entities, temporal=False), _segments(message.static.segments)
    if mode == "range":
        wanted = message.range
        latest_at = wanted.fill_mode == enum_value(FILL_MODE, "FILL_MODE_LATEST_AT")
        earliest_at = wanted.fill_mode == enum_value(FILL_MODE, "FILL_MODE_EARLIEST_AT")
        start = wanted.start_inclusive if wanted.HasField("start_inclusive") and not latest_at else None
        end = wanted.end_inclusive if wanted.HasField("end_inclusive") and not earliest_at else None
        selection = Selection(entities, timeline=wanted.timeline or None, start=start, end=end)
        return selection, _segments(wanted.segments)
    if mode == "samples":
        wanted = message.samples
        values = [value for segment in wanted.segments for value in segment.values]
        segment_ids = [segment.segment_id.id for segment in wanted.segments]
        filled = wanted.fill_mode in (enum_value(FILL_MODE, "FILL_MODE_LATEST_AT"),
                                      enum_value(FILL_MODE, "FILL_MODE_EARLIEST_AT"))
        start = min(values) if values and not filled else None
        end = max(values) if values and not filled else None
        return Selection(entities, timeline=wanted.timeline or None, start=start, end=end), segment_ids
    return Selection(entities), None


def query_dataset_selection(message: Message) -> tuple[Selection, list[str] | None]:
    """What a ``QueryDatasetRequest`` asks for, and of which segments (None: all).
    ``InvalidRequestError`` for a filter on chunk ids, which strata does not take (nor does
    Rerun's server)."""
    if message.chunk_ids:
        raise InvalidRequestError("QueryDataset: filtering by chunk id is not supported")
    entities = frozenset(path.path for path in message.entity_paths) or None
    timeline = start = end = None
    if message.HasField("query"):
        query = message.query
        if query.HasField("range") and query.range.index.timeline.name:
            timeline = query.range.index.timeline.name
            start, end = query.range.index_range.start, query.range.index_range.end
            if query.HasField("latest_at"):  # filled from the values before the range
                start = None
        elif query.HasField("latest_at") and query.latest_at.index.timeline.name:
            timeline = query.latest_at.index.timeline.name
            values = [value for values in query.latest_at.per_segment_values for value in values.values]
            if query.latest_at.HasField("at"):
                values.append(query.latest_at.at)
            end = max(values) if values else None
    selection = Selection(entities, static=not message.exclude_static_data,
                          temporal=not message.exclude_temporal_data, timeline=timeline, start=start, end=end)
    return selection, [segment.id for segment in message.segment_ids] or None


def _candidates(request: Request, response: str, selection: Selection, segment_ids: list[str] | None,
                timeline: pa.Field | None, *, direct: bool) -> Iterator[Message]:
    """The candidate chunks of ``selection``, with direct URLs if ``direct``: the layers read from
    the store now, the rest lazily."""
    dataset = request.dataset()
    found = layers(request.catalog, dataset, segment_ids)
    meta = _meta(dataset)
    objects = request.catalog.object_store_config
    cache = request.layer_chunks

    def respond() -> Iterator[Message]:
        rows = [cache.rows(layer, objects, direct=direct) for layer in found]
        yield from parts(chunk_rows.candidates(rows, selection, timeline), response, meta)

    return respond()


def find_chunks(request: Request) -> Iterator[Message]:
    """The chunks a query may need (a superset: the client resolves latest-at and ranges), one row
    each with its ``chunk_key``, and its direct URL if the request's ``direct_url_mode`` asks for
    one and the server has them (``protocol.direct``)."""
    selection, segment_ids = find_chunks_selection(request.message)
    direct = request.message.direct_url_mode in DIRECT_URL_MODES
    return _candidates(request, "FindChunksResponse", selection, segment_ids, FIND_CHUNKS_TIMELINE,
                       direct=direct)


def query_dataset(request: Request) -> Iterator[Message]:
    """``FindChunks`` as older clients ask it; the queried timeline's first values in a
    ``<timeline>:start`` column. The ``columns`` projection is not applied: Rerun's server sends
    every column too."""
    selection, segment_ids = query_dataset_selection(request.message)
    timeline = query_dataset_timeline(selection.timeline) if selection.timeline else None
    return _candidates(request, "QueryDatasetResponse", selection, segment_ids, timeline,
                       direct=request.message.generate_direct_urls)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def fetch_response(chunks: Sequence[bytes | memoryview], segment_ids: Sequence[str]) -> bytes:
    """An encoded ``FetchChunksResponse`` of ``chunks``, ``ArrowMsg``s read from files, each one's
    ``store_id.recording_id`` set to its segment id: a ``store_id`` appended to a message is merged
    into the one it has (protobuf merges a message field met twice, the later scalar winning), so
    the payload is not decoded. Each chunk's bytes are copied once, by the final join."""
    parts: list[bytes | memoryview] = []
    for chunk, segment_id in zip(chunks, segment_ids, strict=True):
        store_id = _field(1, _field(2, segment_id.encode()))
        parts += (_varint(1 << 3 | 2) + _varint(len(chunk) + len(store_id)), chunk, store_id)
    return b"".join(parts)


def _coalesced(wanted: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (offset, size) reads that cover ``wanted`` (sorted by offset), neighbours merged."""
    merged: list[tuple[int, int]] = []
    for offset, size in wanted:
        if merged and offset <= merged[-1][0] + merged[-1][1] + COALESCE_GAP_BYTES:
            start, length = merged[-1]
            merged[-1] = (start, max(length, offset + size - start))
        else:
            merged.append((offset, size))
    return merged


def chunk_bytes(locations: Sequence[ChunkLocation],
                objects: recordings.ObjectStoreConfig) -> list[memoryview]:
    """Each location's ``ArrowMsg`` bytes, in order, as views of the reads: one file open and a
    few coalesced reads per file. Raises what ``read_ranges`` raises, and
    ``RecordingChangedError`` if a file ends early."""
    found: list[memoryview] = [memoryview(b"")] * len(locations)
    by_file: dict[LayerRef, list[int]] = {}
    for number, location in enumerate(locations):
        by_file.setdefault(location.layer, []).append(number)
    for layer, numbers in by_file.items():
        numbers.sort(key=lambda n: locations[n].offset)
        reads = _coalesced([(locations[n].offset, locations[n].length) for n in numbers])
        blobs = read_ranges(layer, reads, objects)
        at = 0
        for number in numbers:
            location = locations[number]
            while location.offset >= reads[at][0] + reads[at][1]:
                at += 1
            start = location.offset - reads[at][0]
            found[number] = memoryview(blobs[at])[start:start + location.length]
            if len(found[number]) != location.length:
                raise changed(layer, reads[at][0] + len(blobs[at]))
    return found


def _fetch_responses(locations: list[ChunkLocation],
                     objects: recordings.ObjectStoreConfig) -> Iterator[bytes]:
    """Encoded ``FetchChunksResponse``s of about ``RESPONSE_BYTES`` each, chunks in the order asked."""
    batch: list[ChunkLocation] = []
    size = 0
    for location in [*locations, None]:
        if location is not None:
            batch.append(location)
            size += location.length
        if batch and (location is None or size >= RESPONSE_BYTES):
            data = chunk_bytes(batch, objects)
            yield fetch_response(data, [where.layer.segment_id for where in batch])
            batch, size = [], 0


def fetch_chunks(request: Request) -> Iterator[bytes]:
    """The chunks whose ``chunk_key``s the request's parts carry (any other columns are ignored),
    as ``ArrowMsg``s. ``InvalidRequestError`` for a part without ``chunk_key``,
    ``InvalidChunkKeyError`` for a key this server did not hand out; both before anything is
    sent."""
    keys: list[bytes] = []
    for part in request.message.chunk_infos:
        table = decode(part)
        if CHUNK_KEY not in table.column_names:
            raise InvalidRequestError(f"FetchChunks: chunk_infos need a {CHUNK_KEY!r} column; they have "
                                      f"{', '.join(table.column_names) or 'none'}")
        keys += table.column(CHUNK_KEY).to_pylist()
    locations = [request.layer_chunks.keys.location(key) for key in keys]
    return _fetch_responses(locations, request.catalog.object_store_config)


def _store_kind(dataset: Dataset) -> int:
    return enum_value("rerun.common.v1alpha1.StoreKind", DATASET_KINDS[dataset.kind][1])


def _segment_layers(request: Request, dataset: Dataset, segment_id: str) -> list[Layer]:
    found = layers(request.catalog, dataset, [segment_id])
    if not found:
        raise recordings.NotFoundError(f"Segment {segment_id!r} not found in dataset {dataset.name!r}")
    return found


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` as one record batch: Rerun's client reads the first batch of a manifest only."""
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def segment_schema(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """The schema of a segment of layers of ``schemas``: their union (the client orders it)."""
    return schemas[0] if len(schemas) == 1 else pa.unify_schemas(list(schemas), promote_options="permissive")


def get_rrd_manifest(request: Request) -> Iterator[Message]:
    """A segment's chunk manifest: every layer's chunk index with its ``chunk_key`` (merged for
    several layers), its schema and the schema's SHA-256. ``NotFoundError`` for a segment the
    dataset does not have."""
    dataset = request.dataset()
    segment_id = request.message.segment_id.id
    found = _segment_layers(request, dataset, segment_id)
    meta, kind, name = _meta(dataset), _store_kind(dataset), dataset.name
    objects, cache = request.catalog.object_store_config, request.layer_chunks

    def respond() -> Iterator[Message]:
        schema = segment_schema([cache.schema(layer, objects) for layer in found])
        rows = chunk_rows.manifest([cache.chunks(layer, objects) for layer in found])
        store_id = common("StoreId", kind=kind, recording_id=segment_id,
                          application_id=common("ApplicationId", id=name))
        manifest = message_class("rerun.log_msg.v1alpha1.RrdManifest")(
            store_id=store_id, sorbet_schema=schema_message(schema),
            sorbet_schema_sha256=hashlib.sha256(ipc_stream(schema)).digest(),
            data=encode(one_batch(rows)))
        yield cloud("GetRrdManifestResponse", rrd_manifest=manifest, meta=meta)

    return respond()


def get_assets_for_segment(request: Request) -> list[Message]:
    """The dataset's asset dataset and the assets that apply to the segment. ``NotFoundError``
    for a hidden dataset, which has no assets (Rerun's client then reads the segment alone)."""
    dataset = request.dataset()
    if dataset.hidden:
        raise recordings.NotFoundError(f"{dataset.name!r} is a hidden dataset: it has no assets")
    owned = request.catalog.find_dataset(None, companion_id(dataset.id, DatasetKind.ASSET))
    segment_ids = assets.for_segment(request.catalog, owned.id, request.message.segment_id.id)
    return [cloud("GetAssetsForSegmentResponse", assets_entry=entry_id(owned.id),
                  asset_segment_ids=[common("SegmentId", id=segment) for segment in segment_ids])]


def get_schemas(request: Request) -> Iterator[Message]:
    """The schema of each digest (the manifest's ``rerun_schema_sha256``), read from a layer's
    file of that schema. ``NotFoundError`` for a digest no layer of the dataset has."""
    dataset = request.dataset()
    digests = [schema_id.sha256 for schema_id in request.message.schema_ids]
    found = layers_by_schema(request.catalog, dataset, digests)
    missing = [digest.hex() for digest in digests if digest not in found]
    if missing:
        raise recordings.NotFoundError(f"no layer of {dataset.name!r} has the schema {', '.join(missing)}")
    meta, objects, cache = _meta(dataset), request.catalog.object_store_config, request.layer_chunks

    def respond() -> Iterator[Message]:
        for digest in digests:
            yield cloud("GetSchemasResponse", schema_id=common("SchemaId", sha256=digest),
                        schema=schema_message(cache.schema(found[digest], objects)), meta=meta)

    return respond()


STREAMING: dict[str, Streaming] = {
    "FindChunks": find_chunks, "QueryDataset": query_dataset, "FetchChunks": fetch_chunks,
    "GetRrdManifest": get_rrd_manifest, "GetAssetsForSegment": get_assets_for_segment,
    "GetSchemas": get_schemas,
}
"""The reads' RPCs (each a stream of responses), by name, each read lazily (``FetchChunks``'s
responses are encoded already)."""
