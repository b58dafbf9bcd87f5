"""``python -m projector.stores.sqlite_arrow PATH``: the child of ``read_tables``. It answers
each statement read from stdin (a JSON string per line) with its rows as an Arrow IPC stream
preceded by its length, all in one read transaction, until stdin ends; an error ends it with one
line on stderr and exit code 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc

from events import import_extra
from projector.stores.sqlite_arrow import LENGTH_BYTES


def serve(path: str) -> None:
    """Answer each statement read from stdin (a JSON string per line) with its rows as a framed
    Arrow IPC stream, all in one read transaction, until stdin ends."""
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
            data = cursor.fetch_arrow_table()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, data.schema) as writer:
                writer.write_table(data)
            stream = sink.getvalue()
            sys.stdout.buffer.write(len(stream).to_bytes(LENGTH_BYTES, "big"))
            sys.stdout.buffer.write(stream)
            sys.stdout.buffer.flush()
        conn.rollback()


if __name__ == "__main__":
    try:
        serve(sys.argv[1])
    except Exception as exc:  # the parent raises it as StoreUnavailableError
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
