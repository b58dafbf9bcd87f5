"""The one internal connection that a client, its entries, selections and operations share, as
Rerun's entries share one ``_internal``: the catalog session of ``commands`` (the command log, the
store reader, the workers, the wait by log position, outcomes as errors), with the client's open
writes (read-your-writes, refusals raised by its next read) and the DataFusion session.

Every other module of the SDK talks to Kafka and the store through this object's public methods;
every write goes through ``submit``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa

from commands import Catalog, Submitted, Write
from commands.catalog import DEFAULT_TIMEOUT_SECS, no_kafka
from events import DefineSchema, Event
from producers import Position
from projector import ProjectionReader
from recordings import ObjectStoreSettings
from sdk._sql import TableNamespaces
from sdk._writes import Ledger, WriteOutcome
from sdk.errors import WriteRefusedError

__all__ = ["Connection", "Tracked", "no_kafka"]


@dataclass(frozen=True)
class Tracked:
    """A write as the log has it: its events, where they landed, and its handle in the client's
    ledger (``ledger.claim`` it once its operation reports its outcome)."""

    what: str
    events: tuple[Event, ...]
    positions: tuple[Position, ...]
    handle: int


class Connection(Catalog):
    """A client's connection to the catalog: a ``commands.Catalog`` (see ``CatalogClient`` for the
    arguments) whose reads first settle the client's open writes, raising their refusals."""

    def __init__(
        self,
        bootstrap_servers: str | None,
        store: str | Path,
        *,
        kafka_config: Mapping[str, Any] | None,
        producer_id: str | None,
        delivery_timeout_secs: float,
        object_store_config: ObjectStoreSettings,
        workers: int | None,
    ) -> None:
        super().__init__(bootstrap_servers, store, kafka_config=kafka_config, producer_id=producer_id,
                         delivery_timeout_secs=delivery_timeout_secs,
                         object_store_config=object_store_config, workers=workers)
        self.catalog: Any = None
        """The ``CatalogClient`` this connection belongs to, as ``Entry.catalog`` returns it."""
        self.ledger = Ledger(self.log.horizon)
        """This client's writes whose outcome it has not reported."""
        self._ctx = datafusion.SessionContext()
        self._ctx.register_catalog_provider_list(TableNamespaces(self))

    def close(self, *, flush: bool = True) -> None:
        """Settle this client's writes (``settle``) unless told not to, then release the
        workers, the producer and the store (not for a view ``at`` a point: they are its
        client's)."""
        if self.shared:
            return
        try:
            if flush and not self.ledger.settled:
                self.settle(DEFAULT_TIMEOUT_SECS)
        finally:
            super().close()

    def wait_for_store(self) -> ProjectionReader:
        """``Catalog.wait_for_store``, once this client's open writes are settled (``settle``:
        raises ``WriteRefusedError`` for the refused ones)."""
        if not self.ledger.settled:
            self.settle(DEFAULT_TIMEOUT_SECS)
        return super().wait_for_store()

    # -- writes -------------------------------------------------------------------------------

    def submit_tracked(self, entry_id: uuid.UUID, writes: Sequence[Write], *,
                       schemas: Sequence[DefineSchema] = ()) -> list[Tracked]:
        """``Catalog.submit``, each write kept open until its outcome is settled by a read,
        ``settle`` or its operation."""
        return [self.track(submitted) for submitted in self.submit(entry_id, writes, schemas=schemas)]

    def track(self, submitted: Submitted) -> Tracked:
        """Keep a write of this connection's log open in its ledger until its outcome is
        settled."""
        handle = self.ledger.track(submitted.what, submitted.events, submitted.positions)
        return Tracked(submitted.what, submitted.events, submitted.positions, handle)

    def settle(self, timeout_secs: float | None) -> list[WriteOutcome]:
        """Wait until the projection has passed every write of this client, then collect the
        outcomes of its open writes, in the order they were sent. Raises ``WriteRefusedError``
        naming the refused ones (the others are applied, and none is reported twice),
        ``ProjectionTimeoutError`` if the projection does not get there in time (the writes
        stay open)."""
        pending = self.log.horizon.pending()
        if pending:
            self.wait(pending, timeout_secs)
        writes = self.ledger.take_passed()
        if not writes:
            return []
        recorded = self._store.outcomes([e.event_id for w in writes for e in w.events])
        outcomes = [w.outcome(recorded) for w in writes]
        refused = [o for o in outcomes if not o.accepted]
        if refused:
            raise WriteRefusedError(refused, outcomes)
        return outcomes

    # -- DataFusion ---------------------------------------------------------------------------

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The DataFusion session, where every table is looked up live (``sdk._sql``)."""
        return self._ctx

    def dataframe(self, table: pa.Table) -> datafusion.DataFrame:
        """``table`` as a DataFrame of this connection's session (not registered in it by name:
        each read's rows are freed with its DataFrame)."""
        name = f"strata_{uuid.uuid4().hex}"
        frame = self._ctx.from_arrow(table, name=name)
        self._ctx.deregister_table(name)
        return frame
