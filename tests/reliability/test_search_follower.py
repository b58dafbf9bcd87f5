"""kill -9 of the projector while its follower builds an index: the copy it left half written is
never searched (it has no marker), and the projector that starts again builds the index whole,
every row once."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from search import copies
from search_episodes import EMBEDDING, TIMELINE, expected_rows, random_episode, write_episode
from settings import search_indexes
from stack import Server
from stack_tools import kill_projector, wait_until

EPISODES = 500


def test_a_build_killed_midway_ends_complete_with_nothing_twice(own_server: Server, tmp_path: Path) -> None:
    client = own_server.client()
    dataset = client.create_dataset("killed_build")
    rng = np.random.default_rng(4)
    episodes = [random_episode(rng, f"ep_{n:04d}", frames=4) for n in range(EPISODES)]
    dataset.register([write_episode(tmp_path, e) for e in episodes]).wait(timeout_secs=300)

    dataset.create_vector_index(column=EMBEDDING, time_index=TIMELINE)
    [index] = [i for i in client._internal.wait_for_store().search_indexes(dataset.id)]
    url = copies.index_url(search_indexes(client._internal.location), index)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the first rows written, the pass not yet marked
        found = copies.open_dataset(url)
        if found is not None and copies.newest_marker(found) is None:
            break
        time.sleep(0.005)
    else:
        raise AssertionError("the follower's build was never seen half done")
    kill_projector(own_server)
    half = copies.open_dataset(url)
    assert copies.newest_marker(half) is None and 0 < half.count_rows()

    own_server.start_projector()
    expected = expected_rows(episodes)[EMBEDDING]
    def built() -> bool:  # every row, and the pass marked (a pass under way is "building")
        [row] = pa.table(dataset.list_indexes()).to_pylist()
        return row["rows"] == len(expected) and row["search"] != "building"

    wait_until(built, 180, "the index to be built again")
    copy = copies.open_dataset(url, copies.newest_marker(copies.open_dataset(url)).version).to_table()
    columns = ("rerun_segment_id", TIMELINE, "rerun_instance_index")
    keys = list(zip(*(copy.column(c).to_pylist() for c in columns), strict=True))
    assert len(keys) == len(set(keys)) == len(expected)
    assert sorted(keys) == sorted((s, f, i) for s, f, i, _ in expected)
    assert pa.table(dataset.search_vector(np.ones(8), EMBEDDING, top_k=3)).num_rows == 3
