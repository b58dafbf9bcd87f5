"""Child processes of the embedded stack: started with their logs in files, stopped politely."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Linux: the child gets SIGTERM if the process that started it dies, even by kill -9, so an
    # embedded broker never outlives the stack that owns it.
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(args: list[str], log_path: Path, *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        # A session of its own: a terminal's Ctrl-C reaches only the parent, which then stops its
        # children in order (projector before broker) instead of all dying at once.
        return subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent,
            start_new_session=True)


def stop(process: subprocess.Popen[bytes] | None, *, timeout_secs: float = 30.0) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout_secs)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log written)"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``port`` now. Connections left in TIME_WAIT by a process
    that died (kill -9) do not count: Kafka, like most servers, binds with SO_REUSEADDR, so a
    restarted broker can take its old port back."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def port_accepts(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0
