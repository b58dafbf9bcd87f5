"""The stack's child processes with a stdout pipe (the endpoint's): their stderr in their log,
their lines read back with a deadline, and the pipe closed when they are stopped."""

from __future__ import annotations

import sys
from pathlib import Path

from stack import processes


def test_a_child_s_line_is_read_and_its_stderr_goes_to_its_log(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    script = ("import sys, time; sys.stderr.write('noise\\n'); sys.stderr.flush(); "
              "print('ready at x', flush=True); time.sleep(60)")
    child = processes.start([sys.executable, "-c", script], log, stdout_pipe=True)
    try:
        assert processes.read_line(child, timeout_secs=60) == "ready at x"
        assert processes.read_line(child, timeout_secs=0.2) is None  # nothing more written
    finally:
        processes.stop(child, timeout_secs=10)
    assert child.returncode is not None and child.stdout is not None and child.stdout.closed
    assert log.read_text() == "noise\n"


def test_a_child_that_exits_before_its_line_reads_as_none(tmp_path: Path) -> None:
    child = processes.start([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path / "child.log",
                            stdout_pipe=True)
    try:
        assert processes.read_line(child, timeout_secs=60) is None
        assert child.wait(60) == 3
    finally:
        processes.stop(child)
