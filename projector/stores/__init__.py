"""The projection store's backends, opened from a location: a file path (SQLite, the embedded
default) or a ``postgresql://`` URL (the store a team shares). A backend's module, and its
driver, is imported only when a location names it: psycopg only for ``postgresql://``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from events import import_extra

if TYPE_CHECKING:
    from projector.stores.sql import SqlStore

POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme(location: str | Path) -> str:
    """``sqlite`` for a path, else the URL's scheme; ``ValueError`` for one strata cannot open."""
    match = _SCHEME.match(str(location))
    if match is None:
        return "sqlite"
    if match[1] in POSTGRES_SCHEMES:
        return "postgresql"
    raise ValueError(f"unknown store scheme {match[1]!r} in {describe(location)!r}: give a file path "
                     f"for a SQLite store or a postgresql://user@host/database URL")


def describe(location: str | Path) -> str:
    """The location, without a password, for messages."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", str(location))


def fault_advice(location: str | Path) -> str:
    """What an operator does about a store that cannot be opened or written, as a sentence."""
    if scheme(location) == "sqlite":
        return f"Make {Path(location).absolute().parent} writable and give it free space"
    return "Check that the PostgreSQL server is up and reachable and that its user may create tables"


def normalize(location: str | Path) -> str:
    """``location`` as a string that means the same from any directory: a path made absolute, a
    URL as it is. ``ValueError`` for a scheme strata cannot open."""
    return str(Path(location).absolute()) if scheme(location) == "sqlite" else str(location)


def open_store(location: str | Path, *, read_only: bool = False) -> SqlStore:
    """The store at ``location``; ``read_only`` for clients, which never write it.

    Raises ``StoreUnavailableError`` if it cannot be opened, ``ValueError`` for a location of an
    unknown kind, ``MissingExtraError`` for a ``postgresql://`` URL without ``strata[postgres]``.
    """
    if scheme(location) == "postgresql":
        import_extra("psycopg", "postgres", "a postgresql:// store")
        from projector.stores.postgres import PostgresStore

        return PostgresStore(str(location), read_only=read_only)
    from projector.stores.sqlite import SqliteStore

    return SqliteStore(location, read_only=read_only)
