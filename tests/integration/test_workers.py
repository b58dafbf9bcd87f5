"""Reads and registrations on a client's worker processes, on the real stack: the same results
as in the client's own process, in the same order, and the faults a pool brings handled (a
worker killed mid-scan, a file removed between planning and reading, Ctrl-C, a client closed or
dropped). The differential tests against Rerun's server run on both (``reading_client``)."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import textwrap
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import sdk
from recordings import segments
from stack import Server
from stack.droid import write_episode
from worker_tools import alive, assert_interrupt_leaves_no_worker

pytestmark = pytest.mark.store_agnostic

EPISODES = 8
STEPS = 2_000
"""Long episodes: about 100 ms of reading each, so a scan lasts long enough to be interrupted."""
TIMEOUT_SECS = 60


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    directory = tmp_path_factory.mktemp("long-episodes")
    uris = []
    for index in range(EPISODES):
        path = directory / f"episode_{index}.rrd"
        write_episode(path, f"ep_{index}", index, steps=STEPS)
        uris.append(path.as_uri())
    return uris


@pytest.fixture(scope="module")
def droid(server: Server, episodes: list[str]) -> str:
    """The name of a dataset of the long episodes."""
    name = f"workers-{os.urandom(4).hex()}"
    server.client(workers=0).create_dataset(name).register(episodes).wait()
    return name


def _scan(client: sdk.CatalogClient, name: str) -> pa.Table:
    table = pa.table(client.get_dataset(name).reader(index="real_time"))
    return table.sort_by([("rerun_segment_id", "ascending"), ("real_time", "ascending")])


def _serving(client: sdk.CatalogClient, droid: str) -> list[int]:
    """Start the client's workers (a first scan may need only the one ready first, or none) and
    wait until both serve; their pids."""
    _scan(client, droid)
    workers = client._internal.workers
    deadline = time.monotonic() + TIMEOUT_SECS
    while len(workers.pids) < 2:
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    return workers.pids


def test_a_scan_on_workers_equals_a_scan_in_process(server: Server, droid: str) -> None:
    client = server.client(workers=2)
    _serving(client, droid)
    table = _scan(client, droid)
    assert table.equals(_scan(server.client(workers=0), droid))
    assert table.num_rows == EPISODES * STEPS


def test_one_segment_starts_no_worker(server: Server, droid: str) -> None:
    client = server.client(workers=2)
    table = pa.table(client.get_dataset(droid).filter_segments("ep_3").reader(index="real_time"))
    assert table.num_rows == STEPS
    assert client._internal.workers.pids == []


def test_registration_on_workers_keeps_the_order_of_the_uris(server: Server, droid: str,
                                                              episodes: list[str]) -> None:
    client = server.client(workers=2)
    _serving(client, droid)
    uris = list(reversed(episodes))
    dataset = client.create_dataset(f"order-{os.urandom(4).hex()}")
    result = dataset.register(uris, layer_name=[f"layer{i}" for i in range(len(uris))]).wait()
    expected = [f"ep_{index}" for index in reversed(range(EPISODES))]
    assert result.segment_ids == expected
    assert dataset.segment_ids() == expected  # registration (log) order
    manifest = pa.table(dataset.manifest())
    assert dict(zip(manifest.column("rerun_segment_id").to_pylist(),
                    manifest.column("rerun_layer_name").to_pylist(), strict=True)) == {
        f"ep_{index}": f"layer{position}" for position, index in enumerate(reversed(range(EPISODES)))}
    in_process = server.client(workers=0).create_dataset(f"order-{os.urandom(4).hex()}")
    in_process.register(uris).wait()
    assert dataset.arrow_schema().equals(in_process.arrow_schema(), check_metadata=True)


def test_a_worker_killed_mid_scan_is_replaced_and_the_scan_completes(server: Server, droid: str) -> None:
    client = server.client(workers=2)
    before = _serving(client, droid)
    expected = _scan(client, droid)
    workers = client._internal.workers
    killer = threading.Timer(0.15, os.kill, (before[0], signal.SIGKILL))
    killer.start()
    table = _scan(client, droid)
    killer.join()
    assert table.equals(expected)
    assert before[0] not in workers.pids and len(workers.pids) == 2  # replaced
    assert _scan(client, droid).equals(expected)  # and the next call works


def test_a_file_removed_before_it_is_read_is_named(server: Server, droid: str, episodes: list[str],
                                                   tmp_path: Path) -> None:
    """As in process: DataFusion, which runs the scan, carries the NotFoundError's text."""
    copies = []
    for index, uri in enumerate(episodes[:3]):
        copies.append(tmp_path / f"copy_{index}.rrd")
        shutil.copy(Path(uri.removeprefix("file://")), copies[-1])
    name = f"removed-{os.urandom(4).hex()}"
    server.client().create_dataset(name).register([p.as_uri() for p in copies]).wait()
    pooled, in_process = server.client(workers=2), server.client(workers=0)
    _serving(pooled, droid)
    readers = [c.get_dataset(name).reader(index="real_time") for c in (pooled, in_process)]
    copies[2].unlink()  # after planning, where every file was there
    messages = []
    for reader in readers:
        with pytest.raises(Exception, match=rf'NotFoundError: segment "ep_2", layer "base": the recording '
                                            rf"at {copies[2].as_uri()} no longer exists") as raised:
            pa.table(reader)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


def test_finished_scans_leave_nothing_behind(server: Server, droid: str) -> None:
    """Each scan's segment files are freed with its DataFrame: with the workers, the segments'
    shared memory with them."""
    client = server.client(workers=2)
    _serving(client, droid)
    for _ in range(3):
        _scan(client, droid)
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, segments._SegmentFiles)
                and o._workers is client._internal.workers]


def test_closing_or_dropping_a_client_stops_its_workers(server: Server, droid: str) -> None:
    client = sdk.CatalogClient(server.url(), workers=2)
    pids = _serving(client, droid)
    client.close()
    assert not any(alive(pid) for pid in pids)
    dropped = sdk.CatalogClient(server.url(), workers=2)
    pids = _serving(dropped, droid)
    del dropped
    gc.collect()
    assert not any(alive(pid) for pid in pids)


def test_ctrl_c_during_a_scan_stops_it_and_leaves_no_worker(server: Server, droid: str,
                                                            tmp_path: Path) -> None:
    script = tmp_path / "scan.py"
    script.write_text(textwrap.dedent(f"""
        import pyarrow as pa
        import sdk
        client = sdk.CatalogClient({server.url()!r}, workers=2)
        dataset = client.get_dataset({droid!r})
        while len(client._internal.workers.pids) < 2:  # until both workers serve
            pa.table(dataset.reader(index="real_time"))
        print(*client._internal.workers.pids, flush=True)
        while True:
            pa.table(dataset.reader(index="real_time"))
    """))
    assert_interrupt_leaves_no_worker(script, after_secs=0.3)  # mid-scan
