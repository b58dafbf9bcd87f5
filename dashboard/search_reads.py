"""The live page's searches: a dataset's full-text indexes searched for words, and its vector
indexes for the frames nearest a segment's frame, through the indexes' copies (``search.query``)
as the SDK searches them. Each hit says where Rerun's viewer opens it: the segment through the
catalog's gRPC-web endpoint at the hit's time (the URL of Rerun's ``segment_url(segment_id,
timeline, start)``), or the segment's merged ``.rrd`` without one."""

from __future__ import annotations

import urllib.parse
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from dashboard.segment import display
from projector import Dataset, ProjectionReader, SearchIndex
from recordings import SEGMENT_ID
from search import copies, query
from search.rows import INSTANCE, VALUE

TIMEOUT_SECS = 10.0
"""How long a search waits for an index's first complete pass."""


class SearchRequestError(ValueError):
    """A search the page asked for that cannot be made; the message says why."""


def indexes(store: ProjectionReader, root: str, dataset: Dataset) -> list[dict[str, Any]]:
    """The dataset's indexes as the page lists them."""
    found = []
    for index in store.search_indexes(dataset.id):
        state = query.copy_state(root, index)
        found.append({"column": index.column, "kind": str(index.definition.kind),
                      "time_index": index.definition.time_index, "rows": state.rows, "search": state.search,
                      "phrases": index.definition.store_position})
    return found


def _index(store: ProjectionReader, dataset: Dataset, column: str, kind: str) -> SearchIndex:
    for index in store.search_indexes(dataset.id):
        if index.column == column and str(index.definition.kind) == kind:
            return index
    listed = ", ".join(i.column for i in store.search_indexes(dataset.id) if str(i.definition.kind) == kind)
    raise SearchRequestError(f"dataset {dataset.name!r} has no {kind} index on {column!r} "
                             f"(its {kind} indexes: {listed or 'none'})")


def viewer_source(dataset: Dataset, segment_id: str, timeline: str, at: int | None,
                  catalog_url: str | None) -> str:
    """What Rerun's viewer opens for a hit: the segment through the catalog at ``at`` on
    ``timeline``, or (without a catalog) the segment's merged ``.rrd``, a path of this page's host."""
    segment = urllib.parse.quote(segment_id, safe="")
    if catalog_url is None:
        return f"/api/datasets/{urllib.parse.quote(dataset.name, safe='')}/segments/{segment}/recording.rrd"
    url = f"{catalog_url}/dataset/{dataset.id.hex}?segment_id={segment}"
    return url if at is None else f"{url}#when={urllib.parse.quote(timeline, safe='')}@{at}"


def _as_int(value: Any) -> int | None:
    """A timeline's value as Rerun's URLs give it: nanoseconds for times and durations."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(pa.scalar(value, pa.timestamp("ns", tz="UTC")).cast(pa.int64()).as_py())
    if isinstance(value, timedelta):
        return int(pa.scalar(value, pa.duration("ns")).cast(pa.int64()).as_py())
    return int(value)


def _hits(found: pa.Table, index: SearchIndex, dataset: Dataset, measure: str,
          catalog_url: str | None) -> list[dict[str, Any]]:
    timeline = index.definition.time_index
    field = found.schema.field(timeline)
    hits = []
    for row in found.to_pylist():
        at = _as_int(row[timeline])
        value = row[VALUE]
        # The time as text: nanoseconds since 1970 are past what a JavaScript number holds exactly.
        hits.append({"segment": row[SEGMENT_ID], "time": None if at is None else str(at),
                     "time_text": display(field, row[timeline]),
                     "instance": row[INSTANCE], "text": value if isinstance(value, str) else None,
                     measure.strip("_"): row[measure],
                     "viewer_source": viewer_source(dataset, row[SEGMENT_ID], timeline, at, catalog_url)})
    return hits


def text_search(store: ProjectionReader, root: str, dataset: Dataset, column: str, words: str, limit: int,
                catalog_url: str | None) -> list[dict[str, Any]]:
    """The best ``limit`` matches of ``words`` in the full-text index of ``column``."""
    index = _index(store, dataset, column, "full_text")
    opened = query.open_copy(store, root, index, 0, TIMEOUT_SECS)
    if opened is None:
        return []
    found = query.search_text(index, opened.copy, words, None, limit)
    return _hits(found, index, dataset, query.SCORE, catalog_url)


def nearest_frames(store: ProjectionReader, root: str, dataset: Dataset, segment_id: str, column: str,
                   timeline: str, at: int, k: int, catalog_url: str | None) -> list[dict[str, Any]]:
    """The ``k`` rows of the vector index of ``column`` nearest the segment's vector shown at
    ``at`` on ``timeline`` (its last row at or before ``at``), the segment's own included."""
    index = _index(store, dataset, column, "vector")
    if index.definition.time_index != timeline:
        raise SearchRequestError(f"the index of {column} is on timeline {index.definition.time_index!r}: "
                                 f"choose that timeline to search from a frame")
    opened = query.open_copy(store, root, index, 0, TIMEOUT_SECS)
    copy = None if opened is None else opened.copy
    own = None if copy is None else copy.to_table(filter=copies.segment_filter([segment_id]))
    if own is None or not own.num_rows:
        raise SearchRequestError(f"segment {segment_id!r} has no {column} in the index")
    times = own.column(timeline).cast(pa.int64()).to_numpy(zero_copy_only=False)
    order = np.argsort(times, kind="stable")
    before = order[times[order] <= at]
    row = int(before[-1] if len(before) else order[0])
    vector = own.column(VALUE)[row].as_py()
    found = query.search_vector(index, copy, np.asarray(vector), k)
    return _hits(found, index, dataset, query.DISTANCE, catalog_url)


