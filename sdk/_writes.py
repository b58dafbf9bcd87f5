"""The writes a client has sent and not yet seen applied.

A bulk write returns once Kafka has acknowledged it. The client's command log remembers the
highest offset written per partition (``commands.Horizon``), the ledger each write's events until
its outcome is known. Before any read, the connection waits until the store has passed those
offsets (read-your-writes), then settles the open writes: the outcomes the projector recorded
are collected, and the refused ones raised as one ``WriteRefusedError``, unless the write's own
operation has already reported them (``RegistrationOperation.wait()`` claims its items).
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from commands import Horizon
from events import Event
from producers import Position
from projector import Outcome, Status


@dataclass(frozen=True)
class WriteOutcome:
    """What the projector decided for one write of this client."""

    what: str
    """The write, as errors name it: ``append of 10000 rows to table 'labels'``."""
    status: Status
    reason: str
    """Why it was refused; empty if it was accepted."""
    position: Position
    """Where the log put the write (its last event, for a write in several parts)."""

    @property
    def accepted(self) -> bool:
        return self.status is Status.ACCEPTED

    def __str__(self) -> str:
        where = f"{self.position.topic}[{self.position.partition}]@{self.position.offset}"
        return f"{self.what} ({where}): {self.reason or self.status.value}"


@dataclass(frozen=True)
class _Write:
    what: str
    events: tuple[Event, ...]
    positions: tuple[Position, ...]

    def outcome(self, recorded: dict[uuid.UUID, Outcome]) -> WriteOutcome:
        """This write's outcome from its events' recorded ones: the first refusal, if any."""
        found: list[Outcome] = []
        for event in self.events:
            outcome = recorded.get(event.event_id)
            if outcome is None:
                # The projection passed the event but recorded no outcome: it was rejected as
                # undecodable, which the SDK's own encoder never produces.
                raise RuntimeError(f"the projector recorded no outcome for event {event.event_id} "
                                   f"({self.what})")
            found.append(outcome)
        refused = next((o for o in found if o.status is not Status.ACCEPTED), found[-1])
        return WriteOutcome(self.what, refused.status, refused.reason, self.positions[-1])


class Ledger:
    """A client's writes whose outcome it has not reported, over the offsets its command log has
    written (``Horizon``); safe to share between threads."""

    def __init__(self, horizon: Horizon) -> None:
        self.horizon = horizon
        self._lock = threading.Lock()
        self._open: dict[int, _Write] = {}
        self._handles = itertools.count()

    def track(self, what: str, events: Sequence[Event], positions: Sequence[Position]) -> int:
        """Keep a write (already in the horizon) open until its outcome is settled; returns its
        handle for ``claim``."""
        with self._lock:
            handle = next(self._handles)
            self._open[handle] = _Write(what, tuple(events), tuple(positions))
            return handle

    def claim(self, handles: Sequence[int]) -> None:
        """The writes of ``handles`` are reported by their operation: settling skips them."""
        with self._lock:
            for handle in handles:
                self._open.pop(handle, None)

    @property
    def settled(self) -> bool:
        """Whether nothing is open and the store is known to have passed every written offset:
        a read need not wait (the check every read makes, so it takes no lock)."""
        return not self._open and self.horizon.reached

    def take_passed(self) -> list[_Write]:
        """Remove and return the open writes the store has passed, in the order they were sent."""
        with self._lock:
            done = [h for h, w in self._open.items() if all(map(self.horizon.has_passed, w.positions))]
            return [self._open.pop(h) for h in done]
