"""Following the change feed: the store's ``changes`` read in pages, waiting for commits."""

from __future__ import annotations

import time
from collections.abc import Iterator

from events import CATALOG_TOPIC
from projector import CatalogReader, Change

PAGE = 1000
"""Entries read from the store at a time."""

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


def follow(store: CatalogReader, after: Cursor, *, entry_id: object = None,
           timeout_secs: float | None = None) -> Iterator[Change]:
    """The feed's entries after ``after``, in feed order, each once; then, as the projector commits
    more, those. Ends once ``timeout_secs`` pass with nothing new (``None``: never)."""
    while True:
        version = store.data_version()  # read first: a commit after the read below wakes the wait
        page = store.changes(after, entry_id=entry_id, limit=PAGE)
        if page:
            yield from page
            after = page[-1].cursor
            continue
        if not _wait(store, version, timeout_secs):
            return


def _wait(store: CatalogReader, version: int, timeout_secs: float | None) -> bool:
    """Until the projector commits (True) or ``timeout_secs`` pass (False)."""
    deadline = None if timeout_secs is None else time.monotonic() + timeout_secs
    while True:
        left = 1.0 if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return False
        if store.wait_for_commit(version, left) != version:
            return True
