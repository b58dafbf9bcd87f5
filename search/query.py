"""Searching an index's copy once it reflects a client's writes: the nearest vectors or the best
full-text matches, best first.

A search opens the newest marked version of the copy (``search.copies``), so it reads the rows of
one complete pass of the follower. The client's writes are those before the log offset it needs.
If that pass covers them, or the change feed shows nothing that touched the index's rows since,
the copy answers alone. Otherwise a vector search does not wait for the follower. It leaves out
the copy's rows of the segments the feed shows changed since the pass (``Opened.pending``, at
most ``PENDING_SEGMENTS``) and compares their rows, read from their layers as the store has
them now, exactly. A full-text search waits for the follower's next pass, as BM25 scores
depend on the whole index.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from events import DistanceMetric, SearchIndexKind, import_extra
from projector import ProjectionReader, SearchIndex, schemas
from projector.search_indexes import find_column
from recordings.segments import SEGMENT_ID
from search import copies
from search.indexer import touched_segments
from search.rows import INSTANCE, VALUE
from search.training import METRICS, text_index_name, vector_index_name

DISTANCE = "_distance"
SCORE = "_score"
POLL_SECS = 0.01
NPROBES = 10
"""IVF partitions a trained search visits, and how many more candidates it ranks exactly
(``REFINE_FACTOR`` times ``top_k``, so the distances are exact): recall@10 of at least 0.95 on
768-float embeddings (``python -m bench.search``)."""
REFINE_FACTOR = 5
PENDING_SEGMENTS = 64
"""At most this many segments changed since the copy's pass are compared exactly by a vector
search; more wait for the follower."""


class SearchTimeoutError(TimeoutError):
    """The index did not reach the caller's writes in time."""


_opened: dict[str, tuple[tuple[int, str], copies.Marker, Any]] = {}
"""Per copy: the state of its newest version (``copies.version_state``) when it was last opened,
its newest marker then, and the copy opened at that marker. A Lance dataset keeps what it read of
its indexes in memory, so a search through the same object reads no index file again (an object
opened per search took 12 ms where this takes 4.6)."""


@functools.cache
def _session() -> Any:
    """The Lance session every copy this process searches is opened in: a copy opened again at a
    newer version (the follower's next pass) finds its trained index in memory (the first search
    of 100,080 trained rows in a new session took 92-101 ms, in a session that had read them 8)."""
    return copies.lance().Session()


def _marked(url: str) -> tuple[copies.Marker | None, Any]:
    """The newest marker of the copy at ``url`` and the copy opened at it (None, None if there is
    no copy; a marker and None if it has none)."""
    seen = _opened.get(url)
    if seen is not None and copies.version_state(seen[2]) == seen[0]:
        return seen[1], seen[2]
    found = copies.open_dataset(url, session=_session())
    state = None if found is None else copies.version_state(found, found.version)
    if found is None or state is None:
        _opened.pop(url, None)
        return None, None
    marker = copies.newest_marker(found)
    if marker is None:
        return None, None
    opened = found if marker.version == found.version else \
        copies.open_dataset(url, marker.version, _session())
    if opened is None:  # removed meanwhile
        return None, None
    _opened[url] = (state, marker, opened)
    return marker, opened


@dataclass(frozen=True)
class Opened:
    """A copy to search, and the segments whose rows it lacks or holds stale (compared exactly)."""

    copy: Any
    pending: tuple[str, ...] = ()


def open_copy(store: ProjectionReader, root: str, index: SearchIndex, needed: int,
              timeout_secs: float) -> Opened | None:
    """The copy of ``index`` at its newest marked version, once it reflects every record before
    log offset ``needed``, with the segments to compare exactly for a vector index (see the
    module); None if it has no copy because no segment has the column (the follower makes none).
    Raises ``SearchTimeoutError`` if it does not within ``timeout_secs``."""
    url = copies.index_url(root, index)
    deadline = time.monotonic() + timeout_secs
    limit = PENDING_SEGMENTS if index.definition.kind is SearchIndexKind.VECTOR else 0
    while True:
        marker, dataset = _marked(url)
        if dataset is None and not _has_column(store, index):
            return None
        if marker is not None and marker.created_offset == index.created_offset:
            if marker.covered >= needed:
                return Opened(dataset)
            pending = touched_segments(store, index.dataset_id, marker.covered, needed, limit)
            if pending is not None:
                return Opened(dataset, tuple(sorted(pending)))
        if time.monotonic() > deadline:
            where = "has no rows yet" if marker is None else f"covers the log up to offset {marker.covered}"
            raise SearchTimeoutError(
                f"the {index.definition.kind} index of {index.column} {where}, and the search needs "
                f"offset {needed}: is the projector running? Its follower keeps the indexes")
        time.sleep(POLL_SECS)


