"""Search on the real stack: the index commands go through Kafka and the Spark projector, whose
process runs the follower that keeps the indexes' Lance copies; each search waits until its
index covers the client's own writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import sdk
from projector.stores import normalize
from search_episodes import (
    EMBEDDING,
    NARRATION,
    TIMELINE,
    Episode,
    expected_rows,
    random_episode,
    write_episode,
)
from stack import Server
from stack_tools import wait_until


def nearest(episodes: list[Episode], query: np.ndarray, k: int) -> list[tuple[str, int, int]]:
    """The exact cosine top ``k`` of the episodes' own embeddings."""
    scored = []
    for segment, frame, instance, value in expected_rows(episodes)[EMBEDDING]:
        v = np.asarray(value, np.float64)
        scored.append((1 - v @ query / (np.linalg.norm(v) * np.linalg.norm(query)), segment, frame, instance))
    return [s[1:] for s in sorted(scored)[:k]]


def test_searches_follow_registrations_through_the_projector(dataset: sdk.DatasetEntry,
                                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    episodes = [random_episode(rng, f"ep_{n}", frames=8, instruction=f"task {n}") for n in range(4)]
    dataset.register([write_episode(tmp_path, e) for e in episodes]).wait()
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, distance_metric="Cosine")
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE, store_position=True)

    query = rng.standard_normal(8)
    found = pa.table(dataset.search_vector(query, EMBEDDING, top_k=5)).to_pylist()
    assert [(r["rerun_segment_id"], r[TIMELINE], r["rerun_instance_index"]) for r in found] == \
        nearest(episodes, query, 5)
    texts = pa.table(dataset.search_fts("cup", NARRATION)).to_pylist()
    assert {(r["rerun_segment_id"], r[TIMELINE]) for r in texts} == {
        (s, f) for s, f, _, text in expected_rows(episodes)[NARRATION] if "cup" in str(text).split()}

    target = np.full(8, 7.0, np.float32)
    dataset.register(write_episode(tmp_path, Episode("ep_new", [target[None, :]]))).wait()
    [best] = pa.table(dataset.search_vector(target, EMBEDDING, top_k=1)).to_pylist()
    assert (best["rerun_segment_id"], best["_distance"]) == ("ep_new", pytest.approx(0.0, abs=1e-5))

    dataset.unregister(segments_to_drop=["ep_new"]).wait()
    everything = pa.table(dataset.search_vector(target, EMBEDDING, top_k=1000)).column("rerun_segment_id")
    assert set(everything.to_pylist()) == {e.segment_id for e in episodes}

    def listed() -> dict[str, dict]:  # the copies as the follower's passes leave them
        return {r["column"]: r for r in pa.table(dataset.list_indexes()).to_pylist()}

    rows = len(expected_rows(episodes)[EMBEDDING])
    wait_until(lambda: listed()[EMBEDDING]["rows"] == rows, 60, "the follower to remove ep_new's rows")
    assert (listed()[EMBEDDING]["search"], listed()[NARRATION]["search"]) == ("exact", "inverted")


def strata(server: Server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stack.cli", *args, "--store", normalize(server.store)],
                          capture_output=True, text=True, timeout=180)


def test_the_cli_creates_lists_searches_and_deletes_indexes(server: Server, dataset: sdk.DatasetEntry,
                                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    episodes = [random_episode(rng, f"cli_{n}", frames=5) for n in range(3)]
    dataset.register([write_episode(tmp_path, e) for e in episodes]).wait()
    kafka = ("--bootstrap-servers", server.bootstrap_servers)
    made = strata(server, "index", "create", dataset.name, NARRATION, "--timeline", TIMELINE, "--text",
                  *kafka)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[1].split()[:3] == [NARRATION, "full_text", TIMELINE]
    refused = strata(server, "index", "create", dataset.name, NARRATION, "--timeline", TIMELINE,
                     "--metric", "L2", *kafka)
    assert refused.returncode == 1 and "not fixed-size lists" in refused.stderr, refused.stderr
    vector = strata(server, "index", "create", dataset.name, EMBEDDING, "--timeline", TIMELINE, "--metric",
                    "L2", *kafka)
    assert vector.returncode == 0, vector.stderr

    listed = strata(server, "index", "list", dataset.name)
    assert [line.split()[:2] for line in listed.stdout.splitlines()[1:3]] == \
        [[EMBEDDING, "vector"], [NARRATION, "full_text"]]
    words = strata(server, "search", dataset.name, NARRATION, "cup")
    expected = {(s, f) for s, f, _, text in expected_rows(episodes)[NARRATION] if "cup" in str(text).split()}
    assert {(r.split()[0], int(r.split()[1])) for r in words.stdout.splitlines()[1:]} == expected
    like = strata(server, "search", dataset.name, EMBEDDING, "--like", "cli_1@2", "--top-k", "1")
    assert like.returncode == 0, like.stderr
    assert like.stdout.splitlines()[1].split()[:4] == ["cli_1", "2", "0", "0.0000"]

    gone = strata(server, "index", "delete", dataset.name, EMBEDDING, *kafka)
    assert gone.returncode == 0, gone.stderr
    missing = strata(server, "search", dataset.name, EMBEDDING, "--vector", "1,2")
    assert missing.returncode == 1 and "has no index on" in missing.stderr
