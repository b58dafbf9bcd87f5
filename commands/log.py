"""The catalog's commands on their way through the log: a write's command events appended in one
batch (the schemas it names defined first, each once), the offsets written, and what the
projector decided for each, read by its place in the log after one wait by log position."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from events import Command, DefineSchema, Event
from producers import EventProducer, Position
from projector import LogPosition, Outcome, ProjectionReader, wait_for_positions

Partition = tuple[str, int]


@dataclass(frozen=True)
class Write:
    """One write: its commands, one event each, and what it is, as errors name it
    (``registering file:///data/ep_1.rrd as layer 'base' of segment 'ep_1'``)."""

    what: str
    commands: tuple[Command, ...]


@dataclass(frozen=True)
class Submitted:
    """A write as the log has it: its events and where they landed."""

    what: str
    events: tuple[Event, ...]
    positions: tuple[Position, ...]


class Horizon:
    """The highest offset written through a log, per partition, and the highest the store is
    known to have passed: what a read after those writes waits for. Safe to share between
    threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: dict[Partition, int] = {}
        self._passed: dict[Partition, int] = {}

    def wrote(self, positions: Sequence[Position]) -> None:
        """Note offsets written (and acknowledged by Kafka)."""
        with self._lock:
            for p in positions:
                key = (p.topic, p.partition)
                if p.offset > self._written.get(key, -1):
                    self._written[key] = p.offset

    def written(self, topic: str, partition: int) -> int | None:
        """The highest offset written in the partition; None if none."""
        with self._lock:
            return self._written.get((topic, partition))

    def passed(self, positions: Sequence[Position]) -> None:
        """The store has passed ``positions``."""
        with self._lock:
            for p in positions:
                key = (p.topic, p.partition)
                self._passed[key] = max(self._passed.get(key, -1), p.offset)

    def has_passed(self, position: Position) -> bool:
        """Whether the store is known to have passed ``position``."""
        return self._passed.get((position.topic, position.partition), -1) >= position.offset

    @property
    def reached(self) -> bool:
        """Whether the store is known to have passed every offset written (the check every read
        makes, so it takes no lock)."""
        passed = self._passed
        return all(passed.get(k, -1) >= o for k, o in list(self._written.items()))

    def pending(self) -> list[Position]:
        """The highest written offset of each partition the store is not known to have passed."""
        with self._lock:
            return [Position(topic, partition, offset)
                    for (topic, partition), offset in self._written.items()
                    if self._passed.get((topic, partition), -1) < offset]


class CommandLog:
    """Where a catalog's commands go (``producer``; None: nowhere, reads only) and how their
    outcomes come back (``store``, read-only). Safe to share between threads: the SDK's client,
    its callers' views of it and an endpoint's calls use one."""

    def __init__(self, producer: EventProducer | None, store: ProjectionReader, producer_id: str) -> None:
        self.producer = producer
        self.store = store
        self.producer_id = producer_id
        self.horizon = Horizon()
        """The offsets written through this log, and how far the store is known to have passed."""
        self._defined: set[str] = set()
        """Schema digests seen defined, in the store or by this log's own events."""

    def submit(self, entry_id: uuid.UUID, writes: Sequence[Write], *,
               schemas: Sequence[DefineSchema] = ()) -> list[Submitted]:
        """Append ``writes``, commands on the entry ``entry_id``, to the log in order, in one batch,
        after the definitions of ``schemas`` (the schemas the writes name by reference) that
        neither this log defined before nor the store has, each once; their positions once Kafka
        has them all. Raises ``DeliveryError`` if Kafka does not acknowledge them in time."""
        if self.producer is None:
            raise RuntimeError("a command log without a producer cannot write")
        undefined = self._undefined(schemas)
        definitions = [self._event(entry_id, definition) for definition in undefined]
        events = [[self._event(entry_id, command) for command in write.commands] for write in writes]
        positions = self.producer.send([*definitions, *(e for group in events for e in group)])
        self.horizon.wrote(positions)
        self._defined.update(definition.sha256 for definition in undefined)
        submitted = []
        at = len(definitions)
        for write, group in zip(writes, events, strict=True):
            submitted.append(Submitted(write.what, tuple(group), tuple(positions[at:at + len(group)])))
            at += len(group)
        return submitted

    def wait(self, positions: Sequence[Position], timeout_secs: float | None) -> None:
        """Block until the projection has passed ``positions`` (``ProjectionTimeoutError`` if it
        does not in time, saying how far it got)."""
        wait_for_positions(self.store, positions, timeout_secs)
        self.horizon.passed(positions)

    def outcome(self, position: Position) -> Outcome:
        """What the projector decided for the event at ``position``, which it has passed.
        ``RuntimeError`` if it recorded nothing there: the record was undecodable, which
        strata's own encoder never produces."""
        outcome = self.store.outcome_at(LogPosition(position.topic, position.partition, position.offset))
        if outcome is None:
            raise RuntimeError(f"the projector recorded no outcome at {position.topic}[{position.partition}]"
                               f"@{position.offset}")
        return outcome

    def close(self) -> None:
        """Deliver what is queued and let the producer go."""
        if self.producer is not None:
            self.producer.close()

    def _event(self, entry_id: uuid.UUID, command: Command) -> Event:
        return Event(entry_id=entry_id, command=command, producer_id=self.producer_id)

    def _undefined(self, schemas: Sequence[DefineSchema]) -> list[DefineSchema]:
        """Of ``schemas``, each digest once, those neither in the store nor defined earlier through
        this log (its definitions are in the log before anything it produces next), in the
        given order."""
        candidates: dict[str, DefineSchema] = {}
        for definition in schemas:
            if definition.sha256 not in self._defined:
                candidates.setdefault(definition.sha256, definition)
        if not candidates:
            return []
        stored = set(self.store.schemas(list(candidates)))
        self._defined.update(stored)
        return [d for digest, d in candidates.items() if digest not in stored]
