"""Bulk writes that return at the Kafka ack, with the projector stopped, killed or late: the writes
return while nothing projects and the next read waits for them; a write refused after its ack
raises from the next read, ``flush()`` or ``close()``, once; kill -9 of the projector with 1,000
writes outstanding loses none and applies none twice; a client killed after its acks loses
nothing."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import sdk
from producers import end_offsets
from projector import Status
from stack import Server
from stack_tools import (
    assert_whole_log_applied_once,
    kill_projector,
    returns_within,
    wait_caught_up,
    wait_until,
)
from stores import store_offsets

INDEX = {b"rerun:is_table_index": b"true"}
KEYED = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata=INDEX), pa.field("value", pa.int64())])


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def projector_stopped(server: Server) -> Iterator[None]:
    """The stack's projector stopped for the block, started again after it (in this thread: a
    child started from another thread dies with that thread)."""
    server.stop_projector()
    try:
        yield
    finally:
        server.start_projector()


class InBackground(threading.Thread):
    """``call()`` in a thread of its own, its result or error kept for ``outcome()``."""

    def __init__(self, call: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # raised again by outcome()
            self.error = exc

    def outcome(self, timeout_secs: float = 120) -> object:
        self.join(timeout_secs)
        assert not self.is_alive(), f"{self.call} did not return within {timeout_secs} s"
        if self.error is not None:
            raise self.error
        return self.result


def log_grew(server: Server, before: dict) -> bool:
    return sum(end_offsets(server.bootstrap_servers).values()) > sum(before.values())


def test_writes_return_while_nothing_projects_and_the_next_read_waits_for_them(
        server: Server, client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    name = unique("pipelined")
    table = client.create_table(name, KEYED)
    uri = make_rrd("while_stopped")
    other = server.client()
    with projector_stopped(server):
        table.append(id=[1, 2], value=[1, 2])  # each returns: Kafka has it
        table.upsert(id=[2], value=[20])
        registration = dataset.register([uri])
        with pytest.raises(sdk.ProjectionTimeoutError):
            client.flush(timeout_secs=1)
        # Another client has no writes of its own to wait for: it reads at once, without them.
        assert other.get_table(name).reader().count() == 0
        # These reads start while nothing projects, and wait for the projector started below.
        rows = InBackground(lambda: table.reader().to_arrow_table().to_pylist())
        segments = InBackground(dataset.segment_ids)
        rows.start()
        segments.start()
    assert rows.outcome() == [{"id": 1, "value": 1}, {"id": 2, "value": 20}]
    assert segments.outcome() == ["while_stopped"]
    assert registration.wait().segment_ids == ["while_stopped"]
    assert client.flush() == []


@pytest.mark.store_agnostic  # the client's ledger of writes
@pytest.mark.parametrize("settled_by", ["read", "flush", "close"])
def test_a_write_refused_after_its_ack_raises_once_from_the_next_read_flush_or_close(
        server: Server, settled_by: str) -> None:
    writer = server.client()
    doomed_name, kept_name = unique("doomed"), unique("kept")
    doomed = writer.create_table(doomed_name, KEYED)
    kept = writer.create_table(kept_name, KEYED)
    deleter = server.client()
    with projector_stopped(server):
        # The delete goes into the log first and waits; the writer, whose view still has the
        # table, appends after it: the fold refuses the append.
        before = end_offsets(server.bootstrap_servers)
        deleting = InBackground(deleter.get_table(doomed_name).delete)
        deleting.start()
        wait_until(lambda: log_grew(server, before), 30, "the delete to reach the log")
        doomed.append(id=[1], value=[1])
        kept.append(id=[7], value=[7])
        settle = {"read": writer.tables, "flush": writer.flush, "close": writer.close}[settled_by]
        settling = InBackground(settle)
        settling.start()
    deleting.outcome()
    with pytest.raises(sdk.WriteRefusedError) as raised:
        settling.outcome()
    [refused] = raised.value.refused
    assert refused.status is Status.NOT_FOUND
    assert refused.what == f"append of 1 row to table {doomed_name!r}"
    assert doomed_name in str(raised.value) and "deleted" in str(raised.value)
    kept_write = f"append of 1 row to table {kept_name!r}"
    assert [o.what for o in raised.value.outcomes] == [refused.what, kept_write]
    assert raised.value.outcomes[1].accepted
    if settled_by != "close":
        assert writer.flush() == []  # reported once
        assert doomed_name not in writer.table_names()
    assert deleter.get_table(kept_name).reader().to_arrow_table().to_pylist() == [{"id": 7, "value": 7}]


def test_kill_9_with_1000_writes_outstanding_loses_none_and_applies_none_twice(
        tmp_path: Path, new_store) -> None:
    # Batches of 50 records: the projector commits many while Spark's checkpoint, written in the
    # background at most once a second, lags behind; a projector killed then gets records the
    # store already applied again.
    with Server(tmp_path / "stack", store=new_store(), max_offsets_per_trigger=50,
                protocol_port=None) as stack:
        client = stack.client()
        table = client.create_table("outstanding", KEYED)
        kill_projector(stack)
        for i in range(1000):
            if i % 4 == 3:  # replaces the row of an earlier append
                table.upsert(id=[i - 3], value=[-i])
            else:
                table.append(id=[i], value=[i])
        applied = sum(store_offsets(stack.store).values())
        stack.start_projector()
        wait_until(lambda: sum(store_offsets(stack.store).values()) > applied + 300, 120,
                   "the projector to apply 300 of the writes", poll_secs=0.01)
        kill_projector(stack)
        assert sum(store_offsets(stack.store).values()) < applied + 1000  # writes still outstanding
        stack.start_projector()
        outcomes = client.flush(timeout_secs=300)
        assert len(outcomes) == 1000 and all(o.accepted for o in outcomes)
        assert [o.position.offset for o in outcomes] == sorted(o.position.offset for o in outcomes)
        rows = table.reader().to_arrow_table().to_pylist()
        expected = {i: (-(i + 3) if i % 4 == 0 else i) for i in range(1000) if i % 4 != 3}
        assert len(rows) == len(expected)  # none lost, none applied twice
        assert {r["id"]: r["value"] for r in rows} == expected
        assert_whole_log_applied_once(stack.store, stack.bootstrap_servers)


def test_a_client_killed_after_its_acks_loses_nothing(server: Server, client: sdk.CatalogClient) -> None:
    table = client.create_table(unique("orphaned"), KEYED)
    script = textwrap.dedent(f"""
        import os, signal, sdk
        client = sdk.CatalogClient({server.bootstrap_servers!r}, {str(server.store)!r},
                                   kafka_config={server.kafka_options!r})
        table = client.get_table({table.name!r})
        for start in range(0, 500, 50):
            table.append(id=list(range(start, start + 50)), value=[start] * 50)
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "acknowledged" and done.returncode == -9, done.stderr[-2000:]
    wait_caught_up(server.store, server.bootstrap_servers)
    assert sorted(table.reader().to_arrow_table().column("id").to_pylist()) == list(range(500))


@pytest.mark.store_agnostic  # the client's ledger of writes
def test_a_server_whose_projector_died_closes_its_clients_without_waiting(tmp_path: Path, new_store) -> None:
    stack = Server(tmp_path / "stack", store=new_store(), protocol_port=None)
    try:
        table = stack.client().create_table("unseen", KEYED)
        kill_projector(stack)
        table.append(id=[1], value=[1])  # acknowledged, never projected
    finally:
        returns_within(30, stack.close)  # not the 60 s a flush would wait
    assert not stack.is_running()
