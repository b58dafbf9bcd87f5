"""What the segment page shows from inside a recording, read from the segment's layers with the
reader ``reader()`` uses for each segment (``recordings.read_segment``): the scalar series of
entities on a timeline, the times and the bytes of an entity's camera frames, all layers as one
``.rrd``, and which timelines each entity has data on (from the files' chunk indexes).
``ValueError`` says what was asked that the segment does not have."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dashboard.segment import BLOB, MEDIA_TYPE, SCALAR, is_camera, is_series
from projector.views import SegmentDetail
from recordings import (
    SEGMENT_ID,
    LayerFile,
    ObjectStoreConfig,
    ReadOptions,
    chunk_index,
    read_segment,
    segment_rrd,
)

FRAMES_KEPT = 8
"""Entities whose frames are kept in memory (the page scrubs one camera at a time)."""


def _files(detail: SegmentDetail) -> tuple[LayerFile, ...]:
    config = ObjectStoreConfig.resolve()
    columns = [detail.layers.column(n).to_pylist()
               for n in ("layer_name", "storage_url", "size_bytes")]
    return tuple(LayerFile(detail.segment_id, layer, url, size, config)
                 for layer, url, size in zip(*columns, strict=True))


def timelines(detail: SegmentDetail) -> list[str]:
    """The segment's timelines, in its layers' schema order."""
    return [f.name for f in detail.schema if (f.metadata or {}).get(b"rerun:kind") == b"index"]


def entity_timelines(detail: SegmentDetail) -> dict[str, list[str]]:
    """The timelines each entity of the segment has data on (none: static data only), in the
    segment's timeline order, read from its layers' chunk indexes (``recordings.chunk_index``: one
    row per chunk, with a ``<timeline>:start`` column per timeline); no chunk data is read.
    Raises what reading a layer's file raises (``LayerFile.path``)."""
    found: dict[str, set[str]] = {entity: set() for entity in detail.entities}
    for file in _files(detail):
        manifest = chunk_index(file.path().as_uri())
        paths = manifest.column("chunk_entity_path")
        for field in manifest.schema:
            metadata = field.metadata or {}
            timeline = metadata.get(b"rerun:index", b"").decode()
            if field.name != f"{timeline}:start" or b"rerun:component" in metadata:
                continue  # not a chunk's start on a timeline (a component's, or static data)
            for entity in pc.unique(paths.filter(pc.is_valid(manifest.column(field.name)))).to_pylist():
                if entity in found:
                    found[entity].add(timeline)
    order = timelines(detail)
    return {entity: [t for t in order if t in names] for entity, names in found.items()}


def _timeline(detail: SegmentDetail, index: str) -> pa.Field:
    known = timelines(detail)
    if index not in known:
        names = ", ".join(repr(t) for t in known) or "none"
        raise ValueError(f"segment {detail.segment_id!r} has no timeline {index!r} (its timelines: {names})")
    return detail.schema.field(index)


def _entity(detail: SegmentDetail, entity: str, wanted: str, fits: bool) -> None:
    if entity not in detail.entities:
        raise ValueError(f"segment {detail.segment_id!r} has no entity {entity!r}")
    if not fits:
        components = ", ".join(f"{c.component} ({c.component_type or c.arrow_type})"
                               for c in detail.entities[entity])
        raise ValueError(f"entity {entity!r} is not {wanted}: its components are {components}")


def _fields(detail: SegmentDetail, entities: Sequence[str],
            component_types: set[str]) -> tuple[pa.Field, ...]:
    """The non-static component fields of ``component_types`` of ``entities``."""
    return tuple(detail.schema.field(f"{c.entity_path}:{c.component}")
                 for entity in entities for c in detail.entities[entity]
                 if c.component_type in component_types and not c.static)


def _read(segment_id: str, files: tuple[LayerFile, ...], timeline: pa.Field, fields: tuple[pa.Field, ...],
          entities: tuple[str, ...]) -> pa.Table:
    """The segment's rows on ``timeline`` where one of ``entities`` has data: the index column
    and ``fields``, named as ``reader()`` names them."""
    schema = pa.schema([pa.field(SEGMENT_ID, pa.string()), timeline, *fields])
    options = ReadOptions(timeline.name, (entities,))
    return read_segment(segment_id, files, options, schema).drop_columns([SEGMENT_ID])


_read_kept = functools.lru_cache(maxsize=FRAMES_KEPT)(_read)


def series(detail: SegmentDetail, index: str, entities: Sequence[str]) -> pa.Table:
    """The scalar series of ``entities`` on timeline ``index``: the index column, then one
    ``list<double>`` column per entity (``/entity:Scalars:scalars``), a row per time one of them
    has data, as ``reader()`` gives them."""
    if not entities:
        raise ValueError("name at least one entity whose series to read (entity=/path)")
    timeline = _timeline(detail, index)
    for entity in entities:
        _entity(detail, entity, "a series of scalars", is_series(detail.entities.get(entity, ())))
    return _read(detail.segment_id, _files(detail), timeline, _fields(detail, entities, {SCALAR}),
                 tuple(entities))


def frames(detail: SegmentDetail, index: str, entity: str) -> pa.Table:
    """The camera frames of ``entity`` on ``index``, read once while they are among the last
    ``FRAMES_KEPT`` asked for: the index column, the blob and media type columns, in time order."""
    timeline = _timeline(detail, index)
    _entity(detail, entity, "an image (frames come from entities with an EncodedImage blob)",
            is_camera(detail.entities.get(entity, ())))
    table = _read_kept(detail.segment_id, _files(detail), timeline,
                       _fields(detail, [entity], {BLOB, MEDIA_TYPE}), (entity,))
    return table.filter(pc.is_valid(table.column(f"{entity}:EncodedImage:blob")))


def frame_at(frames: pa.Table, entity: str, at: int) -> tuple[int, bytes, str]:
    """The frame shown at ``at`` (the last one at or before it, else the first): its time, its
    bytes and its media type (JPEG if the recording does not say)."""
    times = frames.column(0).cast(pa.int64()).to_numpy()
    row = max(0, int(np.searchsorted(times, at, side="right")) - 1)
    blob = frames.column(f"{entity}:EncodedImage:blob").slice(row, 1)
    while pa.types.is_list(blob.type) or pa.types.is_large_list(blob.type):
        blob = pc.list_flatten(blob)
    media = "image/jpeg"
    if f"{entity}:EncodedImage:media_type" in frames.column_names:
        found = pc.list_flatten(frames.column(f"{entity}:EncodedImage:media_type").slice(row, 1))
        media = found[0].as_py() if len(found) else media
    return int(times[row]), blob.to_numpy().tobytes(), media


def chart_x(index: pa.ChunkedArray) -> np.ndarray:
    """Index values as the plots' x axis has them: seconds for timestamps and durations (as a
    float, exact to a microsecond), others as they are."""
    if pa.types.is_timestamp(index.type) or pa.types.is_duration(index.type):
        return np.asarray(index.cast(pa.int64()).to_numpy(), dtype=np.float64) / 1e9
    return np.asarray(index.cast(pa.float64()).to_numpy(), dtype=np.float64)


def merged_rrd(dataset: str, detail: SegmentDetail) -> Path:
    """The segment's layers as one ``.rrd`` (``recordings.segment_rrd``), recording id the
    segment id, for Rerun's viewer."""
    return segment_rrd(_files(detail), dataset)
