"""The catalog's entry writes, one way for every client: each a ``Write`` built from the
caller's arguments after the checks that give the caller its error before anything is sent (the
fold's own name and schema rules), with the words errors name it by. A client sends one and
waits for its outcome (``Catalog.command``), or keeps it open as its own (``sdk``'s operations).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from commands.lance import lance_table
from commands.log import Write
from events import (
    CreateDataset,
    CreateTable,
    DeleteDataset,
    DeleteTable,
    RegisterTable,
    RenameDataset,
    RenameTable,
    SetDefaultBlueprint,
)
from events.names import check_dataset_name, check_table_name
from projector import Table, table_rows
from recordings import is_object_url, local_path


def create_dataset(name: str) -> Write:
    """Create a dataset named ``name``. ``ValueError`` for an invalid name."""
    check_dataset_name(name)
    return Write(f"creating dataset {name!r}", (CreateDataset(name),))


def rename_dataset(name: str) -> Write:
    """Rename a dataset to ``name``. ``ValueError`` for an invalid name."""
    check_dataset_name(name)
    return Write(f"renaming to {name!r}", (RenameDataset(name),))


def delete_dataset(name: str) -> Write:
    """Delete the dataset ``name`` (its hidden datasets with it)."""
    return Write(f"deleting dataset {name!r}", (DeleteDataset(),))


def create_table(name: str, schema: pa.Schema, url: str | None) -> Write:
    """Create an empty table with ``schema``, its Lance copy at ``url`` if given. ``ValueError``
    for an invalid name or schema, or a ``url`` that already holds a Lance dataset."""
    check_table_name(name)
    if not isinstance(schema, pa.Schema):
        raise ValueError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    table_rows.check_schema(schema)
    storage_url = "" if url is None else _lance_copy_url(url)
    command = CreateTable(name, schema.serialize().to_pybytes(), storage_url)
    return Write(f"creating table {name!r}", (command,))


def register_table(name: str, url: str) -> Write:
    """Register the Lance table at a ``file://`` URL, at its current version. ``NotFoundError``
    if there is nothing at the URL, ``ValueError`` if it is not a Lance table or for an invalid
    name, ``MissingExtraError`` without ``strata[lance]``."""
    check_table_name(name)
    lance = lance_table(url)
    schema = lance.schema
    table_rows.check_schema(schema)
    command = RegisterTable(name, url, schema.serialize().to_pybytes(), lance.version)
    return Write(f"registering table {name!r}", (command,))


def rename_table(table: Table, name: str) -> Write:
    """Rename ``table`` to ``name``. ``ValueError`` for an invalid name or the system table."""
    refuse_system(table, f"renamed to {name!r}")
    check_table_name(name)
    return Write(f"renaming table to {name!r}", (RenameTable(name),))


def delete_table(table: Table) -> Write:
    """Delete ``table``, its rows and its hidden blueprint dataset. ``ValueError`` for the system
    table."""
    refuse_system(table, "deleted")
    return Write(f"deleting table {table.name!r}", (DeleteTable(),))


def refuse_system(table: Table, what: str) -> None:
    """``ValueError`` if ``table`` is the catalog's system table, which cannot be ``what``
    (renamed, deleted, written)."""
    if table.system:
        raise ValueError(f"{table.name!r} is the catalog's system table, listing its entries: it "
                         f"cannot be {what}")


def set_default_blueprint(blueprint_name: str | None, segment_table: bool) -> Write:
    """Make ``blueprint_name`` the default blueprint (None: no default) of an entry's recordings,
    or with ``segment_table`` of a dataset's segment table. As in Rerun, the name is not checked
    against the registered blueprints."""
    return Write(f"setting the default blueprint to {blueprint_name!r}",
                 (SetDefaultBlueprint(blueprint_name, segment_table),))


def _lance_copy_url(url: str) -> str:
    """``url`` checked as where a created table's Lance copy may go: a URL, or a local path made
    absolute; a local directory that holds a Lance dataset already is a ``ValueError``."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"url must be a non-empty string (a path, file:// or s3:// URL), got {url!r}")
    if is_object_url(url):
        return url
    path = local_path(url) if url.startswith("file:") else Path(url).absolute()
    if (path / "_versions").is_dir():
        raise ValueError(f"{url} already holds a Lance dataset: register_table() it to read it, or "
                         "give create_table() an empty place for the new table's copy")
    return path.as_uri()
