"""The embedded projection store: one SQLite file, written by the projector, read by clients on
the same host (``SqliteStore``, on the database port ``SqliteDatabase``).

WAL mode lets readers poll while the projector writes; clients open the file read-only.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from events import import_extra
from projector.ports import StoreUnavailableError
from projector.stores import sqlite_arrow
from projector.stores.sql import SqlStore
from projector.stores.sql_database import Database
from projector.stores.sql_schema import (
    CLIENT_INDEXES,
    FOLD_INDEXES,
    FORMAT_VERSION,
    SMALL_ROWS,
    TABLES,
    Index,
)

POLL_SECS = 0.001
"""How often a waiting reader checks the file's data version: about 1 ms added to a wait, a few
microseconds of CPU per check."""
WRITER_POLL_SECS = 0.05
"""How often a reader in the process that writes the file checks it: its own process's commits
wake it at once (``_Commits``), so the checks only find another process's (a restore), and the
projector's followers (the changelog relay, the Lance mirror, the snapshotter) do not spend a
tenth of a core checking an idle store every millisecond."""


class _Commits:
    """The commits this process made to one file: a count, and a condition notified at each."""

    def __init__(self) -> None:
        self.count = 0
        self.written_here = False
        """A connection of this process opened the file for writing: its writes are this process's."""
        self.changed = threading.Condition()

    def committed(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()


_commits: dict[Path, _Commits] = {}
_commits_lock = threading.Lock()


def _commits_of(path: Path) -> _Commits:
    with _commits_lock:
        return _commits.setdefault(path.absolute(), _Commits())


class SqliteStore(SqlStore):
    """The projection store on a SQLite file.

    >>> store = SqliteStore(".strata/store.db")  # doctest: +SKIP
    >>> store.next_offsets()  # doctest: +SKIP
    {('strata.catalog', 0): 18}
    """

    def __init__(self, path: str | Path, *, read_only: bool = False, loading: bool = False) -> None:
        self.path = Path(path)
        self._sqlite = SqliteDatabase(self.path, read_only=read_only, loading=loading)
        super().__init__(self._sqlite, loading=loading)

    def finish_loading(self) -> None:
        """End the load of a store opened with ``loading=True``: write its layer table, build
        the indexes only clients read by, and write every commit to the disk from then on."""
        super().finish_loading()
        self._sqlite.finish_loading()


BUSY_TIMEOUT_SECS = 30
"""How long a statement waits for another connection's write transaction to end."""


class SqliteDatabase(Database):
    """A connection to a SQLite file; ``read_only`` for clients, which never write it. Raises
    ``StoreUnavailableError`` if the file cannot be opened (or, read-only, does not exist),
    ``RuntimeError`` for a store of another format.

    ``loading``: a new file that nothing reads until it is loaded (a rebuild's), and that is thrown
    away if the load stops. Its commits are not synced to the disk, and the indexes only clients
    read by (``CLIENT_INDEXES``) are built once, by ``finish_loading``, rather than row by row:
    5% of a commit of registrations. (``SqlStore`` leaves out the layer table meanwhile.)
    """

    def __init__(self, path: Path, *, read_only: bool, loading: bool = False) -> None:
        super().__init__(str(path))
        self.path = path
        self.read_only = read_only
        self._commits = _commits_of(path)
        with self.faults():
            if read_only:
                if not self.path.exists():
                    raise StoreUnavailableError(
                        self.path, "no store at this path; start the stack with 'strata up', or give "
                                   "the store it uses (--store, STRATA_STORE)")
                uri = f"{self.path.absolute().as_uri()}?mode=ro"
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=BUSY_TIMEOUT_SECS)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT_SECS)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={'OFF' if loading else 'NORMAL'}")
            self._conn = conn
            if not read_only:
                self._create_tables(FOLD_INDEXES if loading else FOLD_INDEXES + CLIENT_INDEXES)
                self._commits.written_here = True

    @contextlib.contextmanager
    def faults(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.OperationalError, OSError) as exc:  # OSError: creating the directory
            raise StoreUnavailableError(self.path, str(exc)) from exc

    def finish_loading(self) -> None:
        with self.lock, self.faults():
            self._create_indexes(CLIENT_INDEXES)
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # synced, with FULL
            self._conn.execute("PRAGMA synchronous=NORMAL")

    def _create_indexes(self, indexes: Sequence[Index]) -> None:
        sqlite_utils = import_extra("sqlite_utils", "projector", "writing a SQLite store")
        db = sqlite_utils.Database(self._conn)
        for name, indexed in indexes:
            db[name].create_index(list(indexed), if_not_exists=True)

    def _create_tables(self, indexes: Sequence[Index]) -> None:
        sqlite_utils = import_extra("sqlite_utils", "projector", "writing a SQLite store")
        db = sqlite_utils.Database(self._conn)
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version != FORMAT_VERSION and db.table_names():
            self._conn.close()
            raise RuntimeError(
                f"{self.path} is a store of format {version}, this version of strata writes format "
                f"{FORMAT_VERSION}: rebuild it from the log with 'strata replay' and move the rebuilt "
                "store over it with the projector stopped, or delete it and its checkpoint "
                "(docs/operations.md, 'The store's format')")
        for name, (columns, pk) in TABLES.items():
            if name in SMALL_ROWS:
                types = {str: "TEXT", int: "INTEGER", bytes: "BLOB"}
                definitions = ", ".join(f'"{c}" {types[t]}' for c, t in columns.items())
                key = ", ".join(f'"{c}"' for c in pk)
                self._conn.execute(f"create table if not exists {name} ({definitions}, "
                                   f"primary key ({key})) without rowid")
            else:
                db[name].create(columns, pk=pk, if_not_exists=True)
        self._create_indexes(indexes)
        self._conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")

    def replace_tables(self, theirs: Mapping[tuple[str, int], int], tables: Sequence[str],
                       contents_of: Callable[[str], pa.Table]) -> bool:
        """Through ADBC's SQLite driver in a child process (``sqlite_arrow``), in one write
        transaction: the driver inserts the Arrow columns without a Python object per value (a
        600,000-event store's snapshot is restored in about 10 s instead of 30)."""
        if self.read_only:
            return super().replace_tables(theirs, tables, contents_of)  # refused as any write
        with self.lock:
            return sqlite_arrow.replace_tables(self.path, theirs, tables, contents_of)

    def read_tables(self, statements: Sequence[tuple[str, pa.Schema]]) -> list[pa.Table]:
        """Read through ADBC's SQLite driver in a child process (``sqlite_arrow``), in one read
        transaction: values go from SQLite to Arrow columns without a Python object each (a
        store of 600,000 events is snapshotted in 5 s instead of 9)."""
        return sqlite_arrow.read_tables(self.path, statements)

    @contextlib.contextmanager
    def read_transaction(self) -> Iterator[None]:
        self._conn.execute("begin")
        try:
            yield
        finally:
            self._conn.execute("rollback")

    @contextlib.contextmanager
    def write_transaction(self) -> Iterator[None]:
        # The connection's context rolls the transaction back on any error, so a batch that
        # cannot be written (read-only or full disk) leaves the store exactly as it was.
        with self.lock, self.faults():
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                yield
            self._commits.committed()

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(statement, params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(statement, rows)

    def key_rows(self, keys: list[str]) -> tuple[str, Any]:
        # SQLite's json_each expands one JSON array: about three times faster than
        # ``executemany`` for the 10,000 keys of a large write.
        return "select value from json_each(?)", json.dumps(keys)

    def data_version(self) -> int:
        with self.reading():
            version: int = self._conn.execute("PRAGMA data_version").fetchone()[0]
        return version

    def wait_for_commit(self, version: int, timeout_secs: float) -> int:
        deadline = time.monotonic() + timeout_secs
        commits = self._commits
        poll = WRITER_POLL_SECS if commits.written_here else POLL_SECS
        while True:
            seen = commits.count  # read first: a commit after the check below wakes the wait
            current = self.data_version()
            left = deadline - time.monotonic()
            if current != version or left <= 0:
                return current
            with commits.changed:
                commits.changed.wait_for(lambda: commits.count != seen, min(poll, left))  # noqa: B023

    def close(self) -> None:
        self._conn.close()
