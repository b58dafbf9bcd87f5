"""Several hosts, all on this machine: network namespaces joined by veth pairs (``hosts``). One
host runs the broker (SASL_SSL), PostgreSQL (TLS and passwords), an S3-compatible server, a
Spark standalone master with two workers, and the projector on that master (``team_host.py``);
the others reach them by IP address only, as the README's "A team on several machines" describes.

- Two client hosts (``team_client.py``) run the seeds' layers how-to at once, read each other's
  writes, and survive a kill -9 of the projector half-way.
- A pipeline host (``team_pipeline.py``) produces a burst that the projector folds on the
  executors, and one executor is killed with -9 while it folds.
- A client host (``team_register.py``) registers a prefix of recordings whose facts the
  executors of its own Spark application read (``strata register --prefix --spark``), and one of
  those executors is killed with -9 while it reads.

Each time, nothing is lost or applied twice."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from hosts import Hosts
from stack.processes import tail
from stack_tools import kill_process_group, wait_until

pytestmark = pytest.mark.own_store  # its store is the server host's PostgreSQL

TESTS_DIR = Path(__file__).parents[1]
CLIENTS = {"laptop": "trainer", "trainer": "laptop"}
"""Each client host and its peer."""
BURST = 60_000
"""The pipeline's registrations: batches of 20,000 records, each folded for seconds."""
DELIVERY = 2_000
"""The recordings registered on the executors: past the 1,000 from which a registration given a
Spark session reads on it, and two tasks of about 1,000 objects, each read for seconds."""


@contextlib.contextmanager
def server_host(hosts: Hosts, tmp_path: Path) -> Iterator[tuple[dict, Callable[[], dict]]]:
    """``team_host.py`` on host ``server``: its ``ready.json`` once it is up, and a function that
    reads it again."""
    server_dir = tmp_path / "server"
    host_log = tmp_path / "server.log"
    server = subprocess.Popen(
        hosts.command("server", [sys.executable, TESTS_DIR / "team_host.py",
                                 "--address", hosts.address["server"], "--dir", server_dir]),
        stdout=host_log.open("wb"), stderr=subprocess.STDOUT)
    ready_file = server_dir / "ready.json"
    try:
        def server_ready() -> bool:
            assert server.poll() is None, f"the server host exited:\n{tail(host_log, 40)}"
            return ready_file.exists()

        wait_until(server_ready, 300, "the server host")
        yield json.loads(ready_file.read_text()), lambda: json.loads(ready_file.read_text())
    finally:
        server.terminate()
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()


