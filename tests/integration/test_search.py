"""Search on the real stack: the index commands go through Kafka and the Spark projector, whose
process runs the follower that keeps the indexes' Lance copies; each search waits until its
index covers the client's own writes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import sdk
from postgres import EmbeddedPostgres
from projector.stores import normalize
from s3 import EmbeddedS3
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


def check_searches(dataset: sdk.DatasetEntry, episodes: list[Episode], query: np.ndarray, k: int
                   ) -> list[dict[str, Any]]:
    """The top ``k`` cosine rows of ``query`` are numpy's, and a search for "cup" finds the
    narrations that say it; returns those narration hits."""
    found = pa.table(dataset.search_vector(query, EMBEDDING, top_k=k)).to_pylist()
    assert [(r["rerun_segment_id"], r[TIMELINE], r["rerun_instance_index"]) for r in found] == \
        nearest(episodes, query, k)
    texts: list[dict[str, Any]] = pa.table(dataset.search_fts("cup", NARRATION)).to_pylist()
    assert {(r["rerun_segment_id"], r[TIMELINE]) for r in texts} == {
        (s, f) for s, f, _, text in expected_rows(episodes)[NARRATION] if "cup" in str(text).split()}
    return texts


def test_searches_follow_registrations_through_the_projector(dataset: sdk.DatasetEntry,
                                                            tmp_path: Path) -> None:
    rng = np.random.default_rng(21)
    episodes = [random_episode(rng, f"ep_{n}", frames=8, instruction=f"task {n}") for n in range(4)]
    dataset.register([write_episode(tmp_path, e) for e in episodes]).wait()
    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, distance_metric="Cosine")
    dataset.create_fts_index(column=NARRATION, time_index=TIMELINE, store_position=True)

    check_searches(dataset, episodes, rng.standard_normal(8), 5)

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


@pytest.mark.own_store
def test_a_postgresql_catalog_keeps_its_indexes_in_an_object_store(
        postgres: EmbeddedPostgres, s3: EmbeddedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s3.create_bucket("search-indexes")
    monkeypatch.setenv("STRATA_SEARCH_URL", "s3://search-indexes/team-a")
    for name, value in s3.environment().items():  # the projector inherits them, the client reads them
        monkeypatch.setenv(name, value)
    rng = np.random.default_rng(5)
    episodes = [random_episode(rng, f"s3_{n}", frames=6) for n in range(3)]
    with Server(tmp_path / "stack", store=postgres.create_database(), protocol_port=None) as server:
        dataset = server.client().create_dataset("searched-from-s3")
        dataset.register([write_episode(tmp_path, e) for e in episodes]).wait()
        dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE, distance_metric="Cosine")
        dataset.create_fts_index(column=NARRATION, time_index=TIMELINE)

        query = rng.standard_normal(8)
        texts = check_searches(dataset, episodes, query, 4)

        files = s3.filesystem()
        prefix = f"search-indexes/team-a/{uuid.UUID(int=dataset.id.int)}"
        copy = {column: f"{prefix}/{quote(column, safe='')}.lance" for column in (EMBEDDING, NARRATION)}
        assert {info.path for info in files.get_file_info(pafs.FileSelector(prefix))} == set(copy.values())

        dataset.unregister(segments_to_drop=["s3_0"]).wait()
        left = pa.table(dataset.search_vector(query, EMBEDDING, top_k=1000)).column("rerun_segment_id")
        assert set(left.to_pylist()) == {"s3_1", "s3_2"}

        wrong = {**os.environ, "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
        refused = subprocess.run([sys.executable, "-m", "stack.cli", "search", dataset.name, NARRATION, "cup",
                                  "--store", normalize(server.store)], env=wrong, capture_output=True,
                                 text=True, timeout=180)
        assert refused.returncode == 1 and "refused the credentials" in refused.stderr, refused.stderr
        assert "not-the-secret" not in refused.stderr

        dataset.delete_indexes(EMBEDDING)
        wait_until(lambda: not files.get_file_info(pafs.FileSelector(copy[EMBEDDING], allow_not_found=True)),
                   60, "the follower to remove the deleted index's copy")
        assert pa.table(dataset.search_fts("cup", NARRATION)).num_rows == len(texts) - sum(
            r["rerun_segment_id"] == "s3_0" for r in texts)
