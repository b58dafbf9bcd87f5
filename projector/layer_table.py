"""A dataset's layers as one Arrow table, the input of its segment table and manifest.

The store keeps this table in chunks of ``CHUNK_SEGMENTS`` consecutive segment positions, each an
Arrow IPC stream rewritten in the transaction that changes one of its segments, so a reader gets
every layer of a dataset by concatenating blobs instead of converting its rows one by one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc

from events import IndexKind, IndexRange

CHUNK_SEGMENTS = 256
"""Segment positions per chunk: a one-record batch rewrites one chunk (the layers of up to this
many segments, about 5 ms at 3 layers each); a dataset of 100k segments is read as about 400 blobs."""

LAYER_COLUMNS = pa.schema([
    ("segment_id", pa.string()), ("layer_name", pa.string()), ("storage_url", pa.string()),
    ("size_bytes", pa.int64()), ("registered_at", pa.int64()), ("schema_sha256", pa.binary(32)),
    ("properties", pa.binary()), ("num_chunks", pa.int64()),
    ("index_ranges", pa.list_(pa.struct([("timeline", pa.string()), ("kind", pa.string()),
                                         ("start", pa.int64()), ("end", pa.int64())]))),
    ("properties_schema_sha256", pa.string()), ("properties_batch", pa.binary()),
    ("registered_offset", pa.int64()), ("position", pa.int64()),
])
"""One row per layer: segments in registration order, each segment's layers in registration order.
``registered_at`` is in microseconds since the epoch (UTC); ``schema_sha256`` is null when the
layer's schema is unknown; ``num_chunks`` is null and ``index_ranges`` empty for layers registered
before envelope v4. A layer's properties are either ``properties``, a one-row Arrow IPC stream
(registered before envelope v5), or ``properties_batch``, the row's record batch message
zlib-compressed, in the schema named by ``properties_schema_sha256`` (see
``projector.schemas.read_properties``); the other is empty, and both are when it has none.
``registered_offset`` is the log offset of the layer's registration, ``position`` its segment's:
what a reader of the catalog at an earlier point filters and orders by."""

HISTORY_COLUMNS = pa.schema([*LAYER_COLUMNS, ("valid_to", pa.int64()), ("event_id", pa.string()),
                             ("registered_topic", pa.string()), ("registered_partition", pa.int64())])
"""A replaced or removed layer as the store keeps it (``projector.stores.sql_history``): its row
of the layer table, the offset of the record that replaced or removed it, and the rest of its
``Layer``."""


_ORDER = [("position", "ascending"), ("registered_offset", "ascending")]


def at_offset(current: pa.Table, closed: pa.Table, offset: int) -> pa.Table:
    """The layer table as of ``offset``: the rows of ``current`` (a layer table, in its order)
    registered before it, with ``closed`` (rows of the same columns that were layers then) put in
    their places, in one ``take`` rather than a sort of the whole table."""
    kept = np.flatnonzero(current["registered_offset"].to_numpy() < offset)
    if not closed.num_rows:
        return current if len(kept) == current.num_rows else current.take(kept)
    closed = closed.select(LAYER_COLUMNS.names).sort_by(_ORDER)
    if offset >= 1 << 32:  # the keys below would not fit in 64 bits
        return pa.concat_tables([current.take(kept), closed]).sort_by(_ORDER)

    def keys(table: pa.Table, rows: Any = slice(None)) -> Any:
        return (table["position"].to_numpy()[rows] << 32) + table["registered_offset"].to_numpy()[rows]

    # Both are in (position, registered_offset) order: each closed row goes before the first kept
    # row with a greater key, shifted by the closed rows before it.
    at = np.searchsorted(keys(current, kept), keys(closed), side="right") + np.arange(closed.num_rows)
    order = np.empty(len(kept) + closed.num_rows, np.int64)
    placed = np.zeros(len(order), bool)
    placed[at] = True
    order[at] = current.num_rows + np.arange(closed.num_rows)
    order[~placed] = kept
    return pa.concat_tables([current, closed]).take(order)


def from_rows(rows: Sequence[tuple[Any, ...]], schema: pa.Schema = LAYER_COLUMNS) -> pa.Table:
    """The layer table of ``rows`` in ``schema``'s order (``LAYER_COLUMNS`` or
    ``HISTORY_COLUMNS``), ``schema_sha256`` as hex text (empty when unknown), ``index_ranges``
    as ``ranges_text``."""
    columns: list[Any] = ([list(column) for column in zip(*rows, strict=True)] if rows
                          else [[] for _ in schema])
    digests = schema.get_field_index("schema_sha256")
    columns[digests] = [bytes.fromhex(d) if d else None for d in columns[digests]]
    ranges = schema.get_field_index("index_ranges")
    columns[ranges] = _ranges_column(columns[ranges])
    return pa.Table.from_arrays(
        [pa.array(column, field.type) for column, field in zip(columns, schema, strict=True)], schema=schema)


_RANGE = LAYER_COLUMNS.field("index_ranges").type.value_type


def _ranges_column(texts: Sequence[str | None]) -> pa.Array:
    """The ``index_ranges`` column of rows holding their ranges as ``ranges_text`` (None: no
    ranges): the texts parsed as one JSON document, the ranges put into flat columns."""
    parsed = json.loads("[" + ",".join(text or "[]" for text in texts) + "]")
    offsets, flat = [0], []
    for row in parsed:
        flat += row
        offsets.append(len(flat))
    values = list(zip(*flat, strict=True)) if flat else [() for _ in _RANGE]
    struct = pa.StructArray.from_arrays(
        [pa.array(column, field.type) for column, field in zip(values, _RANGE, strict=True)],
        fields=list(_RANGE))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct)


def ranges_text(ranges: Sequence[IndexRange]) -> str:
    """Index ranges as the store keeps them in a row: compact JSON."""
    return _COMPACT_JSON.encode([[r.timeline, str(r.kind), r.start, r.end] for r in ranges])


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(..., separators=(",", ":"))``, without making an encoder per call (a batch writes
one text per layer)."""


def range_structs(ranges: Sequence[IndexRange]) -> list[dict[str, Any]]:
    """Index ranges as values of the ``index_ranges`` column."""
    return [{"timeline": r.timeline, "kind": str(r.kind), "start": r.start, "end": r.end} for r in ranges]


def ranges_from_text(text: str | None) -> tuple[IndexRange, ...]:
    return tuple(IndexRange(t, IndexKind(k), s, e) for t, k, s, e in json.loads(text or "[]"))


_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
"""A chunk's columns compress about 7x (storage URLs, schema digests, properties): LZ4 keeps
``segment_table()`` from moving 110 MB for 100,000 segments of 3 layers out of PostgreSQL, for
a fraction of a millisecond per chunk to decompress."""


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def from_ipc(blobs: Iterable[bytes], schema: pa.Schema = LAYER_COLUMNS) -> pa.Table:
    """The chunks' tables, concatenated in order."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    return pa.concat_tables(tables) if tables else schema.empty_table()
