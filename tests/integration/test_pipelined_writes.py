"""Bulk writes that return at the Kafka ack, on the real broker and Spark job: every later read of
the same client sees them, refusals come back from the next read or ``flush()`` exactly once, an
operation that reports its own outcome is not reported again, and a random interleaving of two
clients' writes and reads never shows a client less than its own writes."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdk
from projector import Status
from stack import Server
from stack_tools import projector_on, wait_caught_up

INDEX = {b"rerun:is_table_index": b"true"}
KEYED = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata=INDEX), pa.field("value", pa.int64())])


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_a_registration_not_waited_on_is_seen_by_the_next_read(dataset: sdk.DatasetEntry, make_rrd) -> None:
    dataset.register([make_rrd("seen_a"), make_rrd("seen_b")])
    dataset.register([make_rrd("seen_a", name="quality")], layer_name="quality")
    table = dataset.segment_table().to_arrow_table().to_pylist()
    assert {(r["rerun_segment_id"], tuple(r["rerun_layer_names"])) for r in table} == {
        ("seen_a", ("base", "quality")), ("seen_b", ("base",))}


def test_a_refused_registration_not_waited_on_raises_at_the_next_read_once(
        client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    uri = make_rrd("twice")
    dataset.register([uri]).wait()
    again = dataset.register([uri])  # on_duplicate="error": the fold refuses it
    with pytest.raises(sdk.WriteRefusedError) as raised:
        dataset.segment_ids()
    [refused] = raised.value.refused
    assert refused.status is Status.ALREADY_EXISTS and "twice" in refused.what and uri in refused.what
    assert isinstance(raised.value, ValueError) and uri in str(raised.value)
    assert dataset.segment_ids() == ["twice"]  # reported once; the read goes on
    with pytest.raises(ValueError, match="Registration failed for 1 of 1"):
        again.wait()  # the operation still says what became of it


def test_an_operation_waited_on_reports_its_own_refusal(client: sdk.CatalogClient, dataset, make_rrd) -> None:
    uri = make_rrd("own_report")
    dataset.register([uri]).wait()
    with pytest.raises(ValueError, match="Registration failed for 1 of 1"):
        dataset.register([uri]).wait()
    assert client.flush() == []  # nothing left to report
    assert dataset.segment_ids() == ["own_report"]


def test_flush_returns_every_outcome_in_the_order_written(
        client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    table = client.create_table(unique("flushed"), KEYED)
    client.flush()
    table.append(id=[1, 2], value=[10, 20])
    table.upsert(id=[2], value=[21])
    uri = make_rrd("flushed_a")
    dataset.register([uri])
    dataset.unregister(segments_to_drop=["flushed_a"])
    outcomes = client.flush()
    assert [o.what for o in outcomes] == [
        f"append of 2 rows to table {table.name!r}", f"upsert of 1 row to table {table.name!r}",
        f"registering {uri} as layer 'base' of segment 'flushed_a'", "unregistering"]
    assert all(o.accepted for o in outcomes)
    assert [o.position.offset for o in outcomes[:2]] == sorted(o.position.offset for o in outcomes[:2])
    assert client.flush() == []
    assert table.reader().to_arrow_table().to_pylist() == [{"id": 1, "value": 10}, {"id": 2, "value": 21}]
    assert dataset.segment_ids() == []


# -- two clients, random interleavings -----------------------------------------------------------

Step = tuple[int, str, int]
"""(client 0 or 1, "append", "upsert" or "read", a number of rows or a key to replace)."""


def steps() -> st.SearchStrategy[list[Step]]:
    step = st.tuples(st.integers(0, 1), st.sampled_from(["append", "upsert", "read"]), st.integers(1, 40))
    return st.lists(step, min_size=1, max_size=25)


def test_two_clients_always_read_their_own_writes_and_the_tables_equal_a_replay(
        own_server: Server, tmp_path: Path) -> None:
    """Each client writes its own keys (client 0 even ids, client 1 odd ones) to a shared table,
    with appends of new rows and upserts that replace one of its rows; after each of its reads
    the client's own rows are exactly what it wrote, whatever the other client did. The replay
    reads the whole log: the test runs on a stack of its own, whose log holds only its writes."""
    server = own_server
    clients = [server.client(), server.client()]
    tables: list[str] = []

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(steps())
    def interleaving(plan: list[Step]) -> None:
        name = unique("interleaved")
        tables.append(name)
        clients[0].create_table(name, KEYED)
        handles = [c.get_table(name) for c in clients]
        written: list[dict[int, int]] = [{}, {}]
        next_id = [0, 1]
        for number, (who, action, size) in enumerate(plan):
            own = written[who]
            if action == "append":
                ids = list(range(next_id[who], next_id[who] + 2 * size, 2))
                next_id[who] += 2 * size
                handles[who].append(id=ids, value=[number] * len(ids))
                own.update(dict.fromkeys(ids, number))
            elif action == "upsert" and own:
                key = sorted(own)[size % len(own)]
                handles[who].upsert(id=[key], value=[number])
                own[key] = number
            else:
                seen = handles[who].reader().to_arrow_table().to_pylist()
                mine = {r["id"]: r["value"] for r in seen if r["id"] % 2 == who}
                assert mine == own, f"client {who} read {mine} after writing {own}"
        for client in clients:
            assert all(o.accepted for o in client.flush())

    interleaving()
    reads = {name: clients[0].get_table(name).reader().to_arrow_table() for name in tables}
    end = wait_caught_up(server.store, server.bootstrap_servers)
    with projector_on(server.bootstrap_servers, tmp_path / "replay") as replay:
        assert wait_caught_up(replay.store, server.bootstrap_servers) == end
        replayed = replay.client()
        for name, rows in reads.items():
            assert replayed.get_table(name).reader().to_arrow_table().equals(rows), name
