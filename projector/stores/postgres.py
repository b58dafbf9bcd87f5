"""The shared projection store: a PostgreSQL database that the projector writes and clients on
any host read (psycopg 3).

The projector's commit takes an exclusive lock on the offsets table for its transaction and
checks the stored offsets under it, as SQLite's ``BEGIN IMMEDIATE`` does; readers are never
blocked (they see the last committed state). Each commit sends a ``NOTIFY`` that a client's
listening connection turns into a new data version, so a waiting client wakes when the projector
commits instead of polling.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
import pyarrow as pa
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from events import import_extra
from projector.ports import StoreUnavailableError
from projector.stores.sql import SqlStore
from projector.stores.sql_database import Database, as_schema
from projector.stores.sql_schema import FORMAT_VERSION, INDEXES, TABLES, names, upsert

CHANNEL = "strata_commits"
"""The channel each commit notifies."""
CONNECT_TIMEOUT_SECS = 10
"""How long opening a connection may take, unless the URL says (``connect_timeout``)."""
_TYPES = {str: 'text collate "C"', int: "bigint", bytes: "bytea"}
"""Text compares by code point, as in SQLite, so both backends list rows in the same order."""
_COPY_TYPES = {str: "text", int: "int8", bytes: "bytea"}
"""The types of the values of a binary COPY, by Python type."""
_COPY_ROWS = 1000
"""From this many rows, an upsert goes through COPY (a replay's batches), below it row by row
(the live projector's small batches)."""
_SCHEMA_LOCK = 0x5374726174
"""The advisory lock under which the tables are created, so two starting projectors do not race."""


def location(url: str) -> str:
    """``url`` without its password, for messages."""
    params = conninfo_to_dict(url)
    user = f"{params['user']}@" if "user" in params else ""
    port = f":{params['port']}" if "port" in params else ""
    return f"postgresql://{user}{params.get('host', '')}{port}/{params.get('dbname', '')}"


@functools.cache
def _pg(statement: str) -> str:
    return statement.replace("?", "%s")


class PostgresStore(SqlStore):
    """The projection store in a PostgreSQL database, named by a ``postgresql://`` URL (libpq's
    URL or key=value form: ``sslmode``, ``sslrootcert``, ``password`` and the ``PG*`` environment
    variables work as for any libpq client).

    >>> store = PostgresStore("postgresql://strata@db.example/strata", read_only=True)  # doctest: +SKIP
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        super().__init__(PostgresDatabase(url, read_only=read_only))


class PostgresDatabase(Database):
    """A connection to a PostgreSQL database; ``read_only`` for clients, which never write it.
    Raises ``StoreUnavailableError`` if the server cannot be reached or (read-only) holds no store
    of this format, ``RuntimeError`` if it holds a store of another format."""

    def __init__(self, url: str, *, read_only: bool) -> None:
        super().__init__(location(url))
        params = conninfo_to_dict(url)
        params.setdefault("connect_timeout", CONNECT_TIMEOUT_SECS)
        if read_only:
            params["options"] = f"{params.get('options', '')} -c default_transaction_read_only=on".strip()
        self._conninfo = make_conninfo("", **params)
        self._version = 0
        self._changed = threading.Condition()
        self._listening = threading.Event()
        self._listener: threading.Thread | None = None
        self._listen_error: str | None = None
        self._closed = False
        self._conn = self._connect()
        if read_only:
            self._check_format()
        else:
            self._create_tables()

    def _connect(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailableError(self.location, _one_line(exc)) from exc

    @contextlib.contextmanager
    def faults(self) -> Iterator[None]:
        if self._conn.broken:  # the server restarted or the network dropped: connect again
            self._conn = self._connect()
        try:
            yield
        except (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction) as exc:
            raise StoreUnavailableError(self.location, _one_line(exc)) from exc

    def _create_tables(self) -> None:
        with self.lock, self.faults(), self._conn.transaction():
            self._conn.execute("select pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self._conn.execute("create table if not exists store_format (version integer not null)")
            stored = self._conn.execute("select version from store_format").fetchone()
            if stored is not None and stored[0] != FORMAT_VERSION:
                raise RuntimeError(
                    f"{self.location} is a store of format {stored[0]}, this version of strata writes "
                    f"format {FORMAT_VERSION}: rebuild it from the log by starting the projector on an empty "
                    "database, its checkpoint deleted (docs/operations.md, 'The store's format')")
            for name, (columns, key) in TABLES.items():
                definitions = [f"{names([c])} {_TYPES[t]}" for c, t in columns.items()]
                self._conn.execute(f"create table if not exists {name} "
                                   f"({', '.join(definitions)}, primary key ({names(key)}))")
            for name, indexed in INDEXES:
                self._conn.execute(f"create index if not exists {name}_{'_'.join(indexed)} on {name} "
                                   f"({names(indexed)})")
            if stored is None:
                self._conn.execute("insert into store_format (version) values (%s)", (FORMAT_VERSION,))

    def _check_format(self) -> None:
        with self.reading():
            found = self._conn.execute("select to_regclass('store_format') is not null").fetchone()
            stored = found and found[0] and self._conn.execute("select version from store_format").fetchone()
        if not stored:
            raise StoreUnavailableError(
                self.location, "no strata store in this database yet: start the projector on it "
                               "(strata up --store URL)")
        if stored[0] != FORMAT_VERSION:
            raise StoreUnavailableError(
                self.location, f"a store of format {stored[0]}, this version of strata reads format "
                               f"{FORMAT_VERSION}: rebuild it from the log by starting the projector on an "
                               "empty database (docs/operations.md, 'The store's format')")

    def read_tables(self, statements: Sequence[tuple[str, pa.Schema]]) -> list[pa.Table]:
        """Read through ADBC's PostgreSQL driver (binary COPY) on a connection of its own, in one
        repeatable-read transaction: values go from the server to Arrow columns without a Python
        object each."""
        dbapi = import_extra("adbc_driver_postgresql.dbapi", "postgres", "reading a PostgreSQL store")
        try:
            with contextlib.closing(dbapi.connect(self._conninfo)) as conn, \
                    contextlib.closing(conn.cursor()) as cursor:
                # Autocommit is off: the driver has begun the transaction this sets.
                cursor.execute("set transaction isolation level repeatable read, read only")
                tables = []
                for statement, schema in statements:
                    cursor.execute(statement)
                    tables.append(as_schema(cursor.fetch_arrow_table(), schema))
                conn.rollback()
                return tables
        except (dbapi.Error, OSError) as exc:  # OSError: from the Arrow stream it reads
            raise StoreUnavailableError(self.location, _one_line(exc)) from exc

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[None]:
        with self._conn.transaction():
            self._conn.execute("set transaction isolation level repeatable read, read only")
            yield

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[None]:
        with self.lock, self.faults(), self._conn.transaction():
            # EXCLUSIVE blocks other writers of the store, not its readers.
            self._conn.execute("lock table offsets in exclusive mode")
            yield
            self._conn.execute(f"notify {CHANNEL}")

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(_pg(statement), params)

    def blobs(self, statement: str, params: Sequence[Any]) -> list[bytes]:
        # Binary results: the chunks arrive as they are, not as hex text to decode.
        return [blob for (blob,) in self._conn.execute(_pg(statement), params, binary=True)]

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_pg(statement), rows)

    def upsert_many(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) < _COPY_ROWS:
            super().upsert_many(table, rows)
            return
        # Many rows (a replay's batch): COPY them into a temporary table, then upsert from it in
        # one statement, instead of one statement per row.
        staging = f"staging_{table}"
        self._conn.execute(f"create temporary table if not exists {staging} "
                           f"(like {table}) on commit delete rows")
        self._copy(staging, table, rows)
        self._conn.execute(upsert(table, staging))

    def insert_many(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) < _COPY_ROWS:
            super().insert_many(table, rows)
            return
        # Many new rows: COPY them into the table itself. Measured on 60,000 registrations (in
        # batches of 20,000): the change feed's 120,000 rows in 1.2 s against 2.2 s through a
        # staging table, the segments' first versions in 0.7 s against 1.7 s with executemany.
        self._copy(table, table, rows)

    def _copy(self, target: str, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """COPY ``rows`` of ``table`` (in ``TABLES`` order) into ``target``, in PostgreSQL's binary
        format: values cross as they are stored, bytes without the text format's escaping."""
        columns = TABLES[table][0]
        with self._conn.cursor().copy(f"copy {target} ({names(columns)}) from stdin (format binary)") as copy:
            copy.set_types([_COPY_TYPES[kind] for kind in columns.values()])
            for row in rows:
                copy.write_row(row)

    def statements_in(self, sql: str, fixed: tuple[Any, ...], values: list[str]
                       ) -> Iterator[tuple[str, tuple[Any, ...]]]:
        # One statement with one array: chunks of 500 would each scan what an index condition
        # on the other columns selects, the whole dataset for a batch's segments.
        yield sql.replace("in ({})", "= any(?::text[])"), (*fixed, values)

    def key_rows(self, keys: list[str]) -> tuple[str, Any]:
        return "select unnest(?::text[]) as value", keys

    def key_in(self, keys: list[str]) -> tuple[str, Any]:
        # An index condition, whatever the statistics say: as a semi-join with the unnested array,
        # a planner that thought table_keys small once took 105 s for 20,000 keys of an upsert.
        return "key = any(?::text[])", keys

    # -- waking readers on commits ------------------------------------------------------------

    def data_version(self) -> int:
        if self._listener is None:
            with self._changed:
                if self._listener is None:
                    self._listener = threading.Thread(target=self._listen, name="strata-store-listener",
                                                      daemon=True)
                    self._listener.start()
        if not self._listening.wait(CONNECT_TIMEOUT_SECS + 1):
            raise StoreUnavailableError(self.location, f"cannot listen for commits: {self._listen_error}")
        with self._changed:
            return self._version

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        with self._changed:
            self._changed.wait_for(lambda: self._version != version, timeout_secs)
            return self._version

    def _bump(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    def _listen(self) -> None:
        """Turns the channel's notifications into data versions, connecting again after a drop
        (and then counting a version, since commits may have been missed meanwhile)."""
        while not self._closed:
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(f"listen {CHANNEL}")
                    self._bump()
                    self._listening.set()
                    while not self._closed:
                        for _ in conn.notifies(timeout=0.5):
                            self._bump()
            except psycopg.Error as exc:
                self._listen_error = _one_line(exc)
                self._bump()
                if not self._closed:
                    time.sleep(0.5)

    def close(self) -> None:
        self._closed = True
        self._conn.close()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
