"""Restarting the Kafka broker under load: the idempotent producers retry, nothing is lost or
duplicated, and an SDK ``wait()`` that cannot finish in time says how far the projection got."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sdk
from events import CATALOG_TOPIC
from projector import Status, open_store
from stack import Server
from stack_tools import PipelineLoad, returns_within, wait_caught_up, wait_until

PIPELINE_EVENTS = 20_000
BACKLOG_EVENTS = 5_000
LOAD_SECS = 40.0


def stop_broker(server: Server, *, kill: bool) -> None:
    """Stop the embedded broker: kill -9, or politely."""
    if kill:
        server.broker._process.kill()
        server.broker._process.wait(30)
    server.broker.stop()


def start_broker_again(server: Server) -> None:
    """Start the stopped broker at its old address, which every client of the stack still has."""
    port = server.broker.port
    server.broker.start()
    assert server.broker.port == port, "the broker came back at another address"


@pytest.mark.store_agnostic  # the broker's restarts (the store's offsets: test_projector_crash)
def test_broker_restarts_lose_and_duplicate_nothing(tmp_path: Path, make_rrd, new_store) -> None:
    with Server(tmp_path / "stack", store=new_store(), protocol_port=None) as stack:
        client = stack.client(delivery_timeout_secs=120)
        dataset = client.create_dataset("broker-restart")
        load = PipelineLoad(stack.bootstrap_servers, [dataset.id], PIPELINE_EVENTS, prefix="load",
                            duration_secs=LOAD_SECS, delivery_timeout_secs=120)
        backlog = PipelineLoad(stack.bootstrap_servers, [dataset.id], BACKLOG_EVENTS,
                               prefix="backlog", chunk=BACKLOG_EVENTS, duration_secs=0)
        try:
            load.start()
            wait_until(lambda: load.sent >= PIPELINE_EVENTS // 4, 120, "a quarter of the load")

            # A registration behind a backlog the projector is still folding, then kill -9 of
            # the broker: its wait cannot finish in time.
            backlog.start()
            backlog.finish(timeout_secs=120)
            operation = dataset.register([make_rrd("during_restart")])
            [awaited] = operation.positions
            stop_broker(stack, kill=True)
            with pytest.raises(TimeoutError) as raised:  # an error, not a hang
                returns_within(20, lambda: operation.wait(timeout_secs=2))
            reached = raised.value.reached[(CATALOG_TOPIC, 0)]
            assert reached <= awaited.offset
            assert re.search(rf"offset {awaited.offset} \(store's next offset: {reached}\)",
                             str(raised.value)), str(raised.value)
            start_broker_again(stack)

            # A polite restart while the load goes on.
            wait_until(lambda: load.sent >= PIPELINE_EVENTS * 3 // 4, 180, "three quarters of the load")
            stop_broker(stack, kill=False)
            start_broker_again(stack)
            load.finish(timeout_secs=300)
        finally:
            load.stop()
            backlog.stop()
        assert operation.wait(timeout_secs=300).segment_ids == ["during_restart"]

        end = wait_caught_up(stack.store, stack.bootstrap_servers)
        produced = [*load.events, *backlog.events]
        store = open_store(stack.store, read_only=True)
        try:
            # Nothing duplicated in the log: one record per event (the create, the SDK's register
            # and the schemas it defined first, besides the loads).
            ours = 2 + len(store.rows("schemas"))
            assert sum(end.values()) == len(produced) + ours
            assert len({p.offset for p in [*load.positions, *backlog.positions]}) == len(produced)
            outcomes = [store.outcome(event.event_id) for event in produced]
            assert all(o is not None for o in outcomes), "an acknowledged event has no outcome"
            accepted = {e.event_id for e, o in zip(produced, outcomes, strict=True)
                        if o.status is Status.ACCEPTED}
            assert len(accepted) == len(produced)
            assert len(store.rows("layers")) == len(accepted) + 1
            assert len(store.rows("outcomes")) == len(produced) + ours
        finally:
            store.close()
        print(f"broker restarts: 2 (one kill -9), {len(produced) + ours} events checked")


def test_producer_reports_an_unreachable_broker(tmp_path) -> None:
    from stack.processes import free_port

    open_store(tmp_path / "store.db").close()  # a store, as a projector leaves it
    client = sdk.CatalogClient(f"127.0.0.1:{free_port()}", tmp_path / "store.db",
                               delivery_timeout_secs=2)
    with pytest.raises(sdk.DeliveryError, match="did not acknowledge"):  # an error, not a hang
        returns_within(60, lambda: client.create_dataset("unreachable"))
    client.close()

