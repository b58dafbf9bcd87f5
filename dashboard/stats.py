"""The dashboard's ``/api/stats``: how far the projection is behind the Kafka log (in records and
in seconds) and the change rates of the feed, measured on a thread of its own with a store
connection of its own, at most once a second whatever the number of pages asking."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from dashboard.feed import BUCKET_SECS, FeedHub
from events import CATALOG_TOPIC
from producers.log_reader import LogProbe
from projector import ProjectionReader

MEASURED_EVERY_SECS = 1.0
"""A measure younger than this is answered again rather than measured anew."""


class StatsProbe:
    """Measures the lag of the store at ``location`` (opened with ``open_store`` on first use)
    behind the catalog topic of the Kafka cluster at ``bootstrap_servers`` (None: the lag is
    unknown, and the stats say why), and reads the change rates from ``feed``."""

    def __init__(self, location: str, open_store: Callable[[], ProjectionReader], feed: FeedHub, *,
                 bootstrap_servers: str | None, kafka_config: Mapping[str, Any] | None) -> None:
        self._location = location
        self._open_store = open_store
        self._feed = feed
        self._bootstrap_servers = bootstrap_servers
        self._kafka_config = kafka_config
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="strata-dashboard-stats")
        self._store: ProjectionReader | None = None
        """Opened on the stats thread by the first measure, used there only."""
        self._probe: LogProbe | None = None
        """Connected to Kafka by the first measure that needs it, used on the stats thread only."""
        self._last: tuple[float, dict[str, Any]] | None = None
        self._lock = asyncio.Lock()

    async def stats(self) -> dict[str, Any]:
        """The projection's lag and the change rates: ``store``, ``store_offset``,
        ``log_end_offset``, ``lag_records``, ``lag_seconds``, ``kafka_error``, ``feed_error``,
        ``open_streams``, ``registrations_per_sec`` and ``rejections_per_sec`` over the last
        minute, ``series`` (``FeedHub.rates``), ``measured_at``. Kafka out of reach is said in
        ``kafka_error``; raises what opening the store raises."""
        async with self._lock:
            if self._last is None or time.monotonic() - self._last[0] >= MEASURED_EVERY_SECS:
                measured = await asyncio.get_running_loop().run_in_executor(self._thread, self._measure)
                self._last = (time.monotonic(), measured)
            return self._last[1]

    def _measure(self) -> dict[str, Any]:
        if self._store is None:
            self._store = self._open_store()
        store_offset = self._store.next_offsets().get((CATALOG_TOPIC, 0), 0)
        stats: dict[str, Any] = {"store": self._location, "store_offset": store_offset,
                                 "log_end_offset": None, "lag_records": None, "lag_seconds": None,
                                 "kafka_error": None, "feed_error": self._feed.error,
                                 "open_streams": self._feed.subscribers}
        if self._bootstrap_servers is None:
            stats["kafka_error"] = "no Kafka cluster given (--bootstrap-servers): the lag is unknown"
        else:
            try:
                self._measure_lag(stats, self._bootstrap_servers)
            except ConnectionError as exc:
                stats["kafka_error"] = str(exc)
        series = self._feed.rates()
        last_minute = series[-60 // BUCKET_SECS:]
        for rate in ("registrations_per_sec", "rejections_per_sec"):
            stats[rate] = sum(bucket[rate] for bucket in last_minute) / len(last_minute)
        stats["series"] = series
        stats["measured_at"] = datetime.now(UTC)
        return stats

    def _measure_lag(self, stats: dict[str, Any], bootstrap_servers: str) -> None:
        """Into ``stats``, as each is measured: the log's end offset, and how far the store is
        behind it, in records and in seconds since the first record it has not folded was
        appended. Raises ``ConnectionError`` if Kafka does not answer."""
        if self._probe is None:
            self._probe = LogProbe(bootstrap_servers, config=self._kafka_config)
        store_offset: int = stats["store_offset"]
        end = self._probe.end_offset(CATALOG_TOPIC, 0)
        stats["log_end_offset"] = end
        stats["lag_records"] = max(0, end - store_offset)
        stats["lag_seconds"] = 0.0
        if end > store_offset:
            appended = self._probe.append_time(CATALOG_TOPIC, 0, store_offset)
            stats["lag_seconds"] = None if appended is None else max(0.0, time.time() - appended)

    def close(self) -> None:
        """Close the store connection and Kafka consumer, once a measure under way is done."""
        store, self._store = self._store, None
        if store is not None:
            self._thread.submit(store.close)
        self._thread.shutdown(wait=True)
        if self._probe is not None:
            self._probe.close()
