"""Writes in flight, in the shape of rerun-sdk's registration handles: ``wait()`` blocks until
the projection has passed the write's events and raises what the projector decided for them.
An operation never waited on is settled by the client's next read or ``flush()``, which raise
its refusals instead (see ``sdk._writes``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from commands import Registered, Write
from events import Command, Event
from producers import Position
from projector import Outcome, Status
from sdk._connection import Connection
from sdk._wait import DEFAULT_TIMEOUT_SECS

if TYPE_CHECKING:
    from rerun.catalog import RegistrationResult, SegmentRegistrationResult


@dataclass(frozen=True)
class RegisteredItem:
    """One URI of a registration, with its event and where the log put it."""

    uri: str
    segment_id: str
    event: Event
    position: Position
    handle: int
    """The item's write in the client's ledger."""


class RegistrationOperation:
    """A registration in flight: ``wait()`` for its outcome, or ``iter_results()`` per URI."""

    def __init__(self, internal: Connection, items: list[RegisteredItem]) -> None:
        self._internal = internal
        self._items = items

    @classmethod
    def tracked(cls, internal: Connection, registered: list[Registered]) -> RegistrationOperation:
        """The operation of URIs ``internal``'s command log has registered, each kept open in
        its ledger until the operation (or a read) reports its outcome."""
        items = []
        for item in registered:
            tracked = internal.track(item.write)
            items.append(RegisteredItem(item.uri, item.segment_id, tracked.events[0], tracked.positions[0],
                                        tracked.handle))
        return cls(internal, items)

    @property
    def positions(self) -> list[Position]:
        """Where the log put this registration's events, in request order."""
        return [item.position for item in self._items]

    @property
    def uris(self) -> list[str]:
        """The URIs registered, in request order (a prefix's as it was listed)."""
        return [item.uri for item in self._items]

    @property
    def segment_ids(self) -> list[str]:
        """Each URI's segment id (its recording id), in request order: read from the files before
        anything was sent, so known without waiting for the projection."""
        return [item.segment_id for item in self._items]

    def iter_results(
        self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
    ) -> Iterator[SegmentRegistrationResult]:
        """Wait, then yield ``(uri, segment_id, error)`` for each URI in request order, as
        rerun-sdk's own ``SegmentRegistrationResult``."""
        from rerun.catalog import SegmentRegistrationResult

        self._internal.wait(self.positions, timeout_secs)
        self._internal.ledger.claim([item.handle for item in self._items])
        for item in self._items:
            outcome = self._internal.log.outcome(item.position)
            error = None if outcome.status is Status.ACCEPTED else outcome.reason
            yield SegmentRegistrationResult(item.uri, item.segment_id, error)

    def wait(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> RegistrationResult:
        """Block until the projection has applied every event of this registration.

        Returns the segment ids in request order (rerun-sdk's ``RegistrationResult``). Raises
        ``ValueError`` naming each failed item (the others are registered), and ``TimeoutError``
        (``ProjectionTimeoutError``) saying how far the projection got.

        Examples:
            >>> dataset.register([uri]).wait(timeout_secs=10).segment_ids  # doctest: +SKIP
            ['ILIAD_50aee79f_2023_07_12_20h_55m_08s']
        """
        from rerun.catalog import RegistrationResult

        results = list(self.iter_results(timeout_secs))
        failed = [r for r in results if r.error is not None]
        if failed:
            lines = "\n".join(f"- {r.uri}: {r.error}" for r in failed)
            raise ValueError(f"Registration failed for {len(failed)} of {len(results)} "
                             f"recordings:\n{lines}")
        return RegistrationResult([r.segment_id for r in results])


class Operation:
    """One command in flight: ``wait()`` raises what its outcome was, if it was not accepted."""

    def __init__(self, internal: Connection, event: Event, position: Position, what: str,
                 handle: int) -> None:
        self._internal = internal
        self.event = event
        self.position = position
        """Where the log put the command."""
        self._what = what
        self._handle = handle

    @classmethod
    def submit(cls, internal: Connection, entry_id: uuid.UUID, command: Command, what: str) -> Operation:
        """Send ``command`` on the entry ``entry_id``; ``what`` names it in errors."""
        return cls.send(internal, entry_id, Write(what, (command,)))

    @classmethod
    def send(cls, internal: Connection, entry_id: uuid.UUID, write: Write) -> Operation:
        """Send ``write``, one command on the entry ``entry_id`` (``commands.entries``), kept open
        in the client's ledger until its outcome is reported."""
        [submitted] = internal.submit_tracked(entry_id, [write])
        return cls(internal, submitted.events[0], submitted.positions[0], write.what, submitted.handle)

    def wait(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> Outcome:
        """Block until the projection has applied the command; raise what it decided if it was
        refused (``AlreadyExistsError``, ``NotFoundError``, ``ValueError``), ``TimeoutError``
        (``ProjectionTimeoutError``) if it was not applied in time."""
        self._internal.wait([self.position], timeout_secs)
        self._internal.ledger.claim([self._handle])
        return self._internal.accepted(self.position, self._what)
