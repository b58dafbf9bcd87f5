"""A Server on a directory that already holds a catalog answers reads, over Rerun's client and
strata's, before Kafka and Spark are up; a write made before the projector is up is taken once the
broker is up and visible once the projector has caught up, exactly once."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import rerun as rr

from stack import Server, processes
from stack_tools import wait_until


def reads(rerun_client: rr.catalog.CatalogClient, client) -> dict[str, object]:
    """What both clients answer about the catalog: names, and the dataset's segment table."""
    table = pa.table(rerun_client.get_dataset(name="startup").segment_table())
    return {"rerun names": sorted(rerun_client.dataset_names()),
            "strata names": sorted(client.dataset_names()),
            "rerun segments": sorted(table.column("rerun_segment_id").to_pylist()),
            "strata segments": client.get_dataset(name="startup").segment_ids()}


def held_projector(monkeypatch, gate: Path) -> None:
    """Servers started from here on start their projector only once ``gate`` exists: what a test
    does before is done before the projector is up, however fast it starts."""
    start = processes.start

    def start_held(args: list[str], log_path: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
        if "spark_streaming" in args:
            args = ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"', str(gate), *args]
        return start(args, log_path, **kwargs)

    monkeypatch.setattr(processes, "start", start_held)


def test_reads_come_before_the_projector_and_a_write_made_then_lands_once(tmp_path, make_rrd, new_store,
                                                                           monkeypatch) -> None:
    data_dir = tmp_path / "stack"
    store = new_store()
    uris = [make_rrd(f"startup_{i}") for i in range(3)]
    late = [make_rrd("startup_late_rerun"), make_rrd("startup_late_strata")]
    with Server(data_dir, store=store) as first:
        first.client().create_dataset("startup").register(uris).wait()

    gate = tmp_path / "the projector may start"
    held_projector(monkeypatch, gate)
    with Server(data_dir, store=store) as second:
        rerun_client = rr.catalog.CatalogClient(second.url())
        client = second.client()
        before = reads(rerun_client, client)
        # Those reads were answered while the projector was not yet running.
        with pytest.raises(TimeoutError):
            second.ready(timeout_secs=0)
        assert before["rerun segments"] == before["strata segments"] == [f"startup_{i}" for i in range(3)]

        # Writes made once the broker answers, before the projector is up, through both clients.
        assert second.broker is not None
        wait_until(lambda: processes.port_accepts(second.broker.port), 120, "the broker's port")
        task = rerun_client.get_dataset(name="startup").register([late[0]])
        operation = client.get_dataset(name="startup").register([late[1]])
        with pytest.raises(TimeoutError):
            second.ready(timeout_secs=0)

        gate.touch()
        second.ready(timeout_secs=240)
        task.wait(timeout_secs=120)
        operation.wait(timeout_secs=120)
        after = reads(rerun_client, client)
        expected = sorted([f"startup_{i}" for i in range(3)] + ["startup_late_rerun", "startup_late_strata"])
        assert after["rerun segments"] == after["strata segments"] == expected
        names = ("rerun names", "strata names")
        assert [after[n] for n in names] == [before[n] for n in names]
        layers = client.get_dataset(name="startup").manifest().to_arrow_table()
        assert layers.num_rows == 5  # each write once


def test_a_new_directory_returns_once_the_stack_runs(tmp_path, new_store) -> None:
    with Server(tmp_path / "stack", store=new_store(), protocol_port=None) as server:
        assert server.ready(timeout_secs=0) is server
