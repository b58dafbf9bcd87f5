"""Helpers for the tests on the real stack (integration and reliability tiers): waiting until the
store has reached the log's end, crashing the projector, a background pipeline load, a small
recording."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Producer

from events import CATALOG_TOPIC, Event, RegisterLayer
from producers import EventProducer, Position, end_offsets
from projector import StoreUnavailableError
from stack import Server
from stores import Offsets, assert_applied_exactly_once, store_offsets

T = TypeVar("T")


def wait_until(condition: Callable[[], bool], timeout_secs: float, what: str,
               *, poll_secs: float = 0.1) -> None:
    """Poll ``condition`` until it holds; fail the test naming ``what`` after ``timeout_secs``."""
    deadline = time.monotonic() + timeout_secs
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_secs:g} s waiting for {what}")
        time.sleep(poll_secs)


def returns_within(timeout_secs: float, call: Callable[[], T]) -> T:
    """``call()``'s result, or its exception raised here; fails the test if it has not returned
    within ``timeout_secs``. For calls that must end in an answer, never hang: give a deadline
    several times any timeout they are told, as a busy machine is slow, not stuck."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        future = pool.submit(call)
        # Not future.result(timeout): its TimeoutError is the one a call may raise on purpose.
        done, _ = concurrent.futures.wait([future], timeout=timeout_secs)
        if not done:
            raise AssertionError(f"{call} did not return within {timeout_secs:g} s: it hangs")
        return future.result()
    finally:
        pool.shutdown(wait=False)


def wait_caught_up(store: str | Path, bootstrap_servers: str, timeout_secs: float = 300, *,
                   config: dict[str, str] | None = None) -> Offsets:
    """Wait until the store has applied every record in the log (read with the Kafka client
    settings ``config``); return the offsets."""
    end = {key: offset for key, offset in end_offsets(bootstrap_servers, config=config).items()
           if offset > 0}

    def caught_up() -> bool:
        try:
            return store_offsets(store) == end
        except StoreUnavailableError:  # not created yet
            return False

    wait_until(caught_up, timeout_secs, f"the store {store} to reach the log end {end}", poll_secs=0.5)
    return end


def assert_whole_log_applied_once(store: str | Path, bootstrap_servers: str, timeout_secs: float = 300,
                                  *, config: dict[str, str] | None = None) -> None:
    """Wait until the store has applied every record in the log (``wait_caught_up``), then check
    that each was folded by exactly one committed batch (``stores.assert_applied_exactly_once``)."""
    assert_applied_exactly_once(store, wait_caught_up(store, bootstrap_servers, timeout_secs, config=config))


def _process_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Fields after the command name, which is in parentheses and may hold spaces.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(entry.name))
    return members


def kill_process_group(pgid: int) -> None:
    """SIGKILL to a whole process group, as a power cut or the OOM killer would; return once
    every member is gone."""
    os.killpg(pgid, signal.SIGKILL)
    wait_until(lambda: not _process_group(pgid), 30, f"process group {pgid} to die")


def kill_projector(server: Server) -> None:
    """Crash the projector: SIGKILL to its whole process group (the Python driver and Spark's
    JVM); return once every member is gone."""
    process = server._projector
    assert process is not None and process.poll() is None, "the projector is not running"
    kill_process_group(process.pid)
    process.wait(timeout=30)
    server._projector = None


@contextlib.contextmanager
def projector_on(bootstrap_servers: str, data_dir: Path, *, protocol_port: int | None = None,
                 **kwargs) -> Iterator[Server]:
    """A projector of its own (store, checkpoint, log under ``data_dir``) on an existing broker;
    no endpoint of Rerun's protocol unless ``protocol_port`` asks for one."""
    with Server(data_dir, bootstrap_servers=bootstrap_servers, protocol_port=protocol_port,
                **kwargs) as server:
        yield server


class PipelineLoad(threading.Thread):
    """A pipeline producer in the background: ``total`` RegisterLayer events spread round-robin
    over ``dataset_ids``, sent in chunks paced over ``duration_secs`` with ``producers.EventProducer``
    (its ``config`` the Kafka settings).

    ``events`` and ``positions`` hold every acknowledged event and where it landed; ``finish()``
    re-raises whatever stopped the thread.
    """

    def __init__(self, bootstrap_servers: str, dataset_ids: list[uuid.UUID], total: int, *,
                 prefix: str, chunk: int = 500, duration_secs: float = 60.0,
                 delivery_timeout_secs: float = 120.0, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=f"load-{prefix}", daemon=True)
        self.config = config
        self.bootstrap_servers = bootstrap_servers
        self.dataset_ids = dataset_ids
        self.total = total
        self.prefix = prefix
        self.chunk = chunk
        self.interval_secs = duration_secs / max(1, -(-total // chunk))
        self.delivery_timeout_secs = delivery_timeout_secs
        self.events: list[Event] = []
        self.positions: list[Position] = []
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def event(self, i: int) -> Event:
        command = RegisterLayer(segment_id=f"{self.prefix}-{i:06d}", layer_name="base",
                                storage_url=f"file:///data/{self.prefix}/{i:06d}.rrd", size_bytes=i)
        return Event(self.dataset_ids[i % len(self.dataset_ids)], command, producer_id=self.prefix)

    def run(self) -> None:
        try:
            with EventProducer(self.bootstrap_servers, config=self.config,
                               delivery_timeout_secs=self.delivery_timeout_secs) as producer:
                started = time.monotonic()
                for n, first in enumerate(range(0, self.total, self.chunk)):
                    events = [self.event(i) for i in range(first, min(first + self.chunk, self.total))]
                    self.positions.extend(producer.send(events))
                    self.events.extend(events)
                    pause = started + (n + 1) * self.interval_secs - time.monotonic()
                    if self.stopping.wait(max(0.0, pause)):
                        return
        except BaseException as exc:  # reported by finish() in the test's thread
            self.error = exc

    @property
    def sent(self) -> int:
        return len(self.events)

    def finish(self, timeout_secs: float) -> None:
        self.join(timeout_secs)
        assert not self.is_alive(), f"the load did not finish within {timeout_secs:g} s"
        if self.error is not None:
            raise self.error
        assert self.sent == self.total

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


def strata_replay(server: Server, into: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``strata replay`` of ``server``'s log into ``into``; its output. ``env`` adds variables."""
    done = subprocess.run(
        [sys.executable, "-m", "stack.cli", "replay", "--data-dir", str(server.data_dir), "--into", str(into),
         *args], capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def produce_raw(bootstrap_servers: str, value: bytes) -> Position:
    """A record that is not a strata event, as a foreign producer might append."""
    delivered: list[Position] = []
    producer = Producer({"bootstrap.servers": bootstrap_servers})
    producer.produce(CATALOG_TOPIC, value, on_delivery=lambda err, msg: delivered.append(
        Position(msg.topic(), msg.partition(), msg.offset())))
    producer.flush(30)
    assert len(delivered) == 1
    return delivered[0]


def frames_recording(path: Path) -> Path:
    """A recording at ``path`` (its stem the recording id) with a sequence timeline ``frame`` (0 to
    5) and a value per frame."""
    import rerun as rr

    with rr.RecordingStream("strata-test", recording_id=path.stem) as rec:
        rec.save(path)
        for frame in range(6):
            rec.set_time("frame", sequence=frame)
            rec.log("arm/joint", rr.Scalars([frame * 10.0]))
        rec.reset_time()  # rerun-sdk keeps a thread's times by recording id
    return path
