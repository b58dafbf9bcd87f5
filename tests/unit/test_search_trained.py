"""A trained vector index: once a copy holds ``TRAIN_FROM_ROWS`` rows the follower trains an
IVF_SQ index with the seed's default parameters, and searches through it (the visited partitions
and the exact re-ranking ``search.query`` uses) find at least 95% of the exact top 10."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from events import CreateSearchIndex, DistanceMetric, SearchIndexKind
from projector import SearchIndex
from recordings.segments import SEGMENT_ID
from search import copies, query, training
from search.rows import INSTANCE, VALUE

DIMENSION = 64
QUERIES = 30


def clustered(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Embeddings around a few hundred centres, as a model's frames of similar scenes are."""
    centres = rng.standard_normal((300, DIMENSION)).astype(np.float32)
    noise = 0.35 * rng.standard_normal((rows, DIMENSION)).astype(np.float32)
    return centres[rng.integers(0, len(centres), rows)] + noise


def test_a_trained_index_finds_at_least_95_percent_of_the_exact_top_10(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = training.TRAIN_FROM_ROWS + 2_000
    vectors = clustered(rng, rows)
    definition = CreateSearchIndex("/camera", "embedding", "frame", SearchIndexKind.VECTOR,
                                   DistanceMetric.COSINE)
    index = SearchIndex(uuid.uuid4(), "/camera", "embedding", definition, 3, datetime.now(UTC))
    table = pa.table({SEGMENT_ID: [f"ep_{n // 100}" for n in range(rows)],
                      "frame": pa.array(np.arange(rows) % 100, pa.int64()),
                      INSTANCE: pa.array(np.zeros(rows), pa.uint32()),
                      VALUE: pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIMENSION)})
    url = copies.index_url(str(tmp_path), index)
    copies.write_rows(url, index, [], table, fresh=True)
    training.keep_trained(url, index, maintain=False)
    marker = copies.mark(url, index, table.schema, covered=4)
    copy = copies.open_dataset(url, marker.version)
    assert training.vector_index_name(copy) is not None  # trained, not searched exactly
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    found = 0
    for q in clustered(rng, QUERIES):
        exact = set(np.argsort(1 - unit @ (q / np.linalg.norm(q)), kind="stable")[:10])
        hits = query.search_vector(index, copy, q, 10)
        keys = zip(hits.column(SEGMENT_ID).to_pylist(), hits.column("frame").to_pylist(), strict=True)
        found += len(exact & {int(s.removeprefix("ep_")) * 100 + f for s, f in keys})
    assert found / (10 * QUERIES) >= 0.95
