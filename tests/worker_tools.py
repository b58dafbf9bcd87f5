"""Helpers for the tests of a client's worker processes: whether a process lives, and a script
interrupted by SIGINT as a terminal's Ctrl-C would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _interruptible() -> None:
    """In the script's process: SIGINT as a program started at a terminal has it. A test run that a
    shell without job control started in the background (``make test &``) passes SIGINT on
    ignored, and Python then raises no KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def assert_interrupt_leaves_no_worker(script: Path, *, after_secs: float = 0.0,
                                      timeout_secs: float = 60) -> None:
    """Run ``script``, which prints its workers' pids on one line once they serve, then keeps them
    busy; send it SIGINT ``after_secs`` later; it must stop with a KeyboardInterrupt (a generous deadline),
    its workers gone (neither alive nor listed by ``ps``)."""
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=_interruptible,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        pids = [int(p) for p in line.split()]
        if len(pids) != 2 or not all(alive(pid) for pid in pids):
            exited = process.poll() is not None
            said = process.communicate(timeout=5)[1] if exited else "(still running)"
            raise AssertionError(f"expected the pids of 2 live workers, got {line!r} (alive: "
                                 f"{[alive(pid) for pid in pids]}); the script's stderr: {said}")
        time.sleep(after_secs)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=timeout_secs)
    finally:  # a script that did not stop must not outlive the test
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "KeyboardInterrupt" in stderr, f"exit code {process.returncode}, stderr: {stderr!r}"
    assert not any(alive(pid) for pid in pids)
    listed = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    assert not [line for line in listed.splitlines()
                if "recordings.worker" in line and int(line.split()[0]) in pids]
