"""The catalog's tables in the client's DataFusion session, looked up live.

Every table entry is reachable in SQL and through ``ctx.catalog(c).schema(s).table(t)``: a plain
name in DataFusion's default catalog and schema (``datafusion.public``), a dotted name as a
virtual hierarchy, as in Rerun (``runs.labels`` is schema ``runs`` of the default catalog,
``lab.runs.labels`` catalog ``lab``). DataFusion asks the providers below each time it plans a
query, so tables created, renamed, written or deleted after the client connected are seen as
they are then, after the client's own writes (reads go through ``Connection.tables``), the system
table ``__entries`` among them. A lookup of
a name that is not there creates nothing a listing would show. What a user registers in the
session (``register_view``, ``register_record_batches``...) is kept beside the entries.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.dataset
from datafusion.catalog import CatalogProvider, CatalogProviderList, SchemaProvider, Table

from projector import Table as TableRecord

DEFAULT_CATALOG = "datafusion"
DEFAULT_SCHEMA = "public"

Path = tuple[str, str, str]


class Connection(Protocol):
    """What the providers read through (``sdk._connection.Connection``)."""

    def tables(self, *, include_hidden: bool = False) -> list[TableRecord]: ...

    def table_data(self, table: TableRecord) -> pa.Table: ...


def sql_path(name: str) -> Path:
    """The (catalog, schema, table) an entry name stands for in SQL."""
    parts = name.split(".")
    if len(parts) == 1:
        return DEFAULT_CATALOG, DEFAULT_SCHEMA, name
    if len(parts) == 2:
        return DEFAULT_CATALOG, parts[0], parts[1]
    catalog, schema, *rest = parts
    return catalog, schema, ".".join(rest)


class _Entries:
    """The live tables by SQL path, and their rows as DataFusion tables (kept per revision)."""

    def __init__(self, internal: Connection) -> None:
        # Weak: the session holds these providers where Python's collector cannot see it, so a
        # strong reference would keep the connection (and its workers) alive forever.
        self._internal = weakref.proxy(internal)
        self._rows: dict[uuid.UUID, tuple[int, Table]] = {}

    def paths(self) -> set[Path]:
        return {sql_path(t.name) for t in self._internal.tables(include_hidden=True)}

    def table(self, path: Path) -> Table | None:
        tables = self._internal.tables(include_hidden=True)
        found = next((t for t in tables if sql_path(t.name) == path), None)
        if found is None:
            return None
        kept = self._rows.get(found.id)
        if kept is None or kept[0] != found.revision or found.system:
            # A pyarrow dataset, not a DataFrame: DataFusion calls this while it plans, where
            # making a DataFrame would start its runtime a second time.
            kept = (found.revision, Table(pyarrow.dataset.dataset(self._internal.table_data(found))))
            self._rows[found.id] = kept
        return kept[1]


class _Schema(SchemaProvider):
    """The second part of dotted entry names (``runs`` of ``lab.runs.labels``), or the default
    ``public``: DataFusion's schema level, holding the tables."""

    def __init__(self, entries: _Entries, catalog: str, name: str) -> None:
        self._entries = entries
        self._catalog = catalog
        self._name = name
        self.registered: dict[str, Any] = {}

    def owner_name(self) -> str | None:
        return None

    def table_names(self) -> set[str]:
        return {t for c, s, t in self._entries.paths() if (c, s) == (self._catalog, self._name)} | set(
            self.registered)

    def table(self, name: str) -> Any:
        registered = self.registered.get(name)
        if registered is not None:
            return registered
        return self._entries.table((self._catalog, self._name, name))

    def register_table(self, name: str, table: Any) -> None:
        self.registered[name] = table

    def deregister_table(self, name: str, cascade: bool = False) -> None:
        self.registered.pop(name, None)

    def table_exist(self, name: str) -> bool:
        return self.table(name) is not None


class _TableNamespace(CatalogProvider):
    """The first part of dotted entry names (``lab`` of ``lab.runs.labels``), and the default
    ``datafusion``: DataFusion's catalog level, holding the second parts (``_Schema``)."""

    def __init__(self, entries: _Entries, name: str) -> None:
        self._entries = entries
        self._name = name
        self._schemas: dict[str, Any] = {}
        self._registered: set[str] = set()

    def schema_names(self) -> set[str]:
        names = {s for c, s, _ in self._entries.paths() if c == self._name} | self._registered
        names |= {n for n, s in self._schemas.items() if isinstance(s, _Schema) and s.registered}
        return names | ({DEFAULT_SCHEMA} if self._name == DEFAULT_CATALOG else set())

    def schema(self, name: str) -> Any:
        if name not in self._schemas:  # a lazy placeholder: listed once it holds something
            self._schemas[name] = _Schema(self._entries, self._name, name)
        return self._schemas[name]

    def register_schema(self, name: str, schema: Any) -> None:
        self._schemas[name] = schema
        self._registered.add(name)

    def deregister_schema(self, name: str, cascade: bool = False) -> None:
        self._schemas.pop(name, None)
        self._registered.discard(name)

    def holds_anything(self) -> bool:
        return bool(self._registered) or any(isinstance(s, _Schema) and s.registered
                                             for s in self._schemas.values())


class TableNamespaces(CatalogProviderList):
    """The namespaces of the session's table names, DataFusion's catalog list: those the
    entries' dotted names make, the default one, and the catalogs the user registers; any other
    name looked up is an empty placeholder that is not listed."""

    def __init__(self, internal: Connection) -> None:
        self._entries = _Entries(internal)
        self._catalogs: dict[str, Any] = {}
        self._registered: set[str] = set()

    def catalog_names(self) -> set[str]:
        names = {DEFAULT_CATALOG} | {c for c, _, _ in self._entries.paths()} | self._registered
        used = {n for n, c in self._catalogs.items() if isinstance(c, _TableNamespace) and c.holds_anything()}
        return names | used

    def catalog(self, name: str) -> Any:
        if name not in self._catalogs:
            self._catalogs[name] = _TableNamespace(self._entries, name)
        return self._catalogs[name]

    def register_catalog(self, name: str, catalog: Any) -> None:
        self._catalogs[name] = catalog
        self._registered.add(name)
