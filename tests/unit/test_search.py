"""Search indexes on the in-process catalog: after each folded batch the indexes' follower runs
one pass (``search.indexer.Indexer.sync``), as the projector's follower does after each commit.
Exact searches are checked against numpy on the episodes' own values, full text against BM25
computed by hand."""

from __future__ import annotations

import math
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import sdk
from events import Event
from producers import Position
from search.indexer import Indexer
from search_episodes import (
    EMBEDDING,
    HASH,
    INSTRUCTION,
    NARRATION,
    TIMELINE,
    Episode,
    expected_rows,
    random_episode,
    write_episode,
)
from settings import search_indexes

from .in_process import FoldingProducer, InProcessStack


class IndexingProducer(FoldingProducer):
    """Folds each batch, then brings the search indexes up to date."""

    def __init__(self, inner: FoldingProducer, indexer: Indexer) -> None:
        super().__init__(inner.store, inner.next_offset)
        self.indexer = indexer
        self.paused = False
        """The follower does not run (it is behind): searches must not wait for it."""

    def send(self, events: Sequence[Event]) -> list[Position]:
        positions = super().send(events)
        if not self.paused:
            self.indexer.sync()
        return positions


@pytest.fixture
def searching(stack: InProcessStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessStack]:
    indexer = Indexer(stack.projector, search_indexes(str(stack.projector.location)))
    producer = IndexingProducer(stack.producer, indexer)
    stack.producer = producer
    monkeypatch.setattr(stack.client._internal.log, "producer", producer)
    monkeypatch.setattr(stack.catalog.log, "producer", producer)
    yield stack


def register(stack: InProcessStack, directory: Path, episodes: Sequence[Episode], **options: object) -> None:
    uris = [write_episode(directory, e, name=f"{e.segment_id}-{id(e)}") for e in episodes]
    stack.dataset.register(uris, **options).wait()


def rows_of(frame: object) -> list[dict]:
    return pa.table(frame).to_pylist()


def brute_force(episodes: Sequence[Episode], column: str, query: np.ndarray, metric: str) -> list[tuple]:
    """Every row of ``column`` with its distance to ``query`` as Lance defines the metric, nearest first
    (ties by segment, frame, instance)."""
    found = []
    for segment, frame, instance, value in expected_rows(episodes)[column]:
        v = np.asarray(value, dtype=np.float64)
        q = query.astype(np.float64)
        if metric == "L2":
            d = float(((v - q) ** 2).sum())
        elif metric == "Cosine":
            d = 1.0 - float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
        elif metric == "Dot":
            d = 1.0 - float(v @ q)
        else:
            d = float(np.unpackbits(np.asarray(value, np.uint8) ^ query.astype(np.uint8)).sum())
        found.append((d, segment, frame, instance))
    return sorted(found)


EPISODES = 5


@pytest.fixture
def episodes(searching: InProcessStack, tmp_path: Path) -> list[Episode]:
    rng = np.random.default_rng(7)
    made = [random_episode(rng, f"ep_{n}", instruction=f"put the cup number {n} in the sink")
            for n in range(EPISODES)]
    register(searching, tmp_path, made)
    return made


@pytest.mark.parametrize("metric", ["L2", "Cosine", "Dot", "Hamming"])
def test_an_exact_search_equals_numpy_on_the_same_rows(searching: InProcessStack, episodes: list[Episode],
                                                         metric: str) -> None:
    dataset = searching.dataset
    column = HASH if metric == "Hamming" else EMBEDDING
    dataset.create_vector_index(column=column, time_index=TIMELINE, distance_metric=metric)
    rng = np.random.default_rng(11)
    query = rng.integers(0, 256, 4, dtype=np.uint8) if metric == "Hamming" else \
        rng.standard_normal(8).astype(np.float32)
    expected = brute_force(episodes, column, query, metric)
    found = rows_of(dataset.search_vector(query, column, top_k=7))
    assert [r["_distance"] for r in found] == pytest.approx([e[0] for e in expected[:7]], rel=1e-4, abs=1e-4)
    if metric != "Hamming":  # Hamming distances tie: only their values are the same
        assert [(r["rerun_segment_id"], r[TIMELINE], r["rerun_instance_index"]) for r in found] == \
            [e[1:] for e in expected[:7]]
    assert list(found[0]) == ["rerun_segment_id", TIMELINE, "rerun_instance_index", column, "_distance"]
    listed = rows_of(dataset.list_indexes())
    assert [(r["column"], r["kind"], r["search"], r["rows"]) for r in listed] == \
        [(column, "vector", "exact", len(expected))]


