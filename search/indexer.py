"""Keeping every index's rows equal to what the store says they are.

``Indexer.sync()`` is one pass: for each index the store defines, the segments whose layers
changed since the offset its copy covers (read from the change feed) have their rows read from
their layers again and replaced; an index whose copy is of another definition, or is ahead of
the store (a store restored to an earlier point), or has no copy, is built from every segment.
Copies of indexes the store no longer defines are removed. Each pass reads the store like any
client and writes only the copies, so running it again, or after a crash midway, changes
nothing more than one complete pass would.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from events import CATALOG_TOPIC
from projector import ChangeKind, Dataset, ProjectionReader, SearchIndex, schemas
from projector.feed import FEED_PAGE
from recordings.objects import ObjectStoreConfig
from search import copies, training
from search.rows import index_schema, stored_rows

log = logging.getLogger("strata.search")

SEGMENT_CHANGES = frozenset({ChangeKind.LAYER_ADDED, ChangeKind.LAYER_REPLACED, ChangeKind.LAYER_REMOVED,
                             ChangeKind.SEGMENT_REMOVED})
"""The feed's entries that change a segment's rows."""
SEGMENTS_PER_WRITE = 200
"""A build appends the rows of this many segments at a time, so memory holds no more."""


@dataclass
class Pass:
    """What one pass did, for progress lines and tests."""

    segments_read: int = 0
    rows_written: int = 0
    indexes_built: int = 0
    copies_removed: int = 0


def touched_segments(store: ProjectionReader, dataset_id: uuid.UUID, since: int, until: int,
                     limit: int | None = None) -> set[str] | None:
    """The segments of the dataset whose layers the change feed says changed from log offset
    ``since`` to ``until``; None if there are more than ``limit``."""
    touched: set[str] = set()
    cursor = (since - 1, 1 << 62)
    while page := store.changes(cursor, entry_id=dataset_id, limit=FEED_PAGE):
        for change in page:
            if change.position.offset >= until:
                return touched
            if change.kind in SEGMENT_CHANGES:
                touched.add(change.segment_id)
                if limit is not None and len(touched) > limit:
                    return None
        cursor = page[-1].cursor
    return touched


class Indexer:
    """Keeps the copies under ``root`` (``settings.search_indexes``) of the indexes ``store``
    defines; ``objects``: how ``s3://`` layers are read."""

    def __init__(self, store: ProjectionReader, root: str, objects: ObjectStoreConfig | None = None) -> None:
        self.store = store
        self.root = root
        self.objects = objects or ObjectStoreConfig.resolve()
        self._markers: dict[str, copies.Marker] = {}
        """The marker of each copy this indexer wrote or read, by URL."""

    def sync(self) -> Pass:
        """One pass over every index; returns what it did."""
        done = Pass()
        covered = self.store.next_offsets().get((CATALOG_TOPIC, 0), 0)
        wanted: set[str] = set()
        for dataset in self.store.datasets():
            indexes = self.store.search_indexes(dataset.id)
            for index in indexes:
                url = copies.index_url(self.root, index)
                wanted.add(url)
                self._sync_index(dataset, index, url, covered, done)
        done.copies_removed = self._remove_unwanted(wanted)
        return done

    def _sync_index(self, dataset: Dataset, index: SearchIndex, url: str, covered: int, done: Pass) -> None:
        marker = self._markers.get(url)
        if marker is None:
            found = copies.open_dataset(url)
            marker = copies.newest_marker(found) if found is not None else None
        dataset_schema = schemas.parse(dataset.schema) if dataset.schema else pa.schema([])
        fresh = marker is None or marker.created_offset != index.created_offset or marker.covered > covered
        if fresh:
            touched = [s.segment_id for s in self.store.segments(dataset.id)]
            log.info("dataset %r: building the %s index of %s from %d segments", dataset.name,
                     index.definition.kind, index.column, len(touched))
        else:
            assert marker is not None
            touched = sorted(touched_segments(self.store, dataset.id, marker.covered, covered) or ())
        maintain = not fresh and marker is not None and index.maintained_offset > marker.maintained_offset
        if not fresh and not touched and not maintain:
            return  # its marker stands: searches see in the feed that nothing of it changed since
        try:
            schema = index_schema(index, dataset_schema)
        except LookupError:  # every layer with the column is gone: the index has no rows
            schema = None
        if fresh or touched:
            written = self._write(dataset, index, url, schema, touched, fresh=fresh)
            done.segments_read += len(touched)
            done.rows_written += written
            done.indexes_built += int(fresh)
        if schema is None and copies.open_dataset(url) is None:
            return  # nothing to mark yet: no rows were ever written
        training.keep_trained(url, index, maintain=maintain)
        self._markers[url] = copies.mark(url, index, copies.open_dataset(url).schema, covered)
        if maintain:
            training.clean_up(url, index)

    def _write(self, dataset: Dataset, index: SearchIndex, url: str, schema: pa.Schema | None,
               touched: list[str], *, fresh: bool) -> int:
        """Replace the rows of ``touched`` (all of them if ``fresh``); returns the rows written."""
        if schema is None:
            if copies.open_dataset(url) is not None:
                copies.write_rows(url, index, touched, copies.open_dataset(url).schema.empty_table(),
                                  fresh=fresh)
            return 0
        written = 0
        first = True
        for part, rows in self._rows(dataset.id, index, schema, touched):
            copies.write_rows(url, index, part, rows, fresh=fresh and first)
            first = False
            written += rows.num_rows
        if first:  # no segment: an empty copy, so that the index answers
            copies.write_rows(url, index, [], schema.empty_table(), fresh=fresh)
        return written

    def _rows(self, dataset_id: uuid.UUID, index: SearchIndex, schema: pa.Schema,
              segment_ids: list[str]) -> Iterator[tuple[list[str], pa.Table]]:
        """The rows of ``segment_ids``, a few hundred segments at a time: those segments and their
        rows (none for a segment that no longer exists)."""
        for start in range(0, len(segment_ids), SEGMENTS_PER_WRITE):
            part = segment_ids[start:start + SEGMENTS_PER_WRITE]
            yield part, stored_rows(self.store, index, schema, part, self.objects)

    def _remove_unwanted(self, wanted: set[str]) -> int:
        """Remove the copies of indexes no longer defined (deleted, or of a deleted dataset). Only
        copies of datasets the store knows (live or deleted) are touched: another catalog's
        copies under the same ``STRATA_SEARCH_URL`` are left alone."""
        removed = 0
        for name in copies.listing(self.root):
            if not self._knows(name):
                continue
            directory = copies.child(self.root, name)
            left = copies.listing(directory)
            for copy in (copies.child(directory, c) for c in left if c.endswith(".lance")):
                if copy not in wanted:
                    copies.remove(copy)
                    self._markers.pop(copy, None)
                    removed += 1
            if not any(copies.child(directory, c) in wanted for c in left):
                copies.remove(directory)
        return removed

    def _knows(self, name: str) -> bool:
        """Whether ``name`` is the id of a dataset of this store, live or deleted."""
        try:
            return self.store.dataset(uuid.UUID(name)) is not None
        except ValueError:
            return False
