"""An index's rows as a Lance dataset: where it is, what it covers, and how it changes.

Each index of a column is one Lance dataset, ``<root>/<dataset id>/<column, quoted>.lance``. Only
the follower (``search.follower``) writes it. Its changes (rows of segments deleted, rows
appended, an index trained or optimised) each make a Lance version; the follower ends each of
its passes with a *marker*: an empty version whose transaction properties say which index
definition the rows are of (its ``created_offset``) and the log offset they cover (every record
before it is reflected). A reader opens the newest marked version, so it never sees the rows of a
pass half written, and an index rebuilt from nothing (its directory removed) is the same rows.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from events import import_extra
from projector import SearchIndex

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


def dataset_dir(root: str, dataset_id: uuid.UUID) -> Path:
    """The directory of a dataset's indexes."""
    return Path(root) / str(dataset_id)


def index_url(root: str, index: SearchIndex) -> str:
    """The Lance dataset of ``index``."""
    return str(dataset_dir(root, index.dataset_id) / (urllib.parse.quote(index.column, safe="") + ".lance"))


def open_dataset(url: str, version: int | None = None, session: Any = None) -> Any:
    """The Lance dataset at ``url`` (at ``version``), None if there is none; ``session``: a
    ``lance.Session`` whose caches (an index read once) it shares."""
    if not Path(url).exists():
        return None
    try:
        return lance().dataset(url, version=version, session=session)
    except (ValueError, OSError):
        return None


def versions_state(url: str) -> tuple[int, int] | None:
    """What changes whenever the copy at ``url`` gets a version or is made again from nothing:
    the inode and modification time of its directory of versions. None if there is no copy."""
    try:
        found = (Path(url) / "_versions").stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


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


def write_rows(url: str, index: SearchIndex, replaced: list[str], rows: pa.Table, *, fresh: bool) -> Any:
    """Remove the rows of the segments ``replaced`` and append ``rows``; ``fresh``: start the
    dataset again with ``rows`` alone. Returns the dataset (unmarked)."""
    if open_dataset(url) is None:
        return lance().write_dataset(rows, url, mode="create")
    if fresh:
        return lance().write_dataset(rows, url, mode="overwrite")
    dataset = lance().dataset(url)
    for start in range(0, len(replaced), 500):
        dataset.delete(segment_filter(replaced[start:start + 500]))
    if rows.num_rows:
        dataset = lance().write_dataset(rows, url, mode="append")
    return dataset


def mark(url: str, index: SearchIndex, schema: pa.Schema, covered: int) -> Marker:
    """Mark the dataset's newest version: ``index``'s rows, covering the log before ``covered``."""
    properties = {CREATED_KEY: str(index.created_offset), COVERED_KEY: str(covered),
                  MAINTAINED_KEY: str(index.maintained_offset), COLUMN_KEY: index.column}
    dataset = lance().write_dataset(schema.empty_table(), url, mode="append",
                                    transaction_properties=properties)
    return Marker(dataset.version, index.created_offset, covered, index.maintained_offset)


def remove(path: Path) -> None:
    """Remove an index's (or a dataset's indexes') files."""
    shutil.rmtree(path, ignore_errors=True)