def test_a_search_narrowed_to_a_selection_takes_its_top_k_among_those_segments(
        searching: InProcessStack, episodes: list[Episode]) -> None:
    dataset = searching.dataset
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE)
    query = np.full(8, 0.5, np.float32)
    chosen = ["ep_1", "ep_3"]
    expected = [e for e in brute_force(episodes, EMBEDDING, query, "L2") if e[1] in chosen][:5]
    found = rows_of(dataset.filter_segments(chosen).search_vector(query, EMBEDDING, top_k=5))
    assert [(r["rerun_segment_id"], r[TIMELINE], r["rerun_instance_index"]) for r in found] == \
        [e[1:] for e in expected]
    where = rows_of(dataset.search_vector(query, EMBEDDING, top_k=5,
                                          where="rerun_segment_id in ('ep_1', 'ep_3')"))
    assert where == found


def bm25(documents: list[list[str]], query: list[str]) -> list[float]:
    """Okapi BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))), by hand."""
    k1, b = 1.2, 0.75
    average = sum(len(d) for d in documents) / len(documents)
    scores = []
    for document in documents:
        score = 0.0
        for term in set(query):
            n = sum(term in d for d in documents)
            tf = document.count(term)
            if not tf:
                continue
            idf = math.log(1 + (len(documents) - n + 0.5) / (n + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(document) / average))
        scores.append(score)
    return scores


def test_full_text_ranks_by_bm25_computed_by_hand_and_finds_phrases(
        searching: InProcessStack, tmp_path: Path) -> None:
    corpus = ["pick up the red cup", "place the red cup in the sink", "The cup the cup the cup",
              "open the drawer", "put the cup red side up"]
    made = [Episode(f"doc_{n}", [np.zeros((1, 8), np.float32)], [text]) for n, text in enumerate(corpus)]
    register(searching, tmp_path, made)
    dataset = searching.dataset
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE, store_position=True)
    words = [text.lower().split() for text in corpus]
    expected = bm25(words, ["red", "cup"])
    found = rows_of(dataset.search_fts("red cup", NARRATION))
    ranked = sorted(((s, f"doc_{n}") for n, s in enumerate(expected) if s > 0), reverse=True)
    assert [r["rerun_segment_id"] for r in found] == [segment for _, segment in ranked]
    assert [r["_score"] for r in found] == pytest.approx([s for s, _ in ranked], rel=1e-4)
    assert list(found[0]) == ["rerun_segment_id", TIMELINE, "rerun_instance_index", NARRATION, "_score"]
    phrase = rows_of(dataset.search_fts('"red cup"', NARRATION))
    assert sorted(r["rerun_segment_id"] for r in phrase) == ["doc_0", "doc_1"]
    assert rows_of(dataset.search_fts("THE", NARRATION))  # lowercased, no stop words dropped


def test_a_static_instruction_is_found_once_per_episode_without_a_frame(
        searching: InProcessStack, episodes: list[Episode]) -> None:
    dataset = searching.dataset
    dataset.create_fts_index(column=INSTRUCTION, time_index=TIMELINE)
    found = rows_of(dataset.search_fts("number 3", INSTRUCTION))
    assert found[0]["rerun_segment_id"] == "ep_3"
    assert found[0][TIMELINE] is None
    assert sorted(r["rerun_segment_id"] for r in found) == [f"ep_{n}" for n in range(EPISODES)]


def test_a_search_right_after_a_write_sees_it_and_unregistered_or_replaced_rows_go(
        searching: InProcessStack, episodes: list[Episode], tmp_path: Path) -> None:
    dataset = searching.dataset
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE)
    target = np.full(8, 9.0, np.float32)
    newcomer = Episode("ep_new", [np.stack([target])])
    register(searching, tmp_path, [newcomer])
    [best] = rows_of(dataset.search_vector(target, EMBEDDING, top_k=1))
    assert (best["rerun_segment_id"], best["_distance"]) == ("ep_new", pytest.approx(0.0))
    replaced = Episode("ep_new", [np.stack([-target])])
    register(searching, tmp_path, [replaced], on_duplicate="replace")
    [best] = rows_of(dataset.search_vector(-target, EMBEDDING, top_k=1))
    assert (best["rerun_segment_id"], best["_distance"]) == ("ep_new", pytest.approx(0.0))
    assert rows_of(dataset.search_vector(target, EMBEDDING, top_k=1))[0]["_distance"] > 1.0
    dataset.unregister(segments_to_drop=["ep_new"]).wait()
    ids = {r["rerun_segment_id"] for r in rows_of(dataset.search_vector(-target, EMBEDDING, top_k=100))}
    assert "ep_new" not in ids and ids == {e.segment_id for e in episodes}


def test_removed_copies_are_rebuilt_equal_from_the_store_and_the_log(
        searching: InProcessStack, episodes: list[Episode]) -> None:
    dataset = searching.dataset
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, distance_metric="Cosine")
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE)
    query = np.linspace(-1, 1, 8).astype(np.float32)
    def both() -> tuple[list[dict], list[dict]]:
        return (rows_of(dataset.search_vector(query, EMBEDDING, top_k=20)),
                rows_of(dataset.search_fts("cup", NARRATION)))

    before = both()
    root = search_indexes(str(searching.projector.location))
    shutil.rmtree(root)
    Indexer(searching.projector, root).sync()
    assert both() == before


