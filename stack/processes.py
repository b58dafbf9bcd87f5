"""Child processes of the embedded stack: started with their logs in files, stopped politely."""

from __future__ import annotations

import ctypes
import os
import selectors
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Linux: the child gets SIGTERM if the process that started it dies, even by kill -9, so an
    # embedded broker never outlives the stack that owns it.
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start(args: list[str], log_path: Path, *, env: dict[str, str] | None = None,
          stdout_pipe: bool = False) -> subprocess.Popen[bytes]:
    """Start ``args`` with its output appended to ``log_path``; with ``stdout_pipe``, only its
    stderr: its stdout is a pipe to read it from (``read_line``)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log, warnings.catch_warnings():
        # Lance warns at any fork of a process that imported it (a search made before the stack
        # starts); the child here runs only prctl, then execs.
        warnings.filterwarnings("ignore", "lance is not fork-safe", UserWarning)
        # A session of its own: a terminal's Ctrl-C reaches only the parent, which then stops its
        # children in order (projector before broker) instead of all dying at once.
        return subprocess.Popen(
            args, stdout=subprocess.PIPE if stdout_pipe else log,
            stderr=log if stdout_pipe else subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent,
            start_new_session=True)


def read_line(process: subprocess.Popen[bytes], timeout_secs: float) -> str | None:
    """The next line ``process`` writes to its stdout pipe, without its end of line; None if it
    closes its stdout (it exits, say) or writes no whole line within ``timeout_secs``."""
    assert process.stdout is not None  # started with stdout_pipe
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_secs):
            return None
    line = process.stdout.readline()
    return line.decode(errors="replace").rstrip("\r\n") if line.endswith(b"\n") else None


def stop(process: subprocess.Popen[bytes] | None, *, timeout_secs: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout_secs``; closes its stdout pipe, if any."""
    if process is None:
        return
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout_secs)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


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
