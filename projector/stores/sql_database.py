"""The database port: what a SQL backend (``projector.stores.sqlite``,
``projector.stores.postgres``) provides to the store's modules, and the reads built on it.

Statements are written once, with ``?`` parameters and quoted column names, in the SQL both
backends speak; a backend supplies its connection and parameter style (``execute``,
``executemany``), how its errors of being unreachable, read-only, full or locked are raised
(``faults``), its read and write transactions, how many rows it writes at once (``upsert_many``),
how a list of keys is passed as one parameter (``key_rows``, ``key_in``, ``statements_in``), and
how a commit wakes waiting readers (``data_version``, ``wait_for_commit``). One connection runs
one statement or transaction at a time, under ``lock``.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa

from projector.stores.sql_schema import insert, upsert

IN_CHUNK = 500
"""Values per ``in (...)`` list: fewer ``?`` than SQLite accepts in one statement."""


class Queries(Protocol):
    """Reads of a store's database that see only committed data and change nothing: what the
    modules reading the store's past (``projector.stores.sql_point``) need of it."""

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """The rows of one statement, each as a dict by column name."""
        ...

    def read_blobs(self, statement: str, params: Sequence[Any]) -> list[bytes]:
        """The one blob column of ``statement``'s rows."""
        ...

    def read_together(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """The rows of each of ``statements``, all as of one commit."""
        ...


OFFSETS = "select topic, partition, next_offset from offsets"
"""A store's offsets: (topic, partition, next offset) rows."""


def ahead_of(theirs: Mapping[tuple[str, int], int], ours: Iterable[Sequence[Any]]) -> bool:
    """Whether a store whose ``OFFSETS`` rows are ``ours`` has applied a record that contents
    with the next offsets ``theirs`` lack: then they must not replace its own."""
    return any(theirs.get((topic, partition), 0) < offset for topic, partition, offset in ours)


class Database(abc.ABC):
    """One connection to a store's database, as a backend provides it. Every method raises
    ``StoreUnavailableError`` (naming ``location``) for a database that cannot be reached, read
    or written, where the backend's ``faults`` is in effect: in ``reading``, in the
    transactions, and in the reads built on them."""

    location: str
    """Where the store is, for messages (a path, or a URL without its password)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.lock = threading.Lock()
        """Held while the connection is in use: by a transaction, or by one read."""

    # -- what a backend provides ------------------------------------------------------------------

    @abc.abstractmethod
    def faults(self) -> contextlib.AbstractContextManager[None]:
        """The backend's errors of being unreachable, read-only, full or locked raised as
        ``StoreUnavailableError`` naming this store."""

    @abc.abstractmethod
    def write_transaction(self) -> contextlib.AbstractContextManager[None]:
        """One transaction that no other writer interleaves with, under ``lock`` and
        ``faults``: committed on success, rolled back on any error. Waiting readers are woken
        once it commits."""

    @abc.abstractmethod
    def read_transaction(self) -> contextlib.AbstractContextManager[None]:
        """A transaction whose reads all see one commit (under ``lock``)."""

    @abc.abstractmethod
    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Runs ``statement`` inside ``write_transaction`` or under ``lock``; returns the cursor."""

    @abc.abstractmethod
    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Runs ``statement`` once per row of ``rows``, inside ``write_transaction``."""

    @abc.abstractmethod
    def key_rows(self, keys: list[str]) -> tuple[str, Any]:
        """A subquery of one text column ``value`` holding ``keys``, and its one parameter."""

    @abc.abstractmethod
    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the store: a cheap check
        (no table is read) of whether anything needs reading again."""

    @abc.abstractmethod
    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        """Block until ``data_version()`` differs from ``version`` or ``timeout_secs`` have passed;
        return the data version."""

    @abc.abstractmethod
    def read_tables(self, statements: Sequence[tuple[str, pa.Schema]]) -> list[pa.Table]:
        """The rows of each statement as an Arrow table of its schema (the statement's columns),
        all as of one commit, read without a Python object per value."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection."""

    # -- what a backend may do its own way ------------------------------------------------------

    def blobs(self, statement: str, params: Sequence[Any]) -> list[bytes]:
        """The one blob column of ``statement``'s rows (under ``lock``)."""
        return [blob for (blob,) in self.execute(statement, params)]

    def upsert_many(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (with distinct keys) into ``table``, replacing rows of the same key."""
        self.executemany(upsert(table), rows)

    def insert_many(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows``, whose keys ``table`` does not hold, into ``table``."""
        self.executemany(insert(table), rows)

    def key_in(self, keys: list[str]) -> tuple[str, Any]:
        """A condition that column ``key`` is one of ``keys``, and its one parameter."""
        subquery, param = self.key_rows(keys)
        return f"key in ({subquery})", param

    def statements_in(self, sql: str, fixed: tuple[Any, ...], values: list[str]
                      ) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """``sql``, whose last condition is ``in ({})``, as statements with their parameters
        that together cover ``values``: chunks of ``?`` that SQLite accepts."""
        for start in range(0, len(values), IN_CHUNK):
            chunk = values[start:start + IN_CHUNK]
            yield sql.format(", ".join("?" * len(chunk))), (*fixed, *chunk)

    # -- reads built on the above ---------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """The connection for a few statements outside a transaction: under ``lock``, its
        errors raised as ``StoreUnavailableError``."""
        with self.lock, self.faults():
            yield

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """The rows of one statement, each as a dict by column name."""
        with self.reading():
            cursor = self.execute(sql, params)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def query_in(self, sql: str, fixed: tuple[Any, ...], values: list[str]) -> list[dict[str, Any]]:
        """``sql`` ending in ``in ({})`` run for ``values`` (see ``statements_in``)."""
        return [row for statement, params in self.statements_in(sql, fixed, values)
                for row in self.query(statement, params)]

    def read_blobs(self, statement: str, params: Sequence[Any]) -> list[bytes]:
        """``blobs`` of one statement, read outside a transaction."""
        with self.reading():
            return self.blobs(statement, params)

    def read_together(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """The rows of each of ``statements``, all as of one commit (one read transaction)."""
        with self.reading(), self.read_transaction():
            return [[tuple(row) for row in self.execute(statement, params)]
                    for statement, params in statements]

    def replace_tables(self, theirs: Mapping[tuple[str, int], int], tables: Sequence[str],
                       contents_of: Callable[[str], pa.Table]) -> bool:
        """In one write transaction: unless the store is ``ahead_of(theirs)``, empty each of
        ``tables`` and insert ``contents_of(table)`` (an Arrow table of its columns); whether it
        did. A backend that writes Arrow columns without Python rows overrides it."""
        with self.write_transaction():
            if ahead_of(theirs, self.execute(OFFSETS).fetchall()):
                return False
            for table in tables:
                self.execute(f"delete from {table}")
                columns = [column.to_pylist() for column in contents_of(table).columns]
                self.executemany(insert(table), list(zip(*columns, strict=True)))
        return True



def as_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``, read by a driver that types columns itself, in ``schema``'s types: a column with
    no value at all may come typed otherwise."""
    return pa.table([column.cast(field.type) if column.null_count < len(column)
                     else pa.nulls(len(column), field.type)
                     for column, field in zip(table.columns, schema, strict=True)], schema=schema)
