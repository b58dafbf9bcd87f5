"""The dashboard's reads of the projection store: one read-only connection, used by one thread
only, so that the routes' reads queue behind each other instead of sharing a connection.

A read is a function of the store (``await reads.run(lambda store: store.tags(dataset_id))``):
the store is only ever handed to functions running on that thread, never kept by a route. A read
before ``open()`` or after ``close()`` raises ``StoreNotOpenError``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Concatenate, ParamSpec, TypeVar

from events import StrataError
from projector import ProjectionReader, open_store

P = ParamSpec("P")
T = TypeVar("T")


class StoreNotOpenError(StrataError, RuntimeError):
    """The dashboard's store was read before the app started (its lifespan opens the store) or
    after it stopped."""


class StoreReads:
    """The store at ``location``, opened read-only by ``open()`` on the thread that then runs
    every ``run()``."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="strata-dashboard-read")
        self._store: ProjectionReader | None = None
        self._closed = False

    def open_connection(self) -> ProjectionReader:
        """A read-only connection of its own to the same store (for a thread other than this
        one's: the feed's, the stats'). Raises what ``projector.open_store`` raises."""
        return open_store(self.location, read_only=True)

    async def open(self) -> None:
        """Open the store, on the reading thread. Raises what ``projector.open_store`` raises
        (``StoreUnavailableError`` if it cannot be opened)."""
        if self._closed:
            raise StoreNotOpenError(f"the dashboard's store {self.location} is closed: it does not reopen")
        if self._store is None:
            self._store = await asyncio.get_running_loop().run_in_executor(self._thread, self.open_connection)

    async def run(self, read: Callable[Concatenate[ProjectionReader, P], T], *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """``read(store, *args, **kwargs)`` on the reading thread; what it returns or raises.

        Raises ``StoreNotOpenError`` before ``open()`` or after ``close()``.

        >>> tags = await reads.run(lambda store: store.tags(dataset_id))  # doctest: +SKIP
        """
        store = self._store
        if store is None:
            state = "closed" if self._closed else "not open yet: the app opens it as it starts (its lifespan)"
            raise StoreNotOpenError(f"the dashboard's store {self.location} is {state}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, partial(read, store, *args, **kwargs))

    def close(self) -> None:
        """Close the store on its thread, once the reads queued before are done."""
        store, self._store, self._closed = self._store, None, True
        if store is not None:
            self._thread.submit(store.close)
        self._thread.shutdown(wait=True)
