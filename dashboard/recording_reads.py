"""The dashboard's reads inside recordings (a segment page's plots, camera frames and merged
``.rrd``): on threads of their own, so that a file read never holds up the store's reads, and
with their errors answered as HTTP statuses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import ParamSpec, TypeVar

from starlette.exceptions import HTTPException

from events import StrataError

READERS = 2
"""Recordings read at once."""

P = ParamSpec("P")
T = TypeVar("T")


class RecordingReads:
    """``READERS`` threads reading recordings for the routes."""

    def __init__(self) -> None:
        self._threads = ThreadPoolExecutor(READERS, thread_name_prefix="strata-dashboard-recordings")

    async def run(self, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``read(*args, **kwargs)`` on a recordings thread; what it returns.

        Raises ``HTTPException``, with the error's message: 404 for a recording gone since its
        registration (a ``LookupError``), 409 for one changed since (another ``StrataError``),
        503 for object storage out of reach (a ``ConnectionError``), 400 for what the segment
        does not have (a ``ValueError``).
        """
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._threads, partial(read, *args, **kwargs))
        except LookupError as exc:
            raise HTTPException(404, str(exc)) from None
        except ConnectionError as exc:
            raise HTTPException(503, str(exc)) from None
        except StrataError as exc:
            raise HTTPException(409, str(exc)) from None
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None

    def close(self) -> None:
        """Wait for the reads under way, then stop the threads."""
        self._threads.shutdown(wait=True)
