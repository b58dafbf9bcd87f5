"""What the ``strata`` command line writes, in one place: results to stdout (``say``, ``table``),
messages to stderr (``note``), values formatted one way for every command (``size``, ``utc``,
``change_line``), progress bars (``Progress``, drawn with tqdm on stderr only when it is a
terminal and the command was not told ``--quiet``), and a log file for what libraries would
write on the terminal meanwhile (``others_to``: a JVM's start-up lines, say).

With ``cli`` and ``demo``, the one module of ``stack`` that prints; the commands write through it.
tqdm is imported only when a bar is drawn: a command without one does not pay for its import.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm

    from sdk import Change

_drawn: list[tqdm[Any]] = []
"""The bars on the terminal now: a line written meanwhile goes above them."""
_stderr: TextIO | None = None
"""The terminal's stderr while ``others_to`` sends the process's own elsewhere."""


def _errors() -> TextIO:
    return _stderr or sys.stderr


def _write(line: str, stream: TextIO) -> None:
    if not _drawn:
        stream.write(line + "\n")
        stream.flush()
        return
    from tqdm import tqdm

    # The bars are cleared, the line written, the bars drawn again below it, under tqdm's lock
    # (a bar may be updated from another thread); types-tqdm leaves get_lock untyped.
    with tqdm.get_lock():  # type: ignore[no-untyped-call]
        for bar in _drawn:
            bar.clear(nolock=True)
        stream.write(line + "\n")
        stream.flush()
        for bar in _drawn:
            bar.refresh(nolock=True)


def say(line: str = "") -> None:
    """A line of the command's result, on stdout, at once (a reader of a pipe sees it now)."""
    _write(line, sys.stdout)


def note(line: str) -> None:
    """A line about the command's work (what it does, what failed), on stderr."""
    _write(line, _errors())


@contextlib.contextmanager
def others_to(log: Path) -> Iterator[None]:
    """While inside, everything else that writes to this process's stderr (file descriptor 2),
    child processes started meanwhile included, writes to ``log`` (emptied first) instead: a
    JVM's start-up warnings, its loggers. ``note`` and the bars still reach the terminal."""
    global _stderr
    sys.stderr.flush()
    terminal = os.dup(2)
    with open(log, "wb") as sink:
        os.dup2(sink.fileno(), 2)
    _stderr = os.fdopen(os.dup(terminal), "w", buffering=1, encoding=sys.stderr.encoding,
                        errors="backslashreplace")
    try:
        yield
    finally:
        _stderr.flush()
        _stderr.close()
        _stderr = None
        sys.stderr.flush()
        os.dup2(terminal, 2)
        os.close(terminal)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """``rows`` under ``header``, each column as wide as its widest cell, on stdout."""
    cells = [[str(cell) for cell in header], *[[str(cell) for cell in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def size(size_bytes: int) -> str:
    """A byte count for people, in powers of 1000: ``512 B``, ``1.5 KB``, ``2.0 GB``."""
    value = float(size_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def utc(when: datetime) -> str:
    """A time as the listings show it, to the second (``2026-03-03 12:00:00``); the columns say
    UTC, which the catalog's times are."""
    return f"{when:%Y-%m-%d %H:%M:%S}"


def change_line(change: Change) -> str:
    """One change of the feed as ``strata watch`` prints it: log offset, commit time, kind,
    dataset or table, segment/layer and detail, the empty ones left out."""
    where = "/".join(part for part in (change.segment_id, change.layer_name) if part)
    committed = f"{change.committed_at:%H:%M:%S.%f}"[:-3] if change.committed_at else ""
    return "  ".join(part for part in (
        f"{change.position.offset:>8}", committed, f"{change.kind:<21}", change.entry_name or "-", where,
        change.detail) if part).rstrip()


def drawn(*, quiet: bool) -> bool:
    """Whether progress bars are drawn: on a terminal (stderr), unless the command is quiet."""
    return not quiet and _errors().isatty()


class Progress:
    """A progress bar of one kind of work, ``desc`` (``read``, ``folded``...), counted in ``unit``:
    drawn on stderr if ``drawn(quiet=quiet)``, else nothing at all. Called as ``(done, total)``,
    the shape of the progress callbacks of the SDK, of ``spark_streaming.replay.rebuild`` and of
    ``projector.stores.snapshots.write``; ``advance`` counts results one by one instead. Close it
    (or use it in ``with``) to leave the finished bar on the terminal.

    Examples:
        >>> with Progress("read", "recording", quiet=False) as reading:  # doctest: +SKIP
        ...     dataset.register(uris, progress=reading)
    """

    def __init__(self, desc: str, unit: str, *, quiet: bool, total: int | None = None) -> None:
        self._bar: tqdm[Any] | None = None
        if drawn(quiet=quiet):
            from tqdm import tqdm

            self._bar = tqdm(desc=desc, unit=unit, total=total, file=_errors(), leave=True,
                             dynamic_ncols=True)
            _drawn.append(self._bar)

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` (which may grow as work is found) are done."""
        if self._bar is None:
            return
        self.expect(total)
        self._bar.update(done - self._bar.n)

    def expect(self, total: int) -> None:
        """The work is ``total`` in all (known once it is found, or grown)."""
        if self._bar is not None and self._bar.total != total:
            self._bar.total = total
            self._bar.refresh()

    def part(self, first: int, total: int) -> Callable[[int, int], None]:
        """A callback for a part of the work that starts after ``first`` done, of ``total`` in
        all: the part's own ``(done, total)`` counted from there."""
        return lambda done, _: self(first + done, total)

    def advance(self, count: int = 1, *, failed: int = 0) -> None:
        """``count`` more are done; ``failed`` of all so far failed (shown beside the bar)."""
        if self._bar is None:
            return
        if failed:
            self._bar.set_postfix_str(f"{failed} failed", refresh=False)
        self._bar.update(count)

    def close(self) -> None:
        if self._bar is not None:
            _drawn.remove(self._bar)
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
