"""Several hosts, all on this machine: network namespaces joined by veth pairs (``hosts``). One
host runs the broker (SASL_SSL), PostgreSQL (TLS and passwords), an S3-compatible server, a
Spark standalone master and worker, and the projector on that master (``team_host.py``); two
others each run a client (``team_client.py``) that reaches them by IP address only, as the
README's "A team on several machines" describes. Both clients run the
seeds' layers how-to at once, read each other's writes, and survive a kill -9 of the projector
half-way, with nothing lost or applied twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hosts import Hosts
from stack.processes import tail
from stack_tools import kill_process_group, wait_until

pytestmark = pytest.mark.own_store  # its store is the server host's PostgreSQL

TESTS_DIR = Path(__file__).parents[1]
CLIENTS = {"laptop": "trainer", "trainer": "laptop"}
"""Each client host and its peer."""


def test_two_client_hosts_share_the_catalog_and_survive_a_projector_crash(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    server_dir = tmp_path / "server"
    with Hosts(["server", *CLIENTS]) as hosts:
        host_log = tmp_path / "server.log"
        server = subprocess.Popen(
            hosts.command("server", [sys.executable, TESTS_DIR / "team_host.py",
                                     "--address", hosts.address["server"], "--dir", server_dir]),
            stdout=host_log.open("wb"), stderr=subprocess.STDOUT)
        clients: dict[str, subprocess.Popen] = {}
        try:
            ready_file = server_dir / "ready.json"

            def server_ready() -> bool:
                assert server.poll() is None, f"the server host exited:\n{tail(host_log, 40)}"
                return ready_file.exists()

            wait_until(server_ready, 300, "the server host")
            ready = json.loads(ready_file.read_text())
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
            ready = json.loads(ready_file.read_text())
            assert ready["restarts"] == 1, ready
            # The clients went on while the projector was down, not after they had finished.
            assert time.monotonic() - killed_at > 1
        finally:
            for client in clients.values():
                if client.poll() is None:
                    client.kill()
            server.terminate()
            try:
                server.wait(timeout=120)
            except subprocess.TimeoutExpired:
                server.kill()
