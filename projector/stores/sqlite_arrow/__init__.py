"""A SQLite store's tables read into Arrow and written from it through ADBC's SQLite driver, in
a child process.

The driver carries a SQLite library of its own, and two SQLite libraries must never have one
database file open in one process: POSIX locks belong to the process, so the driver closing the
file would drop the locks Python's ``sqlite3`` holds on it (a writer's, a reader's), and another
process could then corrupt the store ("multiple copies of SQLite linked into the same
application", https://sqlite.org/howtocorrupt.html). The child opens the file with the driver
only; tables cross the pipes as Arrow IPC streams, each preceded by its length (8 bytes,
big-endian).

``python -m projector.stores.sqlite_arrow read PATH`` answers the statements on its stdin (one JSON
string per line) one at a time; ``... replace PATH`` replaces the store's tables with those it is
sent (``replace_tables``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.ipc

from projector.ports import StoreUnavailableError
from projector.stores.sql_database import as_schema

LENGTH_BYTES = 8
"""The length of each stream, big-endian, before it."""


def read_tables(path: Path, statements: Sequence[tuple[str, pa.Schema]]) -> list[pa.Table]:
    """The rows of each statement on the SQLite file ``path`` as an Arrow table of its schema,
    all as of one commit (one read transaction, in a child process). Raises
    ``StoreUnavailableError`` if the child cannot read them."""
    child = _start("read", path)
    assert child.stdin is not None and child.stdout is not None
    tables = []
    try:
        for statement, schema in statements:  # one at a time: the child answers each in turn
            child.stdin.write(json.dumps(statement).encode() + b"\n")
            child.stdin.flush()
            data = read_frame(child.stdout)
            if data is None:
                break
            tables.append(as_schema(data, schema))
        child.stdin.close()
    except BrokenPipeError:
        pass  # the child stopped: its error is on its stderr
    _finish(child, path, "read into Arrow", done=len(tables) == len(statements))
    return tables


def replace_tables(path: Path, theirs: Mapping[tuple[str, int], int], tables: Sequence[str],
                   contents_of: Callable[[str], pa.Table]) -> bool:
    """``Database.replace_tables`` on the SQLite file ``path``, in a child process: in one
    ``BEGIN IMMEDIATE`` transaction, unless the store is ahead of ``theirs``, each table is
    emptied and the driver inserts ``contents_of(table)`` from its Arrow columns."""
    child = _start("replace", path)
    assert child.stdin is not None and child.stdout is not None
    verdict = b""
    try:
        header = {"theirs": [[t, p, o] for (t, p), o in theirs.items()], "tables": list(tables)}
        child.stdin.write(json.dumps(header).encode() + b"\n")
        child.stdin.flush()
        verdict = child.stdout.readline()
        if verdict == REPLACING:
            for table in tables:
                write_frame(child.stdin, contents_of(table))
        child.stdin.close()
        replaced = verdict == REPLACING and child.stdout.readline() == REPLACED
    except BrokenPipeError:
        replaced = False  # the child stopped: its error is on its stderr
    except BaseException:
        child.kill()  # a transaction never committed changes nothing
        child.wait()
        raise
    _finish(child, path, "replaced from Arrow", done=replaced or verdict == AHEAD)
    return replaced


REPLACING, AHEAD, REPLACED = b"replacing\n", b"ahead\n", b"replaced\n"
"""The child's answers to ``replace``: it goes on (then ``REPLACED`` once committed), or it has
applied more than the contents hold and changes nothing."""


def write_frame(sink: IO[bytes], data: pa.Table) -> None:
    """``data`` as an Arrow IPC stream, preceded by its length."""
    buffer = pa.BufferOutputStream()
    with pa.ipc.new_stream(buffer, data.schema) as writer:
        writer.write_table(data)
    stream = buffer.getvalue()
    sink.write(len(stream).to_bytes(LENGTH_BYTES, "big"))
    sink.write(stream)
    sink.flush()


def read_frame(source: IO[bytes]) -> pa.Table | None:
    """The table ``write_frame`` wrote; None at the end of ``source``."""
    length = source.read(LENGTH_BYTES)
    if len(length) < LENGTH_BYTES:
        return None
    return pa.ipc.open_stream(source.read(int.from_bytes(length, "big"))).read_all()


def _start(mode: str, path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", __name__, mode, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _finish(child: subprocess.Popen[bytes], path: Path, what: str, *, done: bool) -> None:
    """Wait for ``child``; ``StoreUnavailableError`` with its last line of stderr unless it ended
    well and ``done``."""
    assert child.stderr is not None
    error = child.stderr.read().decode(errors="replace").strip()
    if child.wait() != 0 or not done:
        said = error.splitlines()[-1] if error else f"exit code {child.returncode}"
        raise StoreUnavailableError(path, f"cannot be {what}: {said}")
