"""Eight clients of strata's endpoint at once, Rerun's and strata's, each in a process of its own,
reading and writing: each gets what it gets when the clients run one at a time, and a write the
catalog refuses is reported to the client that made it and to no other."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from endpoints import endpoint
from stack import Server
from stack.droid import write_episode

CLIENTS = 8
EPISODES = 3

WORKLOAD = """
import json, sys
url, kind, name, shared = sys.argv[1:5]
files = sys.argv[5:]
if kind == "rerun":
    import rerun as rr
    client = rr.catalog.CatalogClient(url)
else:
    import sdk
    client = sdk.CatalogClient(url, workers=0)
dataset = client.create_dataset(name)
dataset.register(files[:2]).wait()
try:  # already there: refused (on_duplicate "error"), for this client alone
    dataset.register(files[:1]).wait()
    refused = None
except ValueError as exc:
    refused = str(exc)
dataset.register(files[2:]).wait()
others = client.get_dataset(shared)
table = dataset.segment_table().to_arrow_table().column("rerun_segment_id").to_pylist()
print(json.dumps({
    "segments": sorted(dataset.segment_ids()),
    "segment_table": sorted(table),
    "refused": refused,
    "listed": name in client.dataset_names(),
    "shared_segments": sorted(others.segment_ids()),
    "shared_rows": others.reader(index="real_time").to_arrow_table().num_rows,
}))
"""
"""One client's calls, on its own dataset ``name`` (``rerun``: Rerun's client; else strata's, made
from the endpoint's URL): two episodes registered, the first again (refused), the third; then its
reads, and reads of the dataset ``shared``. Prints what it got, as JSON."""


def _start(url: str, index: int, name: str, shared: str, files: list[str]) -> subprocess.Popen[str]:
    kind = "rerun" if index % 2 == 0 else "strata"
    return subprocess.Popen([sys.executable, "-c", WORKLOAD, url, kind, name, shared, *files],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    """Each client's episodes (recording ids ``c<client>_<n>``), and the shared dataset's (-1)."""
    directory = tmp_path_factory.mktemp("concurrency")
    files: dict[int, list[str]] = {}
    for client in [-1, *range(CLIENTS)]:
        files[client] = []
        for n in range(EPISODES):
            path = directory / f"c{client}_{n}.rrd"
            write_episode(path, f"c{client}_{n}", client * EPISODES + n + 100, steps=30)
            files[client].append(path.as_uri())
    return files


def test_eight_clients_at_once_get_what_each_gets_alone(server: Server, episodes) -> None:
    run = uuid.uuid4().hex[:8]
    shared = f"shared_{run}"
    server.client().create_dataset(shared).register(episodes[-1]).wait()
    with endpoint(server, writes=True) as url:
        running = [_start(url, i, f"together_{run}_{i}", shared, episodes[i]) for i in range(CLIENTS)]
        together = [_result(process) for process in running]
        alone = [_result(_start(url, i, f"alone_{run}_{i}", shared, episodes[i])) for i in range(CLIENTS)]

    assert together == alone
    shared_segments = sorted(Path(uri).stem for uri in episodes[-1])
    for index, got in enumerate(together):
        own = [f"c{index}_{n}" for n in range(EPISODES)]
        assert got["segments"] == got["segment_table"] == own
        assert got["listed"] and got["shared_segments"] == shared_segments and got["shared_rows"] > 0
        # Its own refusal, of its own segment, and no other client's.
        assert got["refused"] is not None and f"c{index}_0" in got["refused"]
        assert "already exists" in got["refused"]
        assert not any(f"c{other}_" in got["refused"] for other in range(CLIENTS) if other != index)
