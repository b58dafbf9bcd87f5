"""A dataset's search indexes, once for every client: the writes that define them (decided by
the fold, ``projector.search_indexes``), their listing, and searches that wait until an index
covers the caller's own writes (``search.query``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from commands.catalog import DEFAULT_TIMEOUT_SECS, Catalog
from commands.log import Write
from events import (
    CATALOG_TOPIC,
    CreateSearchIndex,
    DeleteSearchIndexes,
    DistanceMetric,
    MaintainSearchIndexes,
    SearchIndexKind,
)
from projector import Dataset, SearchIndex
from recordings import NotFoundError
from search import query
from search.rows import VALUE, stored_rows
from search.training import TRAIN_FROM_ROWS
from settings import search_indexes as search_root

LIST_SCHEMA = pa.schema([
    ("column", pa.string()), ("entity_path", pa.string()), ("component", pa.string()),
    ("kind", pa.string()), ("time_index", pa.string()), ("distance_metric", pa.string()),
    ("rows", pa.int64()), ("search", pa.string()), ("covered_offset", pa.int64()),
    ("created_offset", pa.int64()), ("created_at", pa.timestamp("us", tz="UTC")), ("parameters", pa.string()),
])
"""``list_indexes()``: one row per index. ``search``: ``exact`` (every row compared, below
``TRAIN_FROM_ROWS`` rows), ``trained`` (an IVF_SQ index, rows since its training compared
exactly), ``inverted`` (full text, BM25) or ``building`` (no rows yet)."""


def _metric(value: object) -> DistanceMetric:
    text = str(getattr(value, "name", value))
    for metric in DistanceMetric:
        if text.lower() == metric.value.lower():
            return metric
    raise ValueError(f"distance_metric={value!r}: give one of "
                     f"{', '.join(repr(m.value) for m in DistanceMetric)}")


def create_vector_index(entity_path: str, component: str, time_index: str, *,
                        num_partitions: int | None, target_partition_num_rows: int | None,
                        num_sub_vectors: int, distance_metric: object) -> Write:
    """Index a column of embeddings; the fold refuses an unknown column or timeline, a column
    that is not one of fixed-size lists of floats, or parameters that do not fit it."""
    for name, value in (("num_partitions", num_partitions),
                        ("target_partition_num_rows", target_partition_num_rows)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{name}={value!r}: give a number, or None for the default")
    if not isinstance(num_sub_vectors, int) or isinstance(num_sub_vectors, bool):
        raise ValueError(f"num_sub_vectors={num_sub_vectors!r}: give a number")
    command = CreateSearchIndex(entity_path, component, time_index, SearchIndexKind.VECTOR,
                                _metric(distance_metric), num_partitions, target_partition_num_rows,
                                num_sub_vectors)
    return Write(f"creating a vector index on {entity_path}:{component}", (command,))


def create_fts_index(entity_path: str, component: str, time_index: str, *, store_position: bool,
                     base_tokenizer: str) -> Write:
    """Index a column of strings for full-text search (BM25)."""
    command = CreateSearchIndex(entity_path, component, time_index, SearchIndexKind.FULL_TEXT,
                                store_position=bool(store_position), base_tokenizer=str(base_tokenizer))
    return Write(f"creating a full-text index on {entity_path}:{component}", (command,))


def delete_indexes(entity_path: str, component: str) -> Write:
    command = DeleteSearchIndexes(entity_path, component)
    return Write(f"deleting the index of {entity_path}:{component}", (command,))


def maintain(*, optimize_indexes: bool, retrain_indexes: bool, compact_fragments: bool,
             cleanup_before: datetime | None, unsafe_allow_recent_cleanup: bool) -> Write:
    if cleanup_before is not None and cleanup_before.tzinfo is None:
        raise ValueError(f"cleanup_before={cleanup_before!r}: give a timezone-aware datetime")
    command = MaintainSearchIndexes(bool(optimize_indexes), bool(retrain_indexes), bool(compact_fragments),
                                    cleanup_before, bool(unsafe_allow_recent_cleanup))
    return Write("maintaining the search indexes", (command,))


def find_index(catalog: Catalog, dataset: Dataset, entity_path: str, component: str) -> SearchIndex:
    """The dataset's index of the column, once the projection has the caller's writes;
    ``NotFoundError`` if it has none."""
    indexes = catalog.wait_for_store().search_indexes(dataset.id)
    for index in indexes:
        if (index.entity_path, index.component) == (entity_path, component):
            return index
    listed = ", ".join(i.column for i in indexes) or "none"
    raise NotFoundError(f"dataset {dataset.name!r} has no search index on {entity_path}:{component} "
                        f"(its indexes: {listed}); create one with create_vector_index or create_fts_index")


def _copy(catalog: Catalog, index: SearchIndex, timeout_secs: float) -> query.Opened | None:
    """The index's copy, once it reflects every write made through ``catalog`` (see
    ``search.query``); None if it has none because no segment has the column."""
    written = catalog.log.horizon.written(CATALOG_TOPIC, 0)
    needed = 0 if written is None else written + 1
    return query.open_copy(catalog.projection, search_root(catalog.location), index, needed, timeout_secs)


def search_vector(catalog: Catalog, dataset: Dataset, entity_path: str, component: str, vector: Any,
                  top_k: int, segment_ids: Sequence[str] | None = None,
                  timeout_secs: float = DEFAULT_TIMEOUT_SECS) -> pa.Table:
    """The ``top_k`` nearest instances of the column, nearest first (``search.query``)."""
    index = find_index(catalog, dataset, entity_path, component)
    opened = _copy(catalog, index, timeout_secs)
    if opened is None:
        return _named(index, query.empty_result(index))
    pending_rows = None
    if opened.pending:  # segments the follower has not reached: their rows as the store has them
        pending_rows = stored_rows(catalog.projection, index, opened.copy.schema, opened.pending,
                                   catalog.object_store_config)
    return _named(index, query.search_vector(index, opened.copy, vector, top_k, segment_ids, opened.pending,
                                             pending_rows))


def search_text(catalog: Catalog, dataset: Dataset, entity_path: str, component: str, text: str,
                segment_ids: Sequence[str] | None = None, limit: int | None = None,
                timeout_secs: float = DEFAULT_TIMEOUT_SECS) -> pa.Table:
    """The instances of the column matching ``text``, best BM25 score first."""
    index = find_index(catalog, dataset, entity_path, component)
    opened = _copy(catalog, index, timeout_secs)
    if opened is None:
        return _named(index, query.empty_result(index))
    return _named(index, query.search_text(index, opened.copy, text, segment_ids, limit))


def _named(index: SearchIndex, found: pa.Table) -> pa.Table:
    """The value column under the indexed column's name."""
    return found.rename_columns([index.column if name == VALUE else name for name in found.column_names])


