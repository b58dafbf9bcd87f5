"""A read-only or full store, or a PostgreSQL server gone: the projector says so in one line,
stops with exit code 2 and commits no part of the batch; once the fault is fixed, a restarted
projector applies that batch exactly once.

Each projector here reads its whole log, so the tests run on a broker of the module's own
(``own_broker``), whose log holds only their events, not the shared stack's.

The store lives on a file system of its own so the faults are real: as root (where chmod stops
no write) a size-limited tmpfs, full when filled, read-only when remounted so. Without root, a
plain directory made read-only with chmod; a full disk then needs a mount this user cannot make.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import sdk
from events import Event, RegisterLayer
from postgres import EmbeddedPostgres
from producers import EventProducer
from projector import Status, open_store
from projector.stores.sqlite import SqliteStore
from spark_streaming.__main__ import STORE_FAULT_EXIT_CODE
from stack import Server
from stack_tools import projector_on, wait_caught_up, wait_until
from stores import store_offsets


@dataclass
class StoreDirectory:
    path: Path
    own_filesystem: bool
    """True if ``path`` is a tmpfs mounted for the test, which can be filled and remounted."""

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self) -> None:
        """Write a file until the file system has no byte left."""
        with open(self.filler, "wb", buffering=0) as out:
            for block in (1 << 20, 1 << 12, 1):
                try:
                    while True:
                        out.write(b"\0" * block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise

    def free(self) -> None:
        self.filler.unlink()

    def make_read_only(self) -> None:
        if self.own_filesystem:
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        else:
            for file in self.path.iterdir():
                file.chmod(0o444)
            self.path.chmod(0o555)

    def make_writable(self) -> None:
        if self.own_filesystem:
            subprocess.run(["mount", "-o", "remount,rw", str(self.path)], check=True)
        else:
            self.path.chmod(0o755)
            for file in self.path.iterdir():
                file.chmod(0o644)


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[StoreDirectory]:
    path = tmp_path / "store-fs"
    path.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "strata-test-store", str(path)],
        capture_output=True).returncode == 0
    try:
        yield StoreDirectory(path, own_filesystem=mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "--lazy", str(path)], check=True)


def registrations(dataset_id: uuid.UUID, prefix: str, count: int) -> list[Event]:
    return [Event(dataset_id, RegisterLayer(f"{prefix}-{i:03d}", "base", f"file:///data/{prefix}/{i}.rrd"))
            for i in range(count)]


def assert_applied_once(location: str, events: list[Event]) -> None:
    store = open_store(location, read_only=True)
    try:
        for event in events:
            outcome = store.outcome(event.event_id)
            assert outcome is not None and outcome.status is Status.ACCEPTED, event
            layer = store.layer(event.entry_id, event.command.segment_id, "base")
            assert layer is not None and layer.event_id == event.event_id
    finally:
        store.close()


def stop_line(projector: Server) -> str:
    """Wait for the projector to stop on a store fault; its one line saying why."""
    wait_until(lambda: projector._projector.poll() is not None, 180,
               "the projector to stop on the store fault")
    assert projector._projector.returncode == STORE_FAULT_EXIT_CODE
    [line] = [line for line in projector.projector_log.read_text().splitlines()
              if "projector stopped:" in line]
    return line


def truncate_wal(store_path: Path) -> None:
    """Checkpoint the store's write-ahead log into the database and cut it to zero bytes, so the
    next commit needs new space on the disk."""
    def truncated() -> bool:
        with contextlib.closing(sqlite3.connect(store_path, timeout=30)) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0
    wait_until(truncated, 60, "the store's WAL to be checkpointed")


@pytest.mark.sqlite_only
def test_a_full_store_stops_the_projector_cleanly_and_it_resumes(
        own_broker: str, store_dir: StoreDirectory, tmp_path: Path) -> None:
    if not store_dir.own_filesystem:
        pytest.skip("a full disk needs a size-limited tmpfs for the store, which only root can mount")
    with projector_on(own_broker, tmp_path / "full",
                      store=store_dir.path / "store.db") as projector:
        dataset = projector.client().create_dataset(f"full-{uuid.uuid4().hex[:8]}")
        end = wait_caught_up(projector.store, own_broker)
        truncate_wal(projector.store)
        store_dir.fill()
        events = registrations(dataset.id, "while-full", 50)
        with EventProducer(own_broker) as producer:
            producer.send(events)

        line = stop_line(projector)
        store_parent = re.escape(str(Path(projector.store).absolute().parent))
        assert re.search(r"projector stopped: batch \d+ \(offsets \d+\.\.\d+\) was not committed: "
                         rf"store {re.escape(str(projector.store))}: database or disk is full\. "
                         rf"Nothing of it was written\. Make {store_parent} "
                         r"writable and give it free space, then restart the projector", line), line

        store_dir.free()
        # No part of the failed batch was committed.
        assert store_offsets(projector.store) == end
        assert SqliteStore(projector.store, read_only=True).outcome(events[0].event_id) is None
        projector.start_projector()
        wait_caught_up(projector.store, own_broker)
        assert_applied_once(projector.store, events)


@pytest.mark.sqlite_only
def test_a_read_only_store_stops_the_projector_cleanly_and_it_resumes(
        own_broker: str, store_dir: StoreDirectory, tmp_path: Path) -> None:
    if os.geteuid() == 0 and not store_dir.own_filesystem:
        pytest.skip("as root chmod stops no write, and mounting a read-only file system failed")
    with projector_on(own_broker, tmp_path / "read-only",
                      store=store_dir.path / "store.db") as projector:
        client: sdk.CatalogClient = projector.client()
        dataset = client.create_dataset(f"read-only-{uuid.uuid4().hex[:8]}")
        end = wait_caught_up(projector.store, own_broker)
        projector.stop_projector()
        client.close()  # a file open for writing would keep the file system from going read-only
        store_dir.make_read_only()
        try:
            events = registrations(dataset.id, "while-read-only", 50)
            with EventProducer(own_broker) as producer:
                producer.send(events)
            with pytest.raises(RuntimeError, match=f"exited with code {STORE_FAULT_EXIT_CODE}") as raised:
                projector.start_projector()
            message = str(raised.value)
            assert f"cannot open the projection store, nothing was read: store {projector.store}" \
                in message, message
            assert "then start the projector again" in message, message
        finally:
            store_dir.make_writable()
        assert store_offsets(projector.store) == end
        projector.start_projector()
        wait_caught_up(projector.store, own_broker)
        assert_applied_once(projector.store, events)


@pytest.mark.own_store  # a PostgreSQL server of its own, to stop
def test_a_postgresql_server_gone_stops_the_projector_cleanly_and_it_resumes(
        own_broker: str, tmp_path: Path) -> None:
    with EmbeddedPostgres() as pg, projector_on(own_broker, tmp_path / "pg-gone",
                                                 store=pg.create_database()) as projector:
        dataset = projector.client().create_dataset(f"pg-gone-{uuid.uuid4().hex[:8]}")
        end = wait_caught_up(projector.store, own_broker)
        pg.stop("immediate")
        events = registrations(dataset.id, "while-gone", 50)
        with EventProducer(own_broker) as producer:
            producer.send(events)

        line = stop_line(projector)
        location = re.escape(f"postgresql://strata@{pg.host}:{pg.port}/")
        assert re.search(rf"projector stopped: batch \d+ \(offsets \d+\.\.\d+\) was not committed: "
                         rf"store {location}\w+: .*Nothing of it was written\. Check that the PostgreSQL "
                         r"server is up and reachable.*, then restart the projector",
                         line), line

        pg.resume()
        assert store_offsets(projector.store) == end
        projector.start_projector()
        wait_caught_up(projector.store, own_broker)
        assert_applied_once(projector.store, events)
