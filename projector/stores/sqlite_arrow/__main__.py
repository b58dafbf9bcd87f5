"""``python -m projector.stores.sqlite_arrow read|replace PATH``: the child of ``read_tables`` and
``replace_tables``, the only SQLite library of its process to open the store's file. An error
ends it with one line on stderr and exit code 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from events import import_extra
from projector.stores.sql_database import OFFSETS, ahead_of
from projector.stores.sqlite import BUSY_TIMEOUT_SECS
from projector.stores.sqlite_arrow import AHEAD, REPLACED, REPLACING, read_frame, write_frame


def read(path: str) -> None:
    """Answer each statement read from stdin (a JSON string per line) with its rows, all in one
    read transaction, until stdin ends."""
    dbapi = import_extra("adbc_driver_sqlite.dbapi", "projector", "reading a SQLite store into Arrow")
    with dbapi.connect(f"{Path(path).absolute().as_uri()}?mode=ro") as conn, conn.cursor() as cursor:
        for line in sys.stdin.buffer:  # autocommit is off: one transaction
            statement = json.loads(line)
            # One batch per statement: the driver infers each column's type from the rows of its
            # first batch, and a column null in all of them would come back as integers.
            cursor.execute(f"select count(*) from ({statement})")
            rows = cursor.fetchone()[0]
            cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(max(rows, 1))})
            cursor.execute(statement)
            write_frame(sys.stdout.buffer, cursor.fetch_arrow_table())
        conn.rollback()


def replace(path: str) -> None:
    """Read the header (``theirs``: the contents' offsets, ``tables``), then, in one write
    transaction, answer ``AHEAD`` and change nothing if the store has applied more, else answer
    ``REPLACING``, replace each table with the one read next, commit and answer ``REPLACED``."""
    dbapi = import_extra("adbc_driver_sqlite.dbapi", "projector", "writing a SQLite store from Arrow")
    header = json.loads(sys.stdin.buffer.readline())
    theirs = {(t, p): o for t, p, o in header["theirs"]}
    with dbapi.connect(str(Path(path).absolute()), autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_SECS * 1000}")  # as the store's own
        cursor.execute("BEGIN IMMEDIATE")  # closed without COMMIT, the connection rolls it back
        cursor.execute(OFFSETS)
        if ahead_of(theirs, cursor.fetchall()):
            _answer(AHEAD)
            return
        _answer(REPLACING)
        for table in header["tables"]:
            data = read_frame(sys.stdin.buffer)
            if data is None:
                raise EOFError(f"the contents ended before table {table}")
            cursor.execute(f"delete from {table}")
            if data.num_rows:
                cursor.adbc_ingest(table, data, mode="append")
        cursor.execute("COMMIT")
        _answer(REPLACED)


def _answer(line: bytes) -> None:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    try:
        {"read": read, "replace": replace}[sys.argv[1]](sys.argv[2])
    except Exception as exc:  # the parent raises it as StoreUnavailableError
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
