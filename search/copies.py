"""An index's rows as a Lance dataset: where it is, what it covers, and how it changes.

Each index of a column is one Lance dataset, ``<root>/<dataset id>/<column, quoted>.lance``, the
root a local directory or an ``s3://`` prefix (``settings.search_indexes``); an object store is
reached with the AWS variables' settings (``recordings.ObjectStoreConfig``), by Lance and by
pyarrow's filesystem alike. Only the follower (``search.follower``) writes a copy. Its changes
(rows of segments deleted, rows appended, an index trained or optimised) each make a Lance
version; the follower ends each of its passes with a *marker*: an empty version whose
transaction properties say which index definition the rows are of (its ``created_offset``) and
the log offset they cover (every record before it is reflected). A reader opens the newest
marked version, so it never sees the rows of a pass half written, and an index rebuilt from
nothing (its directory removed) is the same rows.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from events import import_extra
from projector import SearchIndex
from recordings import ObjectStoreConfig, is_object_url, object_store, split

CREATED_KEY = "strata.created_offset"
COVERED_KEY = "strata.covered"
MAINTAINED_KEY = "strata.maintained_offset"
COLUMN_KEY = "strata.column"


@dataclass(frozen=True)
class Marker:
    """A marked version: the rows of the index created at ``created_offset``, with every record
    of the log before ``covered`` reflected."""

    version: int
    created_offset: int
    covered: int
    maintained_offset: int


def lance() -> Any:
    """pylance, imported on first use (``MissingExtraError`` without ``strata[lance]``), its own
    log (warnings of its Rust code on standard error) quiet below errors unless ``LANCE_LOG``
    asks for more."""
    os.environ.setdefault("LANCE_LOG", "error")
    return import_extra("lance", "lance", "search indexes")


def child(url: str, name: str) -> str:
    """The URL of ``name`` under the directory or prefix ``url``."""
    return url.rstrip("/") + "/" + name


def index_url(root: str, index: SearchIndex) -> str:
    """The Lance dataset of ``index``."""
    return child(child(root, str(index.dataset_id)), urllib.parse.quote(index.column, safe="") + ".lance")


def _lance_url(url: str) -> str:
    """``url`` as Lance reads it: an object's key is percent-decoded, so a ``%`` of a quoted column
    name is escaped to stay in the key (a local path is taken as it is)."""
    return url.replace("%", "%25") if is_object_url(url) else url


def storage_options(url: str) -> dict[str, str] | None:
    """What Lance needs to reach ``url``: the object store's settings for an ``s3://`` URL."""
    return ObjectStoreConfig.resolve().storage_options() if is_object_url(url) else None


@contextlib.contextmanager
def _files(url: str) -> Iterator[tuple[pafs.FileSystem, str]]:
    """The filesystem ``url`` is on and its path there; an object store's errors said as
    ``recordings`` says them (the URL, the endpoint, what to check)."""
    if not is_object_url(url):
        yield pafs.LocalFileSystem(), str(Path(url).absolute())
        return
    store = object_store(ObjectStoreConfig.resolve())
    bucket, key = split(url)
    with store.errors(url):
        yield store.filesystem, f"{bucket}/{key}".rstrip("/")


def listing(url: str) -> list[str]:
    """The names of the directories (prefixes) directly under ``url``; none if there is none."""
    with _files(url) as (files, path):
        found = files.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(info.base_name for info in found if info.type == pafs.FileType.Directory)


def exists(url: str) -> bool:
    """Whether a copy (its directory of versions) is at ``url``."""
    with _files(child(url, "_versions")) as (files, path):
        return bool(files.get_file_info(path).type != pafs.FileType.NotFound)


def dataset(url: str, version: int | None = None, session: Any = None) -> Any:
    """The Lance dataset at ``url`` (at ``version``, else its newest); raises what Lance raises
    if there is none. ``session``: a ``lance.Session`` whose caches (an index read once) it
    shares."""
    return lance().dataset(_lance_url(url), version=version, session=session,
                           storage_options=storage_options(url))


def open_dataset(url: str, version: int | None = None, session: Any = None) -> Any:
    """The Lance dataset at ``url`` (at ``version``), None if there is none."""
    if not exists(url):
        return None
    try:
        return dataset(url, version, session)
    except (ValueError, OSError):  # removed meanwhile
        return None


def version_state(copy: Any, version: int | None = None) -> tuple[int, str] | None:
    """A version of the copy ``copy`` was opened from (default: the newest it has now) and the id
    of that version's transaction: it changes whenever the copy gets a version, or is made again
    from nothing up to the same version number. None if the copy is gone."""
    try:
        number = copy.latest_version if version is None else version
        transaction = copy.read_transaction(number)
    except (ValueError, OSError):
        return None
    return number, "" if transaction is None else str(transaction.uuid)


def newest_marker(dataset: Any) -> Marker | None:
    """The newest marked version of ``dataset``, None if it has none: the versions are read from
    the newest down (a pass ends with its marker, so it is usually the first)."""
    for version in range(dataset.version, 0, -1):
        try:
            transaction = dataset.read_transaction(version)
        except (ValueError, OSError):  # a version removed by a clean-up: none older is left
            return None
        properties = (transaction.transaction_properties or {}) if transaction is not None else {}
        if COVERED_KEY in properties:
            return Marker(version, int(properties[CREATED_KEY]), int(properties[COVERED_KEY]),
                          int(properties.get(MAINTAINED_KEY, -1)))
    return None


def segment_filter(segment_ids: Sequence[str], *, leaving_out: bool = False) -> str:
    """A Lance filter keeping (or, ``leaving_out``, dropping) the rows of ``segment_ids``."""
    quoted = ", ".join("'" + s.replace("'", "''") + "'" for s in segment_ids)
    return f"rerun_segment_id {'NOT IN' if leaving_out else 'IN'} ({quoted})"


def _write(rows: pa.Table, url: str, mode: str, **options: Any) -> Any:
    return lance().write_dataset(rows, _lance_url(url), mode=mode, storage_options=storage_options(url),
                                 **options)


def write_rows(url: str, index: SearchIndex, replaced: list[str], rows: pa.Table, *, fresh: bool) -> Any:
    """Remove the rows of the segments ``replaced`` and append ``rows``; ``fresh``: start the
    dataset again with ``rows`` alone. Returns the dataset (unmarked)."""
    if open_dataset(url) is None:
        return _write(rows, url, "create")
    if fresh:
        return _write(rows, url, "overwrite")
    found = dataset(url)
    for start in range(0, len(replaced), 500):
        found.delete(segment_filter(replaced[start:start + 500]))
    if rows.num_rows:
        found = _write(rows, url, "append")
    return found


def mark(url: str, index: SearchIndex, schema: pa.Schema, covered: int) -> Marker:
    """Mark the dataset's newest version: ``index``'s rows, covering the log before ``covered``."""
    properties = {CREATED_KEY: str(index.created_offset), COVERED_KEY: str(covered),
                  MAINTAINED_KEY: str(index.maintained_offset), COLUMN_KEY: index.column}
    marked = _write(schema.empty_table(), url, "append", transaction_properties=properties)
    return Marker(marked.version, index.created_offset, covered, index.maintained_offset)


def remove(url: str) -> None:
    """Remove an index's (or a dataset's indexes') files, whatever a crash left of them."""
    with _files(url) as (files, path), contextlib.suppress(FileNotFoundError):
        files.delete_dir(path)
