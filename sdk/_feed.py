"""Following the change feed from where a caller says: now, an offset, or after a change."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from events import CATALOG_TOPIC
from projector import CatalogReader, Change
from projector.store import follow_pages

Cursor = tuple[int, int]
"""A place in the feed, (offset, seq): following it yields the entries after it."""


def start(store: CatalogReader, since: int | Change | None) -> Cursor:
    """The cursor that ``since`` means: ``None``, the end of the feed now (only changes still to
    come); an offset, the changes of the records from that offset on; a ``Change``, the ones after
    it."""
    if since is None:
        return store.next_offsets().get((CATALOG_TOPIC, 0), 0), -1
    if isinstance(since, Change):
        return since.cursor
    if isinstance(since, bool) or not isinstance(since, int) or since < 0:
        raise ValueError(f"since must be a log offset (an int >= 0), a Change or None, got {since!r}")
    return since, -1


def follow(store: CatalogReader, after: Cursor, *, entry_id: uuid.UUID | None = None,
           timeout_secs: float | None = None) -> Iterator[Change]:
    """The feed's entries after ``after``, in feed order, each once; then, as the projector commits
    more, those. Ends once ``timeout_secs`` pass with nothing new (``None``: never)."""
    for page in follow_pages(store, after, entry_id=entry_id, timeout_secs=timeout_secs):
        yield from page
