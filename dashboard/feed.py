"""The dashboard's one reader of the change feed: a thread follows the store's feed and hands
each new page to every open event stream, and keeps the last minutes of registrations and
rejections for the rate chart. A thousand open pages thus cost one feed reader, and none of it
touches the projector."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable

from events import CATALOG_TOPIC
from projector import Change, ChangeKind, ProjectionReader
from projector.feed import follow_pages

WINDOW_SECS = 300
"""How far back the rate chart goes."""
BUCKET_SECS = 5
BACKFILL_RECORDS = 20_000
"""At start, the feed of this many last records is read for the chart's history."""
MAX_PENDING_PAGES = 1000
"""Pages a stream may fall behind before it is closed; its page reconnects with Last-Event-ID
and catches up from the store."""

STOP_CHECK_SECS = 0.2
"""How long the feed's thread waits for a commit before it looks whether it is asked to stop: at
most this long a stop waits (the store's reads in between are two small queries)."""

REGISTRATIONS = frozenset({ChangeKind.LAYER_ADDED, ChangeKind.LAYER_REPLACED})

Pages = asyncio.Queue[list[Change] | None]
"""An event stream's pages of the feed, ``None`` once it has fallen too far behind."""


class FeedHub:
    """Follows the feed of the store ``open_store`` opens (on its own thread, from ``start``
    until ``stop``) for the queues of ``subscribe``, on the event loop given to ``start``."""

    def __init__(self, open_store: Callable[[], ProjectionReader]) -> None:
        self._open_store = open_store
        self._subscribers: set[Pages] = set()
        self._events: deque[tuple[float, bool]] = deque()  # (committed, is a rejection)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the feed on a thread of its own, handing each page to the subscribers' queues
        on ``loop`` (the one they are read on). Raises ``RuntimeError`` if started already."""
        if self._thread is not None:
            raise RuntimeError("the dashboard's feed is followed already")
        self._thread = threading.Thread(target=self._run, args=(loop,), name="strata-dashboard-feed",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop following the feed (nothing to do if it was never started)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def subscribe(self) -> Pages:
        """A queue of the pages read from now on (``None`` once it has fallen too far behind)."""
        queue: Pages = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: Pages) -> None:
        self._subscribers.discard(queue)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            store = self._open_store()
        except Exception as exc:  # shown on the page and by /api/stats
            self.error = f"opening the store to read the change feed failed: {exc}"
            return
        try:
            after = (max(0, store.next_offsets().get((CATALOG_TOPIC, 0), 0) - BACKFILL_RECORDS), -1)
            while not self._stop.is_set():
                for page in follow_pages(store, after, timeout_secs=STOP_CHECK_SECS):
                    after = page[-1].cursor
                    self._count(page)
                    loop.call_soon_threadsafe(self._deliver, page)
                    if self._stop.is_set():
                        break
        except Exception as exc:  # shown on the page and by /api/stats
            self.error = f"reading the change feed failed: {exc}"
        finally:
            store.close()

    def _deliver(self, page: list[Change]) -> None:
        for queue in list(self._subscribers):
            if queue.qsize() >= MAX_PENDING_PAGES:
                self._subscribers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(page)

    def _count(self, page: list[Change]) -> None:
        with self._lock:
            for change in page:
                if change.committed_at is None:
                    continue
                if change.kind in REGISTRATIONS or change.kind == ChangeKind.REJECTED:
                    self._events.append((change.committed_at.timestamp(), change.kind == ChangeKind.REJECTED))
            self._trim(time.time())

    def _trim(self, now: float) -> None:
        while self._events and self._events[0][0] < now - WINDOW_SECS:
            self._events.popleft()

    def rates(self) -> list[dict[str, float]]:
        """Registrations/s and rejections/s per ``BUCKET_SECS`` over the last ``WINDOW_SECS``,
        oldest first; each bucket's ``t`` is its end (seconds since the epoch)."""
        now = time.time()
        end = (now // BUCKET_SECS + 1) * BUCKET_SECS
        count = WINDOW_SECS // BUCKET_SECS
        registrations = [0] * count
        rejections = [0] * count
        with self._lock:
            self._trim(now)
            for committed, rejected in self._events:
                index = count - 1 - int((end - committed) // BUCKET_SECS)
                if 0 <= index < count:
                    (rejections if rejected else registrations)[index] += 1
        return [{"t": end - (count - 1 - i) * BUCKET_SECS, "registrations_per_sec": r / BUCKET_SECS,
                 "rejections_per_sec": j / BUCKET_SECS}
                for i, (r, j) in enumerate(zip(registrations, rejections, strict=True))]
