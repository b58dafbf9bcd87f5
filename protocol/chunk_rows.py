"""The rows of Rerun's two-step query, built from layers' chunk indexes with Arrow compute: the
candidate chunks of a ``FindChunks`` or ``QueryDataset`` request (one row per chunk that may hold
data the query needs: a superset, as Rerun's client resolves latest-at and ranges itself), and a
segment's ``RrdManifest`` rows (every layer's chunk index, merged).

A ``Selection`` says what a request asks for; it prunes by entity path, static or temporal, and,
on a timeline, by each chunk's first and last value there. Components are not pruned: a chunk
holding a wanted entity is a candidate whatever components it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from protocol.chunk_keys import CHUNK_KEY, LayerRef

CONTROL = {"rerun:kind": "control"}
CANDIDATE_FIELDS = [
    pa.field("chunk_id", pa.binary(16), nullable=False, metadata=CONTROL),
    pa.field("chunk_segment_id", pa.string(), nullable=False, metadata=CONTROL),
    pa.field("rerun_segment_layer", pa.string(), nullable=False),
    pa.field(CHUNK_KEY, pa.binary(), nullable=False),
    pa.field("chunk_entity_path", pa.string(), nullable=False, metadata=CONTROL),
    pa.field("chunk_is_static", pa.bool_(), nullable=False, metadata=CONTROL),
    pa.field("chunk_byte_len", pa.uint64(), nullable=False),
    pa.field("chunk_byte_size_uncompressed", pa.uint64()),
]
"""The columns of a candidate chunk, as Rerun's server has them."""
DIRECT_URL_FIELDS = [
    pa.field("rerun_layer_direct_url", pa.dictionary(pa.int32(), pa.string())),
    pa.field("rerun_layer_direct_url_expires_at", pa.dictionary(pa.int32(), pa.int64())),
]
"""Where a client may fetch a chunk's bytes itself, and until when: the layer's direct URL
(``protocol.direct``) when the query asks for one, else null, so the client asks ``FetchChunks``.
The expiry is left null: the URL's own, checked by the server, is at least half an hour away."""
FIND_CHUNKS_TIMELINE = pa.field("chunk_timeline_start", pa.int64(), metadata={"rerun:kind": "index"})
"""``FindChunks``'s column of each chunk's first value on the queried timeline."""
_SOURCE_COLUMNS = {"chunk_id": "chunk_id", "chunk_entity_path": "chunk_entity_path",
                   "chunk_is_static": "chunk_is_static", "chunk_byte_len": "chunk_byte_size",
                   "chunk_byte_size_uncompressed": "chunk_byte_size_uncompressed", CHUNK_KEY: CHUNK_KEY}
"""Each candidate column taken from the chunk index, and its column there."""


def query_dataset_timeline(timeline: str) -> pa.Field:
    """``QueryDataset``'s column of each chunk's first value on ``timeline``."""
    return pa.field(f"{timeline}:start", pa.int64(), metadata={
        "rerun:index": timeline, "rerun:index_marker": "start", "rerun:kind": "index"})


@dataclass(frozen=True)
class Selection:
    """The chunks a request may need. ``start`` and ``end`` bound a temporal chunk's values on
    ``timeline`` (inclusive; None: unbounded); without a timeline, every temporal chunk is a
    candidate."""

    entities: frozenset[str] | None = None
    """The entity paths asked for; None for every one."""
    static: bool = True
    temporal: bool = True
    timeline: str | None = None
    start: int | None = None
    end: int | None = None


