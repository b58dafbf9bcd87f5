"""The Lance indexes inside an index's copy: trained, optimised and cleaned up by the follower.

A full-text copy always has Lance's inverted index (BM25). A vector copy is searched exactly
(brute force, every row) until it holds ``TRAIN_FROM_ROWS`` rows; then an IVF_SQ index is trained:
inverted-file partitions of ``target_partition_num_rows`` rows (the seed's parameter), each
vector kept as one byte per dimension. Measured on 100,080 DROID-like 768-float embeddings
(``docs/performance.md``, Search): IVF_SQ trained in 2.1 s with recall@10 1.000, IVF_PQ (16
sub-vectors) in 69.6 s with recall@10 0.937, so strata trains IVF_SQ and keeps the seed's
``num_sub_vectors`` in the index's definition only. Rows appended after a training are searched
exactly beside the trained ones (Lance searches unindexed fragments by brute force) until
``do_maintenance`` optimises (adds them to the index) or retrains it, so nothing registered is
missed.
"""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

from events import DistanceMetric, SearchIndexKind
from projector import SearchIndex
from recordings.segments import SEGMENT_ID
from search import copies

TRAIN_FROM_ROWS = 20_000
"""Below this many rows a vector index is searched exactly: an exact top 10 of that many 768-float
vectors takes about as long as a trained search (``python -m bench.search``)."""
DEFAULT_PARTITION_ROWS = 4096
"""The seed's default ``target_partition_num_rows``."""
METRICS = {DistanceMetric.L2: "l2", DistanceMetric.COSINE: "cosine", DistanceMetric.DOT: "dot",
           DistanceMetric.HAMMING: "hamming"}
"""Lance's name of each metric."""
VALUE = "value"


def vector_index_name(dataset: Any) -> str | None:
    """The name of the trained vector index of a copy, None if it has none."""
    for found in dataset.describe_indices():
        if VALUE in found.field_names and found.index_type.startswith("IVF"):
            return str(found.name)
    return None


def segment_index_name(dataset: Any) -> str | None:
    """The name of the copy's index of segment ids (which a search narrowed to some segments, or
    leaving some out, filters by), None if it has none."""
    for found in dataset.describe_indices():
        if SEGMENT_ID in found.field_names:
            return str(found.name)
    return None


def text_index_name(dataset: Any) -> str | None:
    for found in dataset.describe_indices():
        if VALUE in found.field_names and found.index_type.upper() == "INVERTED":
            return str(found.name)
    return None


def partitions(index: SearchIndex, rows: int) -> int:
    """IVF partitions for ``rows`` rows: the definition's ``num_partitions``, else one per
    ``target_partition_num_rows`` (default 4096) rows."""
    definition = index.definition
    if definition.num_partitions is not None:
        return definition.num_partitions
    target = definition.target_partition_num_rows or DEFAULT_PARTITION_ROWS
    return max(1, math.ceil(rows / target))


def train_vector(dataset: Any, index: SearchIndex) -> None:
    dataset.create_index(VALUE, index_type="IVF_SQ", metric=METRICS[index.definition.distance_metric],
                         num_partitions=partitions(index, dataset.count_rows()), replace=True)


def index_text(dataset: Any, index: SearchIndex) -> None:
    definition = index.definition
    dataset.create_scalar_index(VALUE, index_type="INVERTED", replace=True,
                                with_position=definition.store_position,
                                base_tokenizer=definition.base_tokenizer, language="English",
                                stem=False, remove_stop_words=False, lower_case=True, ascii_folding=False)


def keep_trained(url: str, index: SearchIndex, *, maintain: bool) -> None:
    """Build what the copy at ``url`` lacks (its inverted index; its vector index once it is
    large enough), and, if ``maintain``, do the maintenance ``index.maintenance`` asks for."""
    dataset = copies.dataset(url)
    if segment_index_name(dataset) is None:
        dataset.create_scalar_index(SEGMENT_ID, index_type="BTREE")
    if index.definition.kind is SearchIndexKind.FULL_TEXT:
        if text_index_name(dataset) is None:
            index_text(dataset, index)
    elif vector_index_name(dataset) is None and dataset.count_rows() >= TRAIN_FROM_ROWS:
        train_vector(dataset, index)
    asked = index.maintenance
    if not maintain or asked is None:
        return
    dataset = copies.dataset(url)
    if asked.retrain_indexes:
        if index.definition.kind is SearchIndexKind.FULL_TEXT:
            index_text(dataset, index)
        elif dataset.count_rows() >= TRAIN_FROM_ROWS:
            train_vector(dataset, index)
    elif asked.optimize_indexes:
        dataset.optimize.optimize_indices()
    if asked.compact_fragments:
        dataset.optimize.compact_files()


def clean_up(url: str, index: SearchIndex) -> None:
    """Remove the copy's versions older than the maintenance's ``cleanup_before``: after the
    pass's marker, so that the version searches read is never one removed."""
    asked = index.maintenance
    if asked is None or asked.cleanup_before is None:
        return
    age = timedelta(seconds=max(0.0, time.time() - asked.cleanup_before.timestamp()))
    copies.dataset(url).cleanup_old_versions(older_than=age,
                                            delete_unverified=asked.unsafe_allow_recent_cleanup)