def test_refusals_say_what_was_wrong(searching: InProcessStack, episodes: list[Episode]) -> None:
    dataset = searching.dataset
    with pytest.raises(LookupError):
        dataset.create_vector_index(column="/camera:nothing", time_index=TIMELINE)
    with pytest.raises(ValueError, match="not fixed-size lists"):
        dataset.create_vector_index(column=NARRATION, time_index=TIMELINE)
    with pytest.raises(ValueError, match="not strings"):
        dataset.create_fts_index(column=EMBEDDING, time_index=TIMELINE)
    with pytest.raises(ValueError, match="no timeline 'wall_clock'"):
        dataset.create_vector_index(column=EMBEDDING, time_index="wall_clock")
    with pytest.raises(ValueError, match="target_partition_num_rows=0: give at least 1"):
        dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, target_partition_num_rows=0)
    with pytest.raises(ValueError, match="Hamming metric takes vectors of bytes"):
        dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, distance_metric="Hamming")
    with pytest.raises(sdk.NotFoundError, match="no search index"):
        dataset.search_vector(np.zeros(8), EMBEDDING, top_k=3)
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE)
    with pytest.raises(ValueError, match="takes vectors of 8 floats"):
        dataset.search_vector(np.zeros(5), EMBEDDING, top_k=3)
    with pytest.raises(ValueError, match="use search_vector"):
        dataset.search_fts("cup", EMBEDDING)
    dataset.delete_indexes(EMBEDDING)
    with pytest.raises(sdk.NotFoundError, match="no search index"):
        dataset.search_vector(np.zeros(8), EMBEDDING, top_k=3)
    with pytest.raises(sdk.NotFoundError):
        dataset.delete_indexes(EMBEDDING)
    assert rows_of(dataset.list_indexes()) == []
    assert not list(Path(search_indexes(str(searching.projector.location))).glob("*/*.lance"))


def test_a_deleted_datasets_indexes_and_their_copies_go(searching: InProcessStack,
                                                        episodes: list[Episode]) -> None:
    dataset = searching.dataset
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE)
    root = Path(search_indexes(str(searching.projector.location)))
    assert list(root.glob(f"{dataset.id}/*.lance"))
    dataset.delete()
    assert searching.projector.search_indexes(dataset.id) == []
    assert not (root / str(dataset.id)).exists()


@pytest.mark.parametrize("metric", ["L2", "Cosine", "Dot", "Hamming"])
def test_a_vector_search_does_not_wait_for_the_follower_it_compares_what_it_has_not_reached(
        searching: InProcessStack, episodes: list[Episode], tmp_path: Path, metric: str) -> None:
    dataset = searching.dataset
    column = HASH if metric == "Hamming" else EMBEDDING
    dataset.create_vector_index(column=column, time_index=TIMELINE, distance_metric=metric)
    assert isinstance(searching.producer, IndexingProducer)
    searching.producer.paused = True
    rng = np.random.default_rng(17)
    newcomer, replacement = random_episode(rng, "ep_new"), random_episode(rng, "ep_1")
    register(searching, tmp_path, [newcomer])
    register(searching, tmp_path, [replacement], on_duplicate="replace")
    dataset.unregister(segments_to_drop=["ep_2"]).wait()
    now = [e for e in episodes if e.segment_id not in ("ep_1", "ep_2")] + [replacement, newcomer]
    query = rng.integers(0, 256, 4, dtype=np.uint8) if metric == "Hamming" else \
        rng.standard_normal(8).astype(np.float32)
    found = rows_of(dataset.search_vector(query, column, top_k=12))
    expected = brute_force(now, column, query, metric)[:12]
    assert [r["_distance"] for r in found] == pytest.approx([e[0] for e in expected], rel=1e-4, abs=1e-4)
    if metric != "Hamming":
        assert [(r["rerun_segment_id"], r[TIMELINE], r["rerun_instance_index"]) for r in found] == \
            [e[1:] for e in expected]
    narrowed = rows_of(dataset.filter_segments(["ep_new", "ep_2"]).search_vector(query, column, top_k=50))
    assert {r["rerun_segment_id"] for r in narrowed} == {"ep_new"}
    [listed] = rows_of(dataset.list_indexes())
    assert listed["covered_offset"] < searching.producer.next_offset  # the follower did not run


def test_copies_of_another_catalog_under_the_same_root_are_left_alone(
        searching: InProcessStack, episodes: list[Episode]) -> None:
    dataset = searching.dataset
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE)
    root = Path(search_indexes(str(searching.projector.location)))
    foreign = root / str(uuid.uuid4()) / "%2Fother%3Acolumn.lance"
    foreign.mkdir(parents=True)
    dataset.delete_indexes(NARRATION)  # a pass that removes this catalog's copy
    assert foreign.is_dir()
    assert not (root / str(dataset.id)).exists()