def list_indexes(catalog: Catalog, dataset: Dataset) -> pa.Table:
    """The dataset's indexes (``LIST_SCHEMA``), as far as their copies have got."""
    root = search_root(catalog.location)
    rows = []
    for index in catalog.wait_for_store().search_indexes(dataset.id):
        definition = index.definition
        state = query.copy_state(root, index)
        vector = definition.kind is SearchIndexKind.VECTOR
        parameters = ({"num_partitions": definition.num_partitions,
                       "target_partition_num_rows": definition.target_partition_num_rows,
                       "num_sub_vectors": definition.num_sub_vectors, "exact_below_rows": TRAIN_FROM_ROWS}
                      if vector else {"store_position": definition.store_position,
                                      "base_tokenizer": definition.base_tokenizer})
        rows.append({"column": index.column, "entity_path": index.entity_path, "component": index.component,
                     "kind": str(definition.kind), "time_index": definition.time_index,
                     "distance_metric": str(definition.distance_metric) if vector else None,
                     "rows": state.rows, "search": state.search, "covered_offset": state.covered,
                     "created_offset": index.created_offset, "created_at": index.created_at,
                     "parameters": ", ".join(f"{k}={v}" for k, v in parameters.items())})
    return pa.Table.from_pylist(rows, schema=LIST_SCHEMA)
