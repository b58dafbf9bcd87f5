"""The endpoint in a process of its own (``python -m protocol``), on a store folded in process:
its one ready line, Rerun's client reading through it what it cannot read from an endpoint in its
own process (``reader(using_index_values=...)`` waits for the server holding Python's global
lock), a clean stop on SIGTERM with nothing on stderr, and the options it shares with
``strata serve``."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rerun as rr

import sdk
from protocol.endpoint import READY, ready_line, url_of, web_url_of
from protocol.tokens import mint
from secured import make_certificates
from settings.options import store_location

from .in_process import InProcessStack
from .test_protocol_reads import T0, episode

ROOT = Path(__file__).resolve().parents[2]


def _environment() -> dict[str, str]:
    """This environment without a Kafka cluster or store of its own: the options say."""
    env = {k: v for k, v in os.environ.items() if k not in ("STRATA_BOOTSTRAP_SERVERS", "STRATA_STORE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "protocol", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=_environment())


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_the_ready_line_names_the_url_and_nothing_else_is_one() -> None:
    url = "rerun+http://127.0.0.1:51234"
    assert ready_line(url).startswith(READY)
    assert url_of(ready_line(url) + "\n") == url
    assert url_of(f"strata serve: {url}") is None
    assert url_of("") is None
    web = "rerun+http://127.0.0.1:51235"
    assert url_of(ready_line(url, web)) == url and web_url_of(ready_line(url, web)) == web
    assert web_url_of(ready_line(url)) is None and web_url_of(f"strata serve: {url}") is None


def test_rerun_s_client_reads_at_index_values_through_the_endpoint_s_own_process(
        stack: InProcessStack, tmp_path: Path) -> None:
    stack.dataset.register([episode(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    process = _start("--store", str(tmp_path / "store.db"), "--port", "0")
    try:
        line = process.stdout.readline() if process.stdout else ""
        url = url_of(line)
        assert url is not None and url.startswith("rerun+http://127.0.0.1:"), (line, process.stderr)
        dataset = rr.catalog.CatalogClient(url).get_dataset("droid")
        values = np.array([T0 + 10**9, T0 + 3 * 10**9], dtype="datetime64[ns]")
        rows = dataset.reader(index="real_time", using_index_values=values).to_arrow_table()
        times = rows["real_time"].cast("int64").to_pylist()
        assert sorted(zip(rows["rerun_segment_id"].to_pylist(), times, strict=True)) == [
            (segment, int(value)) for segment in ("ep_0", "ep_1") for value in values.astype("int64")]
        joints = rows["/arm/joints:Scalars:scalars"].to_pylist()
        assert [joints[i] for i, time in enumerate(times) if time == T0 + 3 * 10**9] == [[1.5, -1.5]] * 2
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert out == "" and err == ""  # one line, then nothing: no grpc noise either
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", _port(url))) != 0


def test_a_store_that_cannot_be_read_exits_in_one_line(tmp_path: Path) -> None:
    process = _start("--store", str(tmp_path / "absent" / "store.db"), "--port", "0")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert out == ""
    assert err.startswith("strata: ") and err.count("\n") == 1, err


def test_a_port_in_use_exits_saying_so(stack: InProcessStack, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        process = _start("--store", str(tmp_path / "store.db"), "--port", str(taken.getsockname()[1]))
        out, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert out == ""
    # grpc's own line on the failed bind may come first
    assert err.splitlines()[-1].startswith("strata: cannot serve Rerun's catalog protocol on 127.0.0.1:"), err


def test_an_endpoint_with_a_secret_and_a_certificate_serves_tokens_over_tls(
        stack: InProcessStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    certificates = make_certificates(tmp_path / "tls", ["127.0.0.1"])
    secret = base64.b64encode(b"k" * 32).decode()
    process = subprocess.Popen(
        [sys.executable, "-m", "protocol", "--store", str(tmp_path / "store.db"), "--port", "0",
         "--tls-cert", str(certificates.cert), "--tls-key", str(certificates.key)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env={**_environment(), "STRATA_TOKEN_SECRET": secret})
    try:
        url = url_of(process.stdout.readline() if process.stdout else "")
        assert url is not None and url.startswith("rerun+https://127.0.0.1:"), process.stderr
        with pytest.raises(sdk.EndpointUnavailableError):  # its certificate is not trusted here
            sdk.CatalogClient(url, token="unused")
        monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
        with pytest.raises(sdk.EndpointRefusedError, match="this catalog needs a token"):
            sdk.CatalogClient(url)
        token = mint(base64.b64decode(secret), hosts=["127.0.0.1"], read_only=True)
        client = sdk.CatalogClient(url, token=token, workers=0)
        assert client.dataset_names() == ["droid"]
        client.close()
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert out == "" and err == ""  # refused handshakes and calls print nothing on the endpoint's side


def test_a_certificate_without_its_key_or_a_bad_secret_exits_in_one_line(tmp_path: Path) -> None:
    process = _start("--store", str(tmp_path / "store.db"), "--port", "0", "--tls-cert", "cert.pem")
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (1, "strata: --tls-cert and --tls-key go together: the certificate "
                                            "and its private key\n")
    process = subprocess.Popen([sys.executable, "-m", "protocol", "--store", str(tmp_path / "store.db")],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**_environment(), "STRATA_TOKEN_SECRET": "short"})
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert err.startswith("strata: STRATA_TOKEN_SECRET is not base64 of 32 bytes or more")
    assert err.count("\n") == 1


def test_the_endpoint_takes_strata_serve_s_options(tmp_path: Path) -> None:
    from protocol.__main__ import parse_args
    from stack.cli import build_parser

    args = parse_args(["--data-dir", str(tmp_path), "--port", "0"])
    assert store_location(args) == str(tmp_path / "store.db")
    assert (args.host, args.port, args.bootstrap_servers, args.kafka_option) == ("127.0.0.1", 0, None, [])
    assert args.direct_urls
    given = ["--data-dir", str(tmp_path), "--store", "s.db", "--bootstrap-servers", "k:9092",
             "--kafka-option", "security.protocol=SSL", "--host", "::1", "--port", "7", "--no-direct-urls",
             "--tls-cert", "c.pem", "--tls-key", "k.pem"]
    assert not parse_args(given).direct_urls
    assert (parse_args(given).tls_cert, parse_args(given).tls_key) == (Path("c.pem"), Path("k.pem"))
    served = vars(build_parser().parse_args(["serve", *given]))
    assert {key: served[key] for key in vars(parse_args(given))} == vars(parse_args(given))


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for its new parent to reap does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_an_endpoint_the_stack_started_stops_when_its_starter_is_killed(stack: InProcessStack,
                                                                        tmp_path: Path) -> None:
    starter = f"""
import os, sys
from pathlib import Path
from stack import processes
child = processes.start([sys.executable, "-m", "protocol", "--store", {str(tmp_path / "store.db")!r},
                         "--port", "0"], Path({str(tmp_path / "protocol.log")!r}), stdout_pipe=True)
print(child.pid, processes.read_line(child, 60), flush=True)
os.kill(os.getpid(), 9)
"""
    process = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True,
                               env=_environment())
    out, _ = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL
    pid, line = out.split(" ", 1)
    url = url_of(line)
    assert url is not None, out
    deadline = time.monotonic() + 60
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid))
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", _port(url))) != 0
    assert (tmp_path / "protocol.log").read_text() == ""  # a clean stop: SIGTERM, as the Server's
