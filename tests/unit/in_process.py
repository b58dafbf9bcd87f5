"""A catalog without a broker or Spark: a store, a producer that folds each batch into it at once
as the projector would, and strata's client writing through that producer, so that every
operation's wait returns with the projector's outcome (the unit tier's fixture ``stack``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

import sdk
from commands import Catalog
from events import CATALOG_TOPIC, Event
from producers import Position
from projector import apply_batch
from projector.stores.sqlite import SqliteStore

from .conftest import create, log_record


class FoldingProducer:
    """Appends events to a log of its own and folds each batch into the store at once."""

    def __init__(self, store: SqliteStore, first_offset: int) -> None:
        self.store = store
        self.next_offset = first_offset

    def send(self, events: Sequence[Event]) -> list[Position]:
        records = [log_record(event, offset=self.next_offset + n) for n, event in enumerate(events)]
        self.next_offset += len(events)
        apply_batch(self.store, records)
        return [Position(CATALOG_TOPIC, 0, r.position.offset) for r in records]

    def close(self) -> None:
        pass


class InProcessStack:
    """A store with the dataset ``droid``, and a client and a catalog (``commands.Catalog``, what an
    endpoint serves) writing through a folding producer."""

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.projector = SqliteStore(directory / "store.db")
        self.producer = FoldingProducer(self.projector, 0)
        self.droid = uuid.uuid4()
        self.apply([create(self.droid, "droid")])
        self.client = sdk.CatalogClient("127.0.0.1:1", directory / "store.db", workers=0)
        monkeypatch.setattr(self.client._internal.log, "producer", self.producer)
        self.catalog = Catalog("127.0.0.1:1", directory / "store.db", workers=0)
        """The catalog an endpoint serves, writing through the same producer."""
        monkeypatch.setattr(self.catalog.log, "producer", self.producer)
        self.dataset = self.client.get_dataset("droid")

    def apply(self, events: list[Event]) -> None:
        """Events another producer (a pipeline) wrote, folded."""
        self.producer.send(events)

    def close(self) -> None:
        self.client.close()
        self.catalog.close()
        self.projector.close()
