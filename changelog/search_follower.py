"""The follower that keeps the search indexes (``search.indexer``) in the projector's process:
a pass after each commit of the store, until ``stop()``."""

from __future__ import annotations

import logging

from changelog.follower import Follower
from projector import ProjectionReader
from search.indexer import Indexer

log = logging.getLogger("strata.search")


class SearchFollower(Follower[ProjectionReader]):
    """Runs ``Indexer(store, root).sync()`` after every commit of ``store``. A pass that fails (a
    recording gone, a full disk) is said once and tried again at the next commit; the indexes
    stay at their last complete pass meanwhile.

    >>> store = SqliteStore("/data/store.db", read_only=True)  # doctest: +SKIP
    >>> follower = SearchFollower(store, "/data/store.db.search")  # doctest: +SKIP
    >>> follower.start()  # a daemon thread
    """

    thread_name = "strata-search"

    def __init__(self, store: ProjectionReader, root: str) -> None:
        super().__init__(store)
        self.indexer = Indexer(store, root)
        self._failing: str | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            version = self.store.data_version()
            try:
                self.indexer.sync()
                self._failing = None
            except Exception as exc:  # noqa: BLE001 - any fault of a pass: said once, tried at the next commit
                reason = f"{type(exc).__name__}: {exc}"
                if reason != self._failing:
                    log.warning("cannot bring the search indexes up to date (%s); trying again at the next "
                                "commit", reason)
                self._failing = reason
            self.store.wait_for_commit(version, 0.5)