def test_two_client_hosts_share_the_catalog_and_survive_a_projector_crash(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    with Hosts(["server", *CLIENTS]) as hosts, server_host(hosts, tmp_path) as (ready, reread):
        clients: dict[str, subprocess.Popen] = {}
        try:
            assert ready["bootstrap_servers"].startswith(hosts.address["server"] + ":")
            assert ready["spark_master"].startswith(f"spark://{hosts.address['server']}:")
            environment = {**os.environ, "STRATA_KAFKA_OPTIONS": json.dumps(ready["kafka_options"]),
                           **ready["aws"]}
            for name, peer in CLIENTS.items():
                clients[name] = subprocess.Popen(
                    hosts.command(name, [
                        sys.executable, TESTS_DIR / "team_client.py", "--name", name, "--peer", peer,
                        "--bootstrap-servers", ready["bootstrap_servers"], "--store", ready["store"],
                        "--bucket", ready["bucket"], "--dir", shared]),
                    env=environment, stdout=(tmp_path / f"{name}.log").open("wb"),
                    stderr=subprocess.STDOUT)

            def reached(step: str) -> bool:
                for name, client in clients.items():
                    assert client.poll() in (None, 0), \
                        f"client {name} failed:\n{tail(tmp_path / f'{name}.log', 40)}"
                return all((shared / f"{name}.{step}").exists() for name in clients)

            wait_until(lambda: reached("base"), 300, "both clients' base layers")
            (shared / "go").touch()
            wait_until(lambda: reached("midway"), 300, "both clients' first tracking layers")
            kill_process_group(ready["projector_pid"])
            killed_at = time.monotonic()

            for name, client in clients.items():
                client.wait(timeout=600)
                assert client.returncode == 0, \
                    f"client {name} failed:\n{tail(tmp_path / f'{name}.log', 40)}"
            ready = reread()
            assert ready["restarts"] == 1, ready
            # The clients went on while the projector was down, not after they had finished.
            assert time.monotonic() - killed_at > 1
        finally:
            for client in clients.values():
                if client.poll() is None:
                    client.kill()


def test_an_executor_killed_while_it_reads_a_prefix_loses_nothing_and_registers_nothing_twice(
        tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    with Hosts(["server", "laptop"]) as hosts, server_host(hosts, tmp_path) as (ready, _):
        wait_until(lambda: len(executors()) == 2, 120, "the projector's two executors")
        projector_executors = set(executors())
        log = tmp_path / "register.log"
        registering = subprocess.Popen(
            hosts.command("laptop", [
                sys.executable, TESTS_DIR / "team_register.py", "--address", hosts.address["laptop"],
                "--bootstrap-servers", ready["bootstrap_servers"], "--store", ready["store"],
                "--bucket", ready["bucket"], "--spark-master", ready["spark_master"],
                "--count", str(DELIVERY), "--dir", shared]),
            env={**os.environ, "STRATA_KAFKA_OPTIONS": json.dumps(ready["kafka_options"]), **ready["aws"]},
            stdout=log.open("wb"), stderr=subprocess.STDOUT)
        try:
            def uploaded() -> bool:
                assert registering.poll() is None, f"the registering host failed:\n{tail(log, 40)}"
                return (shared / "register.uploaded").exists()

            wait_until(uploaded, 600, "the delivery in the object store")

            def reading() -> None:
                assert registering.poll() is None, \
                    f"the registration ended before an executor was seen reading:\n{tail(log, 40)}"

            # An executor of the registration (not the projector's) whose task is reading.
            killed = kill_a_busy_executor(lambda: set(executors()) - projector_executors, 0.02, reading,
                                          "an executor seen reading")
            registering.wait(timeout=900)
            assert registering.returncode == 0, f"the registering host failed:\n{tail(log, 60)}"
            assert killed not in executors()
            assert set(executors()) >= projector_executors  # the projector's were left alone
        finally:
            if registering.poll() is None:
                registering.kill()


def kill_a_busy_executor(candidates: Callable[[], Iterable[int]], busy_secs: float,
                         going: Callable[[], None], what: str) -> int:
    """Kill with -9 the first executor of ``candidates()`` whose task's Python workers use
    ``busy_secs`` of CPU within one 0.25 s poll; ``going()`` asserts the work is still under way.
    Returns its process id."""
    busy_ticks = busy_secs * os.sysconf("SC_CLK_TCK")
    ticks: dict[int, int] = {}
    killed: list[int] = []

    def killed_one() -> bool:
        going()
        children = _children()
        now = {pid: _python_cpu_ticks(pid, children) for pid in candidates()}
        busy = [pid for pid in now if now[pid] - ticks.get(pid, now[pid]) >= busy_ticks]
        ticks.clear()
        ticks.update(now)
        if busy:
            os.kill(busy[0], signal.SIGKILL)
            killed.append(busy[0])
        return bool(killed)

    wait_until(killed_one, 600, what, poll_secs=0.25)
    return killed[0]


def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            found.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return found


def _python_cpu_ticks(root: int, children: dict[int, list[int]]) -> int:
    """The CPU time of the Python processes under ``root``: the task workers of an executor."""
    ticks, pending = 0, list(children.get(root, []))
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        with contextlib.suppress(OSError):
            if b"python" in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
    return ticks


def executors() -> list[int]:
    """The process ids of the Spark executors on this machine: the projector's."""
    return [int(cmdline.parent.name) for cmdline in Path("/proc").glob("[0-9]*/cmdline")
            if b"CoarseGrainedExecutorBackend" in _read(cmdline)]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_an_executor_killed_while_it_folds_loses_nothing_and_applies_nothing_twice(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    with Hosts(["server", "pipeline"]) as hosts, server_host(hosts, tmp_path) as (ready, reread):
        # One executor on each worker, where the projector folds large batches.
        wait_until(lambda: len(executors()) == 2, 120, "the projector's two executors")
        pipeline_log = tmp_path / "pipeline.log"
        pipeline = subprocess.Popen(
            hosts.command("pipeline", [
                sys.executable, TESTS_DIR / "team_pipeline.py", "--bootstrap-servers",
                ready["bootstrap_servers"], "--store", ready["store"], "--count", str(BURST),
                "--dir", shared]),
            env={**os.environ, "STRATA_KAFKA_OPTIONS": json.dumps(ready["kafka_options"])},
            stdout=pipeline_log.open("wb"), stderr=subprocess.STDOUT)
        try:
            def sent() -> bool:
                assert pipeline.poll() is None, f"the pipeline failed:\n{tail(pipeline_log, 40)}"
                return (shared / "pipeline.sent").exists()

            wait_until(sent, 300, "the burst in Kafka")

            def folding() -> None:
                assert pipeline.poll() is None, \
                    f"the burst was folded before an executor was seen folding:\n{tail(pipeline_log, 40)}"

            # An executor whose task's Python worker is busy folding: kill it there.
            killed = kill_a_busy_executor(executors, 0.1, folding, "an executor seen folding")
            pipeline.wait(timeout=600)
            assert pipeline.returncode == 0, f"the pipeline failed:\n{tail(pipeline_log, 40)}"
            assert killed not in executors()
            # Spark ran the killed executor's task again elsewhere; the projector never stopped.
            assert reread()["restarts"] == 0
        finally:
            if pipeline.poll() is None:
                pipeline.kill()
