"""Snapshots of the projection: every table of a store as of one commit, as Arrow IPC files beside
a manifest naming the store format and the log offsets the store had folded. A store restored from
one folds only the log after those offsets, so a rebuild costs the size of the state and the
records since, not the whole history. The log stays the only truth: a snapshot is a cache of one
of its prefixes (a rebuild from any snapshot equals a rebuild from offset 0), and one of another
store format is skipped, never converted.

A snapshot is a directory ``snapshot-<offset>`` (``<offset>`` the catalog topic's next offset,
twelve digits) holding ``<table>.arrow`` per table of ``TABLES`` and ``manifest.json``; it is
written beside its final name and renamed into place, so a directory with a manifest is whole.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc

from events import CATALOG_TOPIC
from projector.stores.sql import FORMAT_VERSION, TABLES, SqlStore

MANIFEST = "manifest.json"
_TYPES = {str: pa.string(), int: pa.int64(), bytes: pa.binary()}


def _schema(table: str) -> pa.Schema:
    return pa.schema([(name, _TYPES[kind]) for name, kind in TABLES[table][0].items()])


def write(store: SqlStore, parent: Path) -> Path:
    """Write a snapshot of ``store`` (one read transaction) under ``parent``; returns its
    directory. A snapshot of the same offset already there is kept as it is."""
    rows = store.snapshot_rows()
    offsets = [list(row) for row in rows["offsets"]]
    end = next((o for t, p, o in offsets if (t, p) == (CATALOG_TOPIC, 0)), 0)
    final = parent / f"snapshot-{end:012d}"
    if (final / MANIFEST).exists():
        return final
    parent.mkdir(parents=True, exist_ok=True)
    partial = parent / f".{final.name}-{uuid.uuid4().hex}"
    partial.mkdir()
    try:
        for table, table_rows in rows.items():
            schema = _schema(table)
            columns: list[Sequence[Any]] = (list(zip(*table_rows, strict=True)) if table_rows
                                            else [[] for _ in schema])
            data = pa.table([pa.array(c, field.type) for c, field in zip(columns, schema, strict=True)],
                            schema=schema)
            with pa.OSFile(str(partial / f"{table}.arrow"), "wb") as sink, \
                    pa.ipc.new_file(sink, schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as out:
                out.write_table(data)
        manifest = {"format_version": FORMAT_VERSION, "offsets": offsets,
                    "tables": {table: len(table_rows) for table, table_rows in rows.items()},
                    "written_at": datetime.now(UTC).isoformat()}
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        os.replace(partial, final)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return final


class Snapshot:
    """A snapshot read back: what ``SqlStore.replace_contents`` copies from."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.manifest: dict[str, Any] = json.loads((directory / MANIFEST).read_text())

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.manifest["offsets"]}

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        with pa.memory_map(str(self.directory / f"{table}.arrow")) as source:
            data = pa.ipc.open_file(source).read_all()
        return list(zip(*(data.column(name).to_pylist() for name in data.column_names), strict=True))


def _candidates(parent: Path) -> Iterator[Path]:
    """The whole snapshots under ``parent``, newest (highest offset) first."""
    found = sorted((p for p in parent.glob("snapshot-*") if (p / MANIFEST).exists()), reverse=True)
    yield from found


def newest(parent: Path, skipped: Callable[[str], None] = lambda line: None) -> Snapshot | None:
    """The newest snapshot under ``parent`` of this store format, or None; each one skipped
    (another format, or unreadable) is reported to ``skipped`` in one line."""
    for directory in _candidates(parent) if parent.is_dir() else ():
        try:
            snapshot = Snapshot(directory)
        except (OSError, ValueError) as exc:
            skipped(f"skipping {directory}: its manifest cannot be read ({exc})")
            continue
        version = snapshot.manifest.get("format_version")
        if version != FORMAT_VERSION:
            skipped(f"skipping {directory}: store format {version}, this strata writes {FORMAT_VERSION}")
            continue
        return snapshot
    return None


def restore(store: SqlStore, snapshot: Snapshot) -> None:
    """Make ``store``, which has folded nothing yet, a copy of ``snapshot``."""
    if store.next_offsets():
        raise ValueError(f"{store.location} has folded records already: restore a snapshot into a new store")
    store.replace_contents(snapshot)
