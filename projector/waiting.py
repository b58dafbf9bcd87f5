"""Waiting, bounded, until a store has passed log positions: how a client reads its own writes.

A position is anything with a ``topic``, a ``partition`` and an ``offset`` (the producer's
``Position``, a ``LogPosition``); the store is any ``ProjectionReader``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

from events import StrataError
from projector.ports import ProjectionReader

SLICE_SECS = 1.0
"""The longest a wait sleeps between two reads of the store's offsets, should a wake-up be lost
(a PostgreSQL listener reconnecting, say)."""


class PositionLike(Protocol):
    """A place in the log: an offset of a topic's partition."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class ProjectionTimeoutError(StrataError, TimeoutError):
    """The projection did not pass the awaited offsets before the deadline.

    ``awaited`` lists the positions waited for, ``reached`` the store's next offset for each of
    their partitions when the wait gave up.
    """

    def __init__(self, message: str, awaited: list[PositionLike],
                 reached: dict[tuple[str, int], int]) -> None:
        super().__init__(message)
        self.awaited = awaited
        self.reached = reached


def wait_for_positions(
    store: ProjectionReader, positions: Iterable[PositionLike], timeout_secs: float | None
) -> None:
    """Block until the store's next offset is past every position (``>``, never ``==``: Kafka
    transactions leave gaps in offsets).

    Reads the store's offsets again each time the projector commits (the store's
    ``wait_for_commit``: SQLite's data version checked every millisecond, PostgreSQL's
    ``LISTEN``), against a monotonic deadline; ``timeout_secs=None`` waits forever. Raises
    ``ProjectionTimeoutError`` naming the awaited positions and how far the store got.

    Examples:
        >>> wait_for_positions(store, producer.send(events), timeout_secs=60)  # doctest: +SKIP
    """
    awaited = sorted(set(positions), key=lambda p: (p.topic, p.partition, p.offset))
    needed: dict[tuple[str, int], int] = {}
    for p in awaited:
        needed[(p.topic, p.partition)] = max(needed.get((p.topic, p.partition), -1), p.offset)
    deadline = None if timeout_secs is None else time.monotonic() + timeout_secs
    version = store.data_version()
    while True:
        reached = store.next_offsets()
        if all(reached.get(key, 0) > offset for key, offset in needed.items()):
            return
        left = SLICE_SECS if deadline is None else min(SLICE_SECS, deadline - time.monotonic())
        if left <= 0:
            behind = ", ".join(
                f"{topic}[{partition}] offset {offset} (store's next offset: "
                f"{reached.get((topic, partition), 0)})"
                for (topic, partition), offset in sorted(needed.items())
                if reached.get((topic, partition), 0) <= offset)
            raise ProjectionTimeoutError(
                f"the projection did not pass {behind} within {timeout_secs:g} s; is the "
                f"projector running (strata up) and reading the same topics?",
                awaited, {key: reached.get(key, 0) for key in needed})
        version = store.wait_for_commit(version, left)
