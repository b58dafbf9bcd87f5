"""TLS for the endpoint that ``strata up`` and ``sdk.Server()`` start: the
options ``strata up`` takes for it (``--tls-cert`` and ``--tls-key``, as ``strata serve``'s), and
what is refused before any part of the stack starts: a certificate without its key, TLS with no
endpoint to serve, a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from stack import cli, server


class NotStarted(Exception):
    """Raised in place of starting a stack: what a test of refused arguments must never do."""


@pytest.fixture
def never_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack that would start fails the test instead of starting Kafka and Spark."""

    def start(self: server.Server) -> server.Server:
        raise NotStarted("the stack was started")

    monkeypatch.setattr(server.Server, "start", start)


@pytest.fixture
def pem_files(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate file and a key file; what is in them is the endpoint's to read."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("certificate")
    key.write_text("key")
    return cert, key


@pytest.mark.parametrize("given", [["--tls-cert", "cert.pem"], ["--tls-key", "key.pem"]])
def test_strata_up_refuses_a_certificate_without_its_key_before_anything_starts(
        given: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], never_started: None) -> None:
    state = tmp_path / "state"
    assert cli.main(["up", "--data-dir", str(state), *given]) == 1
    shown = capsys.readouterr()
    assert shown.err == ("strata: error: --tls-cert and --tls-key go together: the certificate and its "
                         "private key\n")
    assert shown.out == ""  # not even "starting"
    assert not state.exists()


def test_strata_up_refuses_tls_without_the_protocol(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], pem_files: tuple[Path, Path],
        never_started: None) -> None:
    cert, key = pem_files
    state = tmp_path / "state"
    assert cli.main(["up", "--data-dir", str(state), "--no-protocol", "--tls-cert", str(cert),
                     "--tls-key", str(key)]) == 1
    assert capsys.readouterr().err == (
        "strata: error: --tls-cert and --tls-key serve Rerun's catalog protocol over TLS, which "
        "--no-protocol does not serve: give one or the other\n")
    assert not state.exists()


def test_strata_up_gives_the_server_its_certificate_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    def server_made(*args: Any, **kwargs: Any) -> server.Server:
        made.append(kwargs)
        raise NotStarted("made")

    monkeypatch.setattr(server, "Server", server_made)
    with pytest.raises(NotStarted):
        cli.main(["up", "--data-dir", str(tmp_path), "--protocol-port", "0", "--tls-cert", "c.pem",
                  "--tls-key", "k.pem"])
    with pytest.raises(NotStarted):
        cli.main(["up", "--data-dir", str(tmp_path)])
    with pytest.raises(NotStarted):
        cli.main(["up", "--data-dir", str(tmp_path), "--no-protocol"])
    given = [(made_with["protocol_port"], made_with["protocol_tls"], made_with["protocol_web_port"])
             for made_with in made]
    assert given == [(0, (Path("c.pem"), Path("k.pem")), 51235), (51234, None, 51235), (None, None, None)]


def test_a_server_refuses_tls_or_grpc_web_without_its_endpoint(
        tmp_path: Path, pem_files: tuple[Path, Path], never_started: None) -> None:
    with pytest.raises(ValueError, match=r"protocol_tls serves Rerun's catalog protocol over TLS, which "
                                         r"protocol_port=None does not serve"):
        server.Server(tmp_path / "stack", protocol_port=None, protocol_tls=pem_files)
    with pytest.raises(ValueError, match=r"protocol_web_port serves Rerun's catalog protocol over "
                                         r"gRPC-web beside its gRPC endpoint, which protocol_port=None "
                                         r"does not serve"):
        server.Server(tmp_path / "stack", protocol_port=None, protocol_web_port=0)
    assert not (tmp_path / "stack").exists()
    with pytest.raises(NotStarted):  # the endpoint is served by default: TLS needs nothing more
        server.Server(tmp_path / "stack", protocol_tls=pem_files)


def test_a_server_refuses_a_certificate_or_key_that_is_not_there(
        tmp_path: Path, pem_files: tuple[Path, Path], never_started: None) -> None:
    cert, key = pem_files
    absent = tmp_path / "absent.pem"
    with pytest.raises(ValueError, match=f"protocol_tls: no certificate file at {re.escape(str(absent))}$"):
        server.Server(tmp_path / "stack", protocol_port=0, protocol_tls=(absent, key))
    with pytest.raises(ValueError, match=f"protocol_tls: no private key file at {re.escape(str(absent))}$"):
        server.Server(tmp_path / "stack", protocol_port=0, protocol_tls=(str(cert), str(absent)))
    with pytest.raises(ValueError, match="protocol_tls: no private key file at .*"):
        server.Server(tmp_path / "stack", protocol_port=0, protocol_tls=(cert, tmp_path))  # a directory
    assert not (tmp_path / "stack").exists()
    with pytest.raises(NotStarted):  # both there: the stack starts, with them
        server.Server(tmp_path / "stack", protocol_port=0, protocol_tls=pem_files)
