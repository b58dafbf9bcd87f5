"""Memory and CPU of process trees, read from /proc (Linux): the broker, the projector, rerun's server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable


def _children(pid: int) -> list[int]:
    children: list[int] = []
    task_dir = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(task_dir)
    except FileNotFoundError:
        return []
    for task in tasks:
        try:
            with open(f"{task_dir}/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
        except FileNotFoundError:
            continue
    return children


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants still alive."""
    found: list[int] = []
    pending = [pid]
    while pending:
        current = pending.pop()
        if os.path.exists(f"/proc/{current}"):
            found.append(current)
            pending += _children(current)
    return found


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds (user and system) of ``pids`` and of the children they have reaped."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, cutime, cstime
    return total / TICKS


def program(pid: int) -> str:
    """The file name of the program ``pid`` runs ("java", "python", ...), "" if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return os.path.basename(f.read().split(b"\0", 1)[0].decode())
    except (FileNotFoundError, ProcessLookupError):
        return ""


def projector_parts(projector: int) -> dict[str, list[int]]:
    """The projector's process tree in its parts: its driver's Python process, Spark's JVM, the
    JVM's Python workers (Spark's tasks), and the driver's other children (the changelog relay)."""
    jvms: list[int] = []
    others: list[int] = []
    for child in _children(projector):
        (jvms if program(child).startswith("java") else others).append(child)
    return {"driver": [projector], "spark_jvm": jvms,
            "spark_tasks": [pid for jvm in jvms for pid in tree(jvm) if pid != jvm],
            "relay": [pid for child in others for pid in tree(child)]}


def rss_bytes(pid: int) -> int:
    """Resident set size of one process, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def tree_rss_bytes(roots: Iterable[int]) -> int:
    """Summed RSS of every process in the trees under ``roots``."""
    return sum(rss_bytes(pid) for root in roots for pid in tree(root))


class PeakRss:
    """Samples the RSS of process trees in a background thread and keeps the peak.

    >>> with PeakRss([projector.pid]) as peak:  # doctest: +SKIP
    ...     replay()
    >>> peak.peak_bytes
    """

    def __init__(self, roots: Iterable[int], *, interval_secs: float = 0.2, trees: bool = True) -> None:
        self.roots = list(roots)
        self.interval_secs = interval_secs
        self.trees = trees
        """False: the listed processes only, not their children."""
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = tree_rss_bytes(self.roots) if self.trees else sum(map(rss_bytes, self.roots))
            self.peak_bytes = max(self.peak_bytes, now)
            self._stop.wait(self.interval_secs)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def mib(value: int) -> float:
    return round(value / 2**20, 1)


def wait_until(condition: Callable[[], bool], *, timeout_secs: float, interval_secs: float = 0.05,
               what: str = "") -> float:
    """Poll ``condition()`` until true; return the seconds it took. Raises ``TimeoutError``."""
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout_secs:
            raise TimeoutError(f"{what or 'condition'} not reached within {timeout_secs:g} s")
        time.sleep(interval_secs)
    return time.perf_counter() - started
