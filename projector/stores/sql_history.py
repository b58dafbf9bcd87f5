"""The projection's past in the SQL store: every version of the rows the catalog's reads are made
of, with the log offsets between which it was the row, so that the catalog "as of" an offset is
one predicate away.

A version opened by the record at offset ``valid_from`` and replaced or removed by the record at
``valid_to`` (null while it is the row) is part of the catalog as of ``k`` (the log prefix
``[0, k)``) when ``valid_from < k`` and ``valid_to`` is null or ``>= k``.

- Datasets, segments, asset scopes, table entries and tags are small rows: ``*_history`` holds every
  version, the current one included, and the current tables stay as they are for today's reads.
  A dataset's merged Arrow schema is kept once per distinct value in ``schemas`` and named by its
  digest, so its versions do not copy it. A registration versions its dataset and segment only
  when it changes more than the layers give back (``projector.derived``): a new segment, a new
  schema digest.
- Layers are the bulk of a catalog: the current ones stay in ``layers`` and the layer table's
  chunks (opened at their ``registered_offset``), and ``layer_history`` holds only the closed
  ones, as Arrow chunks of ``projector.layer_table.HISTORY_COLUMNS`` by the offset that closed
  them (``HISTORY_CHUNK_OFFSETS`` offsets per chunk, rows by offset, segment and layer). A reader
  at ``k`` takes the current layers registered before ``k`` and the closed ones of the chunks from
  ``k`` on, so the past costs one compressed row per replaced or removed layer, and a read near
  the present reads little of it.

Of several versions of one row made by one record, only the last is kept (the others were never
seen between records). The fold lists every version in log order (``Changes.history``); where a
batch ends never changes what is kept.

This module holds the rules of that past, with no statement of its own: which table keeps which
rows (``KEPT``), the intervals of a batch's versions (``spans``) and the condition of being part
of the catalog as of an offset (``visible``). The tables are defined in
``projector.stores.sql_schema``, a batch's versions are written by ``projector.stores.sql_commit``
and read back as of a point by ``projector.stores.sql_point``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from projector.model import Version, Versioned


class Kept(NamedTuple):
    """Where the versions of one kind of row go."""

    table: str
    key: tuple[str, ...]
    """The row's key columns (``Version.key``, as text)."""
    every_version: bool
    """``table`` holds every version; else only the closed ones, the current in ``current``."""
    current: str


KEPT = {
    Versioned.DATASET: Kept("dataset_history", ("id",), True, "datasets"),
    Versioned.SEGMENT: Kept("segment_history", ("dataset_id", "segment_id"), True, "segments"),
    Versioned.ASSET_SCOPE: Kept("asset_scope_history", ("dataset_id", "segment_id"), True, "asset_scopes"),
    Versioned.TABLE: Kept("table_history", ("id",), True, "tables"),
    Versioned.TAG: Kept("tag_history", ("dataset_id", "name"), True, "tags"),
    Versioned.LAYER: Kept("layer_history", ("dataset_id", "segment_id", "layer_name"), False, "layers"),
}
PURGED = (Versioned.SEGMENT, Versioned.LAYER, Versioned.ASSET_SCOPE, Versioned.TAG)
"""What a purge (a deleted dataset) removes: its rows of these kinds."""

HISTORY_CHUNK_OFFSETS = 4096
"""Closing offsets per chunk of ``layer_history``."""


class Span(NamedTuple):
    """A version with its interval: ``valid_to`` None while it is the row."""

    kind: Versioned
    key: tuple[Any, ...]
    row: Any
    valid_from: int
    valid_to: int | None


class Spans(NamedTuple):
    """What one batch's versions make of the history."""

    spans: list[Span]
    """Every version the batch opened, closed or not (in no particular order)."""
    first_touches: list[tuple[Versioned, tuple[Any, ...], int]]
    """Each row the batch changed, with the offset of its first change: where the version the
    store held before the batch ends."""
    purges: list[tuple[Any, int]]
    """(entry id, offset) of each purge: the store's versions of the entry's rows end there."""


def spans(history: Sequence[Version]) -> Spans:
    """The intervals of a batch's versions (``Changes.history``, in log order)."""
    last = {(v.kind, v.key, v.offset): i for i, v in enumerate(history)}
    opened: dict[tuple[Versioned, tuple[Any, ...]], tuple[Any, int]] = {}
    first: dict[tuple[Versioned, tuple[Any, ...]], int] = {}
    result: list[Span] = []
    purges: list[tuple[Any, int]] = []
    for i, version in enumerate(history):
        if version.kind is Versioned.PURGE:
            entry_id = version.key[0]
            for kind, key in [k for k in opened if k[0] in PURGED and k[1][0] == entry_id]:
                row, start = opened.pop((kind, key))
                result.append(Span(kind, key, row, start, version.offset))
            purges.append((entry_id, version.offset))
            continue
        if last[(version.kind, version.key, version.offset)] != i:
            continue  # the same record changed the row again
        at = (version.kind, version.key)
        first.setdefault(at, version.offset)
        if at in opened:
            row, start = opened.pop(at)
            result.append(Span(version.kind, version.key, row, start, version.offset))
        if version.row is not None:
            opened[at] = (version.row, version.offset)
    result += [Span(kind, key, row, start, None) for (kind, key), (row, start) in opened.items()]
    return Spans(result, [(kind, key, offset) for (kind, key), offset in first.items()], purges)


def visible(alias: str = "") -> str:
    """The condition that a version of a ``*_history`` table is part of the catalog as of the
    offset given twice as parameters."""
    prefix = f"{alias}." if alias else ""
    return f"{prefix}valid_from < ? and ({prefix}valid_to is null or {prefix}valid_to >= ?)"
