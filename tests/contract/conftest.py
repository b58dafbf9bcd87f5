"""Every test here runs once per store backend: SQLite on a file, PostgreSQL on a database of
the session's server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from projector import open_store
from projector.stores.sql import SqlStore

BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def locate(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """The location of this test's store called ``name``, on the test's backend: a file in
    ``tmp_path``, or a database of its own."""
    if request.param == "sqlite":
        return lambda name="store": str(tmp_path / f"{name}.db")
    server = request.getfixturevalue("postgres")
    databases: dict[str, str] = {}

    def locate_database(name: str = "store") -> str:
        if name not in databases:
            databases[name] = server.create_database()
        return databases[name]

    return locate_database


@pytest.fixture
def open_named(locate: Callable[[str], str]) -> Iterator[Callable[..., SqlStore]]:
    """Opens the store called ``name`` (as many times as asked); all are closed after the test."""
    opened: list[SqlStore] = []

    def open_(name: str = "store", *, read_only: bool = False) -> SqlStore:
        opened.append(open_store(locate(name), read_only=read_only))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


@pytest.fixture
def store(open_named: Callable[..., SqlStore]) -> SqlStore:
    return open_named("store")
