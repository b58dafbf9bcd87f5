"""The search indexes' property: after any sequence of registrations, replacements,
unregistrations and index commands, each index's copy holds exactly the rows of the final
catalog (what the episodes it has registered hold, computed from the episodes themselves) and
equals a copy built from scratch; and a search right after a client's write sees that write."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import DistanceMetric
from profiles import examples
from search import copies
from search.indexer import Indexer
from search_episodes import (
    EMBEDDING,
    NARRATION,
    TIMELINE,
    Episode,
    expected_rows,
    random_episode,
    write_episode,
)
from settings import search_indexes

from .in_process import InProcessStack
from .test_search import IndexingProducer

SEGMENTS = ("ep_a", "ep_b", "ep_c")
VARIANTS = 2


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], tuple[Episode, str]]:
    """Each segment in a few variants (a replacement registers another), written once."""
    directory = tmp_path_factory.mktemp("pool")
    rng = np.random.default_rng(3)
    made = {}
    for segment in SEGMENTS:
        for variant in range(VARIANTS):
            episode = random_episode(rng, segment, frames=3)
            uri = write_episode(directory, episode, name=f"{segment}-{variant}")
            made[(segment, variant)] = (episode, uri)
    return made


register_ops = st.tuples(st.just("register"), st.sampled_from(SEGMENTS), st.integers(0, VARIANTS - 1),
                         st.sampled_from(["error", "skip", "replace"]))
unregister_ops = st.tuples(st.just("unregister"), st.sampled_from(SEGMENTS))
index_ops = st.tuples(st.just("index"), st.sampled_from([EMBEDDING, NARRATION]),
                      st.sampled_from([m.value for m in DistanceMetric if m is not DistanceMetric.HAMMING]))
delete_ops = st.tuples(st.just("delete"), st.sampled_from([EMBEDDING, NARRATION]))
operations = st.lists(st.one_of(register_ops, register_ops, unregister_ops, index_ops, delete_ops),
                      min_size=1, max_size=12)


def copy_rows(root: str, index: object) -> list[tuple]:
    """A copy's rows at its newest marker, sorted, as (segment, frame, instance, value); none if
    there is no copy (an index whose column no segment has had since it was created)."""
    url = copies.index_url(root, index)  # type: ignore[arg-type]
    found = copies.open_dataset(url)
    if found is None:
        return []
    marker = copies.newest_marker(found)
    assert marker is not None
    table = copies.open_dataset(url, marker.version).to_table()
    values = table.column("value").to_pylist()
    return sorted((s, f, i, tuple(v) if isinstance(v, list) else v) for s, f, i, v in zip(
        table.column("rerun_segment_id").to_pylist(), table.column(TIMELINE).to_pylist(),
        table.column("rerun_instance_index").to_pylist(), values, strict=True))


@settings(max_examples=examples(40))
@given(steps=operations)
def test_every_index_holds_the_final_catalogs_rows_and_sees_each_write(
        pool: dict[tuple[str, int], tuple[Episode, str]], steps: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as monkeypatch:
        stack = InProcessStack(Path(directory), monkeypatch)
        try:
            root = search_indexes(str(stack.projector.location))
            producer = IndexingProducer(stack.producer, Indexer(stack.projector, root))
            monkeypatch.setattr(stack.client._internal.log, "producer", producer)
            run(stack, pool, steps)
            store = stack.projector
            dataset_id = stack.dataset.id
            current = {s.segment_id for s in store.segments(dataset_id)}
            registered = {}
            for layer in store.layers(dataset_id):
                registered[layer.segment_id] = next(e for (seg, _), (e, uri) in pool.items()
                                                    if uri == layer.storage_url)
            assert set(registered) == current
            scratch = str(Path(directory) / "from-scratch")
            Indexer(store, scratch).sync()
            for index in store.search_indexes(dataset_id):
                kept = copy_rows(root, index)
                expected = sorted(expected_rows(list(registered.values()))[index.column])
                assert kept == [(s, f, i, pytest.approx(v) if isinstance(v, tuple) else v)
                                for s, f, i, v in expected]
                assert copy_rows(scratch, index) == kept
        finally:
            stack.close()


def run(stack: InProcessStack, pool: dict[tuple[str, int], tuple[Episode, str]], steps: list[tuple]) -> None:
    """Apply ``steps`` through the client; after each registration of a segment's embeddings with
    the vector index present, search for one of its vectors at once."""
    dataset = stack.dataset
    indexed: set[str] = set()
    for step in steps:
        if step[0] == "register":
            _, segment, variant, on_duplicate = step
            episode, uri = pool[(segment, variant)]
            accepted = True
            try:
                dataset.register(uri, on_duplicate=on_duplicate).wait()
            except ValueError:
                accepted = False  # a duplicate under "error": refused, nothing changes
            if accepted and on_duplicate != "skip" and EMBEDDING in indexed:
                target = episode.embeddings[0][0]
                [best] = pa.table(dataset.search_vector(target, EMBEDDING, top_k=1)).to_pylist()
                assert (best["rerun_segment_id"], best[TIMELINE]) == (segment, 0) or best["_distance"] == \
                    pytest.approx(0.0, abs=1e-4)
        elif step[0] == "unregister":
            dataset.unregister(segments_to_drop=[step[1]]).wait()
        elif step[0] == "index":
            _, column, metric = step
            if not dataset.segment_ids():
                continue  # a dataset without layers has no columns to index
            if column == EMBEDDING:
                dataset.create_vector_index(column=column, time_index=TIMELINE, distance_metric=metric)
            else:
                dataset.create_fts_index(column=column, time_index=TIMELINE)
            indexed.add(column)
        elif step[0] == "delete" and step[1] in indexed:  # also once the column's layers are gone
            dataset.delete_indexes(step[1])
            indexed.discard(step[1])