@dataclass(frozen=True)
class CopyState:
    """How far an index's copy has got: ``search`` is ``building`` (no complete pass of its
    definition yet; ``rows`` then counts what the pass under way has written), ``exact``,
    ``trained`` (vector) or ``inverted`` (full text)."""

    search: str
    rows: int | None
    covered: int | None


def copy_state(root: str, index: SearchIndex) -> CopyState:
    """The state of ``index``'s copy under ``root``."""
    url = copies.index_url(root, index)
    marker, dataset = _marked(url)
    if marker is None or dataset is None or marker.created_offset != index.created_offset:
        latest = copies.open_dataset(url)
        return CopyState("building", None if latest is None else latest.count_rows(), None)
    if index.definition.kind is SearchIndexKind.FULL_TEXT:
        how = "inverted" if text_index_name(dataset) else "building"
    else:
        how = "trained" if vector_index_name(dataset) else "exact"
    return CopyState(how, dataset.count_rows(), marker.covered)


def _has_column(store: ProjectionReader, index: SearchIndex) -> bool:
    dataset = store.dataset(index.dataset_id)
    return dataset is not None and bool(dataset.schema) and \
        find_column(schemas.parse(dataset.schema), index.entity_path, index.component) is not None


def empty_result(index: SearchIndex) -> pa.Table:
    """The answer of an index without a copy: no rows, in the result's columns."""
    value = pa.string() if index.definition.kind is SearchIndexKind.FULL_TEXT else pa.list_(pa.float32())
    measure = SCORE if index.definition.kind is SearchIndexKind.FULL_TEXT else DISTANCE
    return pa.schema([(SEGMENT_ID, pa.string()), (index.definition.time_index, pa.int64()),
                      (INSTANCE, pa.uint32()), (VALUE, value), (measure, pa.float32())]).empty_table()


def _where(segment_ids: Sequence[str] | None) -> str | None:
    if segment_ids is None:
        return None
    if not segment_ids:
        return "false"
    return copies.segment_filter(segment_ids)


def _query_vector(index: SearchIndex, dataset: Any, query: Any) -> np.ndarray:
    """``query`` as the copy's vector type; ``ValueError`` if it has the wrong length."""
    value_type = dataset.schema.field(VALUE).type
    size = value_type.list_size
    dtype = np.uint8 if index.definition.distance_metric is DistanceMetric.HAMMING else \
        value_type.value_type.to_pandas_dtype()
    vector = np.asarray(query, dtype=dtype)
    if vector.ndim != 1 or vector.shape[0] != size:
        raise ValueError(f"the query vector has shape {vector.shape}: the index of {index.column} takes "
                         f"vectors of {size} {'bytes' if dtype is np.uint8 else 'floats'}")
    return vector


