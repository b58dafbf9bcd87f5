"""What the changelog relay and the Lance mirror share: a daemon thread that follows the store,
reading it like any client, until ``stop()``."""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

from projector import ProjectionReader

Store = TypeVar("Store", bound=ProjectionReader)


class Follower(Generic[Store]):
    """Runs ``_run`` in a daemon thread named ``thread_name``; ``_run`` returns once ``_stop`` is
    set. ``Store``: what it reads the store through (any ``ProjectionReader``, or a backend's own
    class where it needs more)."""

    thread_name = "strata-follower"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_secs: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_secs)

    def _run(self) -> None:
        raise NotImplementedError
