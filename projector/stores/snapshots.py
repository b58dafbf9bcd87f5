"""Snapshots of the projection: every table of a store as of one commit, as Arrow IPC files beside
a manifest naming the store format and the log offsets the store had folded. A store restored from
one folds only the log after those offsets, so a rebuild costs the size of the state and the
records since, not the whole history. The log stays the only truth: a snapshot is a cache of one
of its prefixes (a rebuild from any snapshot equals a rebuild from offset 0), and one of another
store format is skipped, never converted.

A snapshot is a directory ``snapshot-<offset>`` (``<offset>`` the catalog topic's next offset,
twelve digits) holding ``<table>.arrow`` per table of ``TABLES`` and ``manifest.json``, kept in a
local directory or under an object-store prefix (any pyarrow filesystem, see ``Location``). The
manifest is written last, so a snapshot with a manifest is whole and one without is ignored; a
local snapshot is moreover written beside its final name and renamed into place.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc

from events import CATALOG_TOPIC
from projector.stores.sql import SqlStore
from projector.stores.sql_schema import FORMAT_VERSION

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Location:
    """Where snapshots are kept: ``path`` on the filesystem ``fs``, known to users as ``url``."""

    fs: pafs.FileSystem
    path: str
    url: str

    @classmethod
    def of(cls, where: Location | Path | str) -> Location:
        """``where`` itself, or a local directory as a location."""
        if isinstance(where, Location):
            return where
        path = str(Path(where).absolute())
        return cls(pafs.LocalFileSystem(), path, path)

    def child(self, name: str) -> Location:
        return Location(self.fs, f"{self.path.rstrip('/')}/{name}", f"{self.url.rstrip('/')}/{name}")

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)


def write(store: SqlStore, where: Location | Path | str, *,
          progress: Callable[[int, int], None] | None = None) -> Location:
    """Write a snapshot of ``store`` (one read transaction) under ``where``; returns where it is.
    A snapshot of the same offset already there is kept as it is. ``progress`` is told ``(rows
    written, rows to write)`` once the rows are read and after each table (at once ``(rows,
    rows)`` for a snapshot already there). Raises ``OSError`` if it cannot be written."""
    parent = Location.of(where)
    tables = store.snapshot_tables()
    total, written = sum(data.num_rows for data in tables.values()), 0
    if progress is not None:
        progress(0, total)
    offsets = [list(row) for row in zip(*tables["offsets"].to_pydict().values(), strict=True)]
    end = next((o for t, p, o in offsets if (t, p) == (CATALOG_TOPIC, 0)), 0)
    final = parent.child(f"snapshot-{end:012d}")
    if _is_file(final.child(MANIFEST)):
        if progress is not None:
            progress(total, total)
        return final
    # A local snapshot is written beside its final name, then renamed; an object store has no
    # rename, and its manifest, written last, is what makes it whole.
    target = parent.child(f".{final.path.rsplit('/', 1)[-1]}-{uuid.uuid4().hex}") if parent.local else final
    parent.fs.create_dir(target.path, recursive=True)
    try:
        for table, data in tables.items():
            with parent.fs.open_output_stream(target.child(f"{table}.arrow").path) as sink, \
                    pa.ipc.new_file(sink, data.schema,
                                    options=pa.ipc.IpcWriteOptions(compression="zstd")) as out:
                out.write_table(data)
            written += data.num_rows
            if progress is not None:
                progress(written, total)
        manifest = {"format_version": FORMAT_VERSION, "offsets": offsets,
                    "tables": {table: data.num_rows for table, data in tables.items()},
                    "written_at": datetime.now(UTC).isoformat()}
        with parent.fs.open_output_stream(target.child(MANIFEST).path) as sink:
            sink.write((json.dumps(manifest, indent=2) + "\n").encode())
        if target != final:
            parent.fs.move(target.path, final.path)
    except BaseException:
        if target != final:
            parent.fs.delete_dir(target.path)
        raise
    return final


def _is_file(location: Location) -> bool:
    return bool(location.fs.get_file_info(location.path).type == pafs.FileType.File)


class Snapshot:
    """A snapshot read back: what ``SqlStore.replace_contents`` copies from."""

    def __init__(self, where: Location | Path | str) -> None:
        self.location = Location.of(where)
        self.url = self.location.url
        with self.location.fs.open_input_stream(self.location.child(MANIFEST).path) as source:
            self.manifest: dict[str, Any] = json.loads(source.read())

    def next_offsets(self) -> dict[tuple[str, int], int]:
        return {(t, p): o for t, p, o in self.manifest["offsets"]}

    def contents_of(self, table: str) -> pa.Table:
        with self.location.fs.open_input_file(self.location.child(f"{table}.arrow").path) as source:
            return pa.ipc.open_file(source).read_all()

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        data = self.contents_of(table)
        return list(zip(*(data.column(name).to_pylist() for name in data.column_names), strict=True))


def _candidates(parent: Location) -> Iterator[Location]:
    """The whole snapshots under ``parent``, newest (highest offset) first."""
    found = parent.fs.get_file_info(pafs.FileSelector(parent.path, allow_not_found=True))
    names = sorted((info.base_name for info in found if info.type == pafs.FileType.Directory
                    and info.base_name.startswith("snapshot-")), reverse=True)
    for name in names:
        if _is_file(parent.child(name).child(MANIFEST)):
            yield parent.child(name)


def newest(where: Location | Path | str,
           skipped: Callable[[str], None] = lambda line: None) -> Snapshot | None:
    """The newest snapshot under ``where`` of this store format, or None; each one skipped
    (another format, or unreadable) is reported to ``skipped`` in one line."""
    for location in _candidates(Location.of(where)):
        try:
            snapshot = Snapshot(location)
        except (OSError, ValueError) as exc:
            skipped(f"skipping {location.url}: its manifest cannot be read ({exc})")
            continue
        version = snapshot.manifest.get("format_version")
        if version != FORMAT_VERSION:
            skipped(f"skipping {location.url}: store format {version}, this strata writes {FORMAT_VERSION}")
            continue
        return snapshot
    return None


def restore(store: SqlStore, snapshot: Snapshot) -> None:
    """Make ``store``, which has folded nothing yet, a copy of ``snapshot``."""
    if store.next_offsets():
        raise ValueError(f"{store.location} has folded records already: restore a snapshot into a new store")
    store.replace_contents(snapshot)