def distances(metric: DistanceMetric, vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The distances of ``vectors`` (one per row) to ``query`` as Lance measures them: squared
    L2, 1 - cos, 1 - dot, or the bits that differ."""
    found: np.ndarray
    if metric is DistanceMetric.HAMMING:
        differing = np.bitwise_xor(vectors.astype(np.uint8), query.astype(np.uint8))
        found = np.unpackbits(differing, axis=1).sum(axis=1)
    else:
        v, q = vectors.astype(np.float32), query.astype(np.float32)
        if metric is DistanceMetric.L2:
            found = ((v - q) ** 2).sum(axis=1)
        elif metric is DistanceMetric.COSINE:
            found = 1 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
        else:
            found = 1 - v @ q
    return found.astype(np.float32)


def search_vector(index: SearchIndex, dataset: Any, query: Any, top_k: int,
                  segment_ids: Sequence[str] | None = None, pending: Sequence[str] = (),
                  pending_rows: pa.Table | None = None) -> pa.Table:
    """The ``top_k`` rows nearest ``query``, nearest first, with their ``_distance``: among the
    rows of ``segment_ids`` only, if given (the selection applied before the top k). The copy's
    rows of the ``pending`` segments are left out, and ``pending_rows`` (their rows now, in the
    copy's columns) compared exactly instead."""
    if index.definition.kind is not SearchIndexKind.VECTOR:
        raise ValueError(f"{index.column} has a full-text index: use search_fts")
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k={top_k!r}: give a number of rows, at least 1")
    nearest: dict[str, Any] = {"column": VALUE, "q": _query_vector(index, dataset, query), "k": top_k,
                               "metric": METRICS[index.definition.distance_metric]}
    if vector_index_name(dataset) is None:
        nearest["use_index"] = False
    else:
        nearest.update(nprobes=NPROBES, refine_factor=REFINE_FACTOR)
    where = " AND ".join(w for w in (_where(segment_ids), _excluding(pending)) if w) or None
    found = dataset.to_table(nearest=nearest, filter=where, prefilter=True)
    if pending_rows is not None and pending_rows.num_rows:
        rows = pending_rows if segment_ids is None else pending_rows.filter(
            pc.is_in(pending_rows.column(SEGMENT_ID), pa.array(list(segment_ids), pa.string())))
        vectors = np.stack(rows.column(VALUE).to_numpy(zero_copy_only=False)) if rows.num_rows else None
        if vectors is not None:
            measured = rows.append_column(DISTANCE, pa.array(
                distances(index.definition.distance_metric, vectors, nearest["q"]), pa.float32()))
            found = pa.concat_tables([found.select(measured.column_names), measured.cast(
                found.select(measured.column_names).schema)])
            order = np.argsort(found.column(DISTANCE).to_numpy(), kind="stable")[:top_k]
            found = found.take(order)
    return _result(found, DISTANCE)


def _excluding(segment_ids: Sequence[str]) -> str | None:
    if not segment_ids:
        return None
    return copies.segment_filter(segment_ids, leaving_out=True)


def search_text(index: SearchIndex, dataset: Any, query: str,
                segment_ids: Sequence[str] | None = None, limit: int | None = None) -> pa.Table:
    """The rows matching ``query`` (words, or a phrase in double quotes with ``store_position``),
    best BM25 ``_score`` first."""
    if index.definition.kind is not SearchIndexKind.FULL_TEXT:
        raise ValueError(f"{index.column} has a vector index: use search_vector")
    if not isinstance(query, str) or not query.strip():
        raise ValueError(f"query={query!r}: give the words to search for")
    query_types = import_extra("lance.query", "lance", "full-text search")
    MatchQuery, PhraseQuery = query_types.MatchQuery, query_types.PhraseQuery

    text = query.strip()
    phrase = len(text) > 1 and text.startswith('"') and text.endswith('"')
    if phrase and not index.definition.store_position:
        raise ValueError(f"a phrase search needs token positions: the index of {index.column} was created "
                         "without them; create it again with store_position=True")
    full_text = PhraseQuery(text[1:-1], VALUE) if phrase else MatchQuery(text, VALUE)
    found = dataset.to_table(full_text_query=full_text, filter=_where(segment_ids), prefilter=True,
                             limit=limit)
    found = found.take(np.argsort(-found.column(SCORE).to_numpy(), kind="stable"))
    return _result(found, SCORE)


def _result(found: pa.Table, measure: str) -> pa.Table:
    """The copy's columns in the result's order, best first as Lance gives them."""
    columns = [name for name in found.column_names if name not in (measure,)]
    ordered = [SEGMENT_ID, *[c for c in columns if c not in (SEGMENT_ID, INSTANCE, VALUE)], INSTANCE, VALUE,
               measure]
    return found.select(ordered)
