"""The datasets' segment tables as the dataset page reads them again and again (a page of rows,
its sort, the next page, the layer choice): each built once per commit of the store, the last
few kept."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pyarrow as pa

from projector import ProjectionReader
from projector.views import dataset_segment_table

KEPT = 4
"""Segment tables kept between reads: the most recently built ones."""

AtPoint = Callable[[ProjectionReader, uuid.UUID, str | None], ProjectionReader]
"""The store as of a point of a dataset (None: now), for ``SegmentTables``."""
Version = tuple[tuple[tuple[str, int], int], ...]
"""The store's next offsets, sorted: what changes with each commit."""


class SegmentTables:
    """Segment tables by dataset and point, each with the store's offsets it was built at; used
    on the store's reading thread only (``StoreReads.run``), so it takes no lock."""

    def __init__(self, at_point: AtPoint, kept: int = KEPT) -> None:
        self._at_point = at_point
        self._kept = kept
        self._tables: dict[tuple[uuid.UUID, str | None], tuple[Version, pa.Table]] = {}

    def table(self, store: ProjectionReader, dataset_id: uuid.UUID, point: str | None) -> pa.Table:
        """The dataset's segment table, now or as of ``point``: the one built before if the store
        has committed nothing since, else built now (``views.dataset_segment_table``). Raises
        what ``at_point`` raises for a point it does not know."""
        key = (dataset_id, point)
        version = tuple(sorted(store.next_offsets().items()))
        kept = self._tables.get(key)
        if kept is None or kept[0] != version:
            table = dataset_segment_table(self._at_point(store, dataset_id, point), dataset_id)
            self._tables.pop(key, None)
            self._tables[key] = kept = (version, table)
            while len(self._tables) > self._kept:
                self._tables.pop(next(iter(self._tables)))
        return kept[1]