def _int64(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A timeline's values as Rerun's wire has them: int64 (nanoseconds for times)."""
    if pa.types.is_timestamp(column.type) or pa.types.is_duration(column.type):
        column = column.cast(pa.int64())
    return column.cast(pa.int64())


def selected(chunks: pa.Table, selection: Selection) -> pa.Table:
    """The rows of a layer's chunk index that ``selection`` may need."""
    static = chunks.column("chunk_is_static")
    none = pc.and_kleene(static, pa.scalar(False))
    keep_static = static if selection.static else none
    temporal = pc.invert(static)
    if not selection.temporal:
        keep_temporal = none
    elif selection.timeline is None:
        keep_temporal = temporal
    elif f"{selection.timeline}:start" not in chunks.column_names:
        keep_temporal = none  # no data on the timeline in this layer
    else:
        starts = _int64(chunks.column(f"{selection.timeline}:start"))
        ends = _int64(chunks.column(f"{selection.timeline}:end"))
        keep_temporal = pc.and_kleene(temporal, pc.is_valid(starts))
        if selection.start is not None:
            keep_temporal = pc.and_kleene(keep_temporal, pc.greater_equal(ends, selection.start))
        if selection.end is not None:
            keep_temporal = pc.and_kleene(keep_temporal, pc.less_equal(starts, selection.end))
    keep = pc.or_kleene(keep_static, keep_temporal)
    if selection.entities is not None:
        paths = pa.array(sorted(selection.entities), pa.string())
        keep = pc.and_kleene(keep, pc.is_in(chunks.column("chunk_entity_path"), value_set=paths))
    return chunks.filter(pc.fill_null(keep, False))


def layer_rows(layer: LayerRef, chunks: pa.Table) -> pa.Table:
    """A layer's chunks as candidate rows (``CANDIDATE_FIELDS``), followed by each timeline's
    first and last values (``<timeline>:start``, ``<timeline>:end``, int64): what a query of the
    layer selects from, made once per layer."""
    count = chunks.num_rows
    columns: list[pa.Array | pa.ChunkedArray] = []
    for field in CANDIDATE_FIELDS:
        if field.name == "chunk_segment_id":
            columns.append(pa.array([layer.segment_id] * count, pa.string()))
        elif field.name == "rerun_segment_layer":
            columns.append(pa.array([layer.layer_name] * count, pa.string()))
        else:
            columns.append(chunks.column(_SOURCE_COLUMNS[field.name]).cast(field.type))
    fields = list(CANDIDATE_FIELDS)
    for field in chunks.schema:
        metadata = field.metadata or {}
        timeline = metadata.get(b"rerun:index", b"").decode()
        if field.name in (f"{timeline}:start", f"{timeline}:end") and b"rerun:component" not in metadata:
            fields.append(pa.field(field.name, pa.int64()))
            columns.append(_int64(chunks.column(field.name)))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def candidates(layers: Sequence[pa.Table], selection: Selection, timeline_field: pa.Field | None) -> pa.Table:
    """The candidate chunks of ``layers`` (each layer's ``layer_rows``, with its direct URL
    columns if it has them), in Rerun's columns; with ``timeline_field``, last, each chunk's first
    value on the selection's timeline (null for a static chunk). The layers are put together
    first and selected from at once."""
    bounds = [f"{selection.timeline}:start", f"{selection.timeline}:end"] if selection.timeline else []
    work = pa.schema([*CANDIDATE_FIELDS, *DIRECT_URL_FIELDS,
                      *(pa.field(name, pa.int64()) for name in bounds)])
    if layers:  # a column some layers lack is null for their chunks
        merged = pa.concat_tables(layers, promote_options="permissive")
        present = set(merged.column_names)
        merged = pa.Table.from_arrays(
            [merged.column(field.name) if field.name in present else pa.nulls(merged.num_rows, field.type)
             for field in work], schema=work)
        chosen = selected(merged.unify_dictionaries().combine_chunks(), selection)
    else:
        chosen = work.empty_table()
    chosen = chosen.unify_dictionaries()  # one dictionary of URLs on the wire
    count = chosen.num_rows
    fields = [*CANDIDATE_FIELDS, *DIRECT_URL_FIELDS] + ([timeline_field] if timeline_field else [])
    columns = [chosen.column(field.name) for field in [*CANDIDATE_FIELDS, *DIRECT_URL_FIELDS]]
    if timeline_field is not None:
        starts = chosen.column(bounds[0]) if bounds else pa.nulls(count, pa.int64())
        columns.append(pc.if_else(chosen.column("chunk_is_static"), pa.scalar(None, pa.int64()), starts))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


STATIC_FLAG = ":has_static_data"
ROW_COUNT = ":num_rows"


def manifest(layers: Sequence[pa.Table]) -> pa.Table:
    """A segment's ``RrdManifest`` rows: each layer's chunk index (with its ``chunk_key``), one
    after the other. Columns a layer lacks are null for its chunks, but a component's
    ``:has_static_data`` (false) and a timeline's ``:num_rows`` (0) say what the layer holds."""
    if len(layers) == 1:
        return layers[0]
    merged = pa.concat_tables(layers, promote_options="permissive")
    for number, field in enumerate(merged.schema):
        if field.name.endswith(STATIC_FLAG) or field.name.endswith(ROW_COUNT):
            filler = pa.scalar(False) if field.name.endswith(STATIC_FLAG) else pa.scalar(0, field.type)
            column = merged.column(number)
            if column.null_count:
                merged = merged.set_column(number, field, pc.fill_null(column, filler))
    return merged
