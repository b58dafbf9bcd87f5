"""A SQLite store's tables read into Arrow through ADBC's SQLite driver, in a child process.

The driver carries a SQLite library of its own, and two SQLite libraries must never have one
database file open in one process: POSIX locks belong to the process, so the driver closing the
file would drop the locks Python's ``sqlite3`` holds on it (a writer's, a reader's), and another
process could then corrupt the store ("multiple copies of SQLite linked into the same
application", https://sqlite.org/howtocorrupt.html). The child opens the file with the driver
only, and answers the statements one at a time, each with its rows as an Arrow IPC stream preceded
by its length (8 bytes, big-endian).

``python -m projector.stores.sqlite_arrow PATH`` reads the statements from its stdin, one JSON
string per line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

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
    child = subprocess.Popen([sys.executable, "-m", __name__, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    tables = []
    try:
        for statement, schema in statements:  # one at a time: the child answers each in turn
            child.stdin.write(json.dumps(statement).encode() + b"\n")
            child.stdin.flush()
            length = child.stdout.read(LENGTH_BYTES)
            if len(length) < LENGTH_BYTES:
                break
            stream = child.stdout.read(int.from_bytes(length, "big"))
            tables.append(as_schema(pa.ipc.open_stream(stream).read_all(), schema))
        child.stdin.close()
    except BrokenPipeError:
        pass  # the child stopped: its error is on its stderr
    error = child.stderr.read().decode(errors="replace").strip()
    if child.wait() != 0 or len(tables) < len(statements):
        said = error.splitlines()[-1] if error else f"exit code {child.returncode}"
        raise StoreUnavailableError(path, f"cannot be read into Arrow: {said}")
    return tables
