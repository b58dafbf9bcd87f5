"""Following the change feed the projector commits with each batch: from now, from an offset or
after a change, in pages, each entry once. The SDK's ``changes()``, ``strata watch``, the
dashboard's event stream and the changelog relay all read it through here."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from events import CATALOG_TOPIC
from projector.model import Change
from projector.ports import ProjectionReader

FEED_PAGE = 1000
"""Change feed entries read from the store at a time."""

Cursor = tuple[int, int]
"""A place in the feed, (offset, seq): following it yields the entries after it."""


def start(store: ProjectionReader, since: int | Change | None) -> Cursor:
    """The cursor that ``since`` means: ``None``, the end of the feed now (only changes still to
    come); an offset, the changes of the records from that offset on; a ``Change``, the ones after
    it. Raises ``ValueError`` for anything else."""
    if since is None:
        return store.next_offsets().get((CATALOG_TOPIC, 0), 0), -1
    if isinstance(since, Change):
        return since.cursor
    if isinstance(since, bool) or not isinstance(since, int) or since < 0:
        raise ValueError(f"since must be a log offset (an int >= 0), a Change or None, got {since!r}")
    return since, -1


def follow_pages(store: ProjectionReader, after: Cursor, *, entry_id: uuid.UUID | None = None,
                 timeout_secs: float | None = None) -> Iterator[list[Change]]:
    """The change feed after the cursor ``after``, in pages in feed order, each entry once; then,
    as the projector commits more, those. Ends once ``timeout_secs`` pass with nothing new
    (``None``: never)."""
    while True:
        version = store.data_version()  # read first: a commit after the read below wakes the wait
        page = store.changes(after, entry_id=entry_id, limit=FEED_PAGE)
        if page:
            yield page
            after = page[-1].cursor
            continue
        deadline = None if timeout_secs is None else time.monotonic() + timeout_secs
        while True:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                return
            if store.wait_for_commit(version, left) != version:
                break


def follow(store: ProjectionReader, after: Cursor, *, entry_id: uuid.UUID | None = None,
           timeout_secs: float | None = None) -> Iterator[Change]:
    """``follow_pages``, one entry at a time."""
    for page in follow_pages(store, after, entry_id=entry_id, timeout_secs=timeout_secs):
        yield from page
