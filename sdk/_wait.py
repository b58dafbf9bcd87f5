"""Waiting, bounded, for the projection to pass the offsets of our own events."""

from __future__ import annotations

import time
from collections.abc import Iterable

from producers import Position
from projector import SqliteStore
from sdk.errors import ProjectionTimeoutError

DEFAULT_TIMEOUT_SECS = 60.0
"""How long a call waits for the projection to apply its events, unless told otherwise."""
POLL_SECS = 0.001
"""How often the store's data version is checked: about 1 ms added to a wait, a few
microseconds of CPU per check."""


def wait_for_positions(
    store: SqliteStore, positions: Iterable[Position], timeout_secs: float | None
) -> None:
    """Block until the store's next offset is past every position (``>``, never ``==``: Kafka
    transactions leave gaps in offsets).

    Checks the store's data version every millisecond and reads its offsets only when another
    connection has committed since, against a monotonic deadline; ``timeout_secs=None`` waits
    forever. Raises ``ProjectionTimeoutError`` naming the awaited positions and how far the store got.
    """
    awaited = sorted(set(positions))
    needed: dict[tuple[str, int], int] = {}
    for p in awaited:
        needed[(p.topic, p.partition)] = max(needed.get((p.topic, p.partition), -1), p.offset)
    deadline = None if timeout_secs is None else time.monotonic() + timeout_secs
    seen_version = None
    while True:
        version = store.data_version()
        if version != seen_version:
            seen_version = version
            reached = store.next_offsets()
            if all(reached.get(key, 0) > offset for key, offset in needed.items()):
                return
        if deadline is not None and time.monotonic() >= deadline:
            behind = ", ".join(
                f"{topic}[{partition}] offset {offset} (store's next offset: "
                f"{reached.get((topic, partition), 0)})"
                for (topic, partition), offset in sorted(needed.items())
                if reached.get((topic, partition), 0) <= offset)
            raise ProjectionTimeoutError(
                f"the projection did not pass {behind} within {timeout_secs:g} s; is the "
                f"projector running (strata up) and reading the same topics?",
                awaited, {key: reached.get(key, 0) for key in needed})
        time.sleep(POLL_SECS if deadline is None else max(0.0, min(POLL_SECS, deadline - time.monotonic())))
