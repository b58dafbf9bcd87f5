"""Running ``strata`` as a person at a terminal does: its stderr on a pseudo-terminal (what progress
bars are drawn on), its stdout on a pipe, or both on pipes as a script has them."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    """What the terminal (or the pipe) showed, control characters included."""


def strata(*args: str, terminal: bool, timeout: float = 120) -> Finished:
    """``strata ARGS`` run to its end, its stderr on an 80x24 pseudo-terminal if ``terminal``,
    else on a pipe."""
    return run([sys.executable, "-m", "stack.cli", *args], terminal=terminal, timeout=timeout)


def run(command: list[str], *, terminal: bool, timeout: float = 120) -> Finished:
    """``command`` run to its end in the tree's root, as ``strata`` is; it should write little
    to stdout (read once it has ended)."""
    if not terminal:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        return Finished(done.returncode, done.stdout, done.stderr)
    reader, writer = pty.openpty()
    fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=writer,
                                   stdin=subprocess.DEVNULL)
    finally:
        os.close(writer)  # the child holds the terminal now; reads end when it closes it
    shown = bytearray()
    while True:
        try:
            data = os.read(reader, 4096)
        except OSError:  # EIO: no process holds the terminal any more
            break
        if not data:
            break
        shown += data
    os.close(reader)
    assert process.stdout is not None
    stdout = process.stdout.read().decode()
    process.stdout.close()
    return Finished(process.wait(timeout=timeout), stdout, shown.decode(errors="replace"))
