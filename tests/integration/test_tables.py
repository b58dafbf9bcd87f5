"""Table entries on the real broker and Spark job: every mutation and its read-back, bad input,
writes above Kafka's message limit, SQL across the catalog, upsert races, Lance tables."""

from __future__ import annotations

import os
import threading
import uuid

import lance
import pyarrow as pa
import pytest

import sdk
from commands.table_writes import MAX_PART_BYTES
from events import TableWriteMode, WriteTable, decode
from producers import end_offsets, read_range
from projector import table_rows
from sdk._operations import Operation
from stack import Server
from stack_tools import strata_replay, wait_caught_up
from stores import dump

INDEX = {b"rerun:is_table_index": b"true"}
LABELS = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata=INDEX),
                    pa.field("label", pa.string()), pa.field("score", pa.float64())])


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def batch(ids: list[int], labels: list[str | None], scores: list[float] | None = None) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"id": i, "label": x, "score": s} for i, x, s in zip(ids, labels, scores or [0.0] * len(ids),
                                                               strict=True)], schema=LABELS)


def commands_since(server: Server, start: dict) -> list:
    end = end_offsets(server.bootstrap_servers)
    return [decode(value).command for *_, value in read_range(server.bootstrap_servers, start, end)]


def rows(table: sdk.TableEntry) -> list[tuple]:
    return [(r["id"], r["label"]) for r in table.reader().to_arrow_table().to_pylist()]


def test_table_lifecycle(client: sdk.CatalogClient) -> None:
    name = unique("labels")
    table = client.create_table(name, LABELS)
    assert table.kind is sdk.EntryKind.TABLE and client.get_dataset  # a table, not a dataset
    assert client.get_table(name) == table == client.get_table(id=str(table.id))
    assert name in client.table_names() and name in client.entry_names()
    assert table in client.tables() and table in client.entries()
    assert name not in client.dataset_names()
    assert table.arrow_schema() == LABELS and table.arrow_schema().field("id").metadata == INDEX
    assert table.storage_url == f"strata://tables/{table.id}"
    assert rows(table) == [] and table.reader().schema().names == LABELS.names
    created = table.created_at

    dataset = client.create_dataset(unique("droid"))
    with pytest.raises(sdk.AlreadyExistsError, match="a dataset named"):
        client.create_table(dataset.name, LABELS)
    with pytest.raises(sdk.AlreadyExistsError, match="a table named"):
        client.create_dataset(name)
    with pytest.raises(sdk.AlreadyExistsError, match="a dataset named"):
        table.set_name(dataset.name)

    table.set_name(f"{name}_renamed")
    assert table.name == f"{name}_renamed" and table.updated_at > created == table.created_at
    with pytest.raises(LookupError):
        client.get_table(name)
    table.delete()
    with pytest.raises(sdk.NotFoundError):
        client.get_table(id=table.id)
    with pytest.raises(sdk.NotFoundError):
        table.append(id=[1])
    with pytest.raises(sdk.NotFoundError):
        table.delete()
    assert client.create_table(f"{name}_renamed", LABELS).name == f"{name}_renamed"  # the name is free


def test_every_kind_of_write_and_its_read_back(client: sdk.CatalogClient) -> None:
    table = client.create_table(unique("writes"), LABELS)
    table.append(batch([1], ["a"]))
    table.append([batch([2], ["b"]), batch([3], ["c"])])
    table.append([[batch([4], ["d"])], [batch([5], ["e"])]])
    table.append(pa.RecordBatchReader.from_batches(LABELS, [batch([6], ["f"])]))
    table.append(id=[7, 8], label=["g", "h"])  # score left out: null
    table.append(id=9, label="i")
    assert rows(table) == [(i, chr(ord("a") + i - 1)) for i in range(1, 10)]
    assert table.reader().to_arrow_table().column("score").null_count == 3
    with pytest.raises(TypeError, match="both"):
        table.append(batch([1], ["x"]), id=[2])

    table.upsert(id=[2, 10, 2], label=["x", "new", "y"])  # the last duplicate wins
    assert rows(table) == [(1, "a"), (3, "c"), (4, "d"), (5, "e"), (6, "f"), (7, "g"), (8, "h"), (9, "i"),
                           (10, "new"), (2, "y")]
    table.upsert(table.reader().filter(sdk_col("id") < 4).collect())  # a list of lists, read back
    assert [i for i, _ in rows(table)][-3:] == [1, 3, 2]
    assert table.to_arrow_reader().read_all().num_rows == 10

    table.overwrite(id=[100], label=["only"])
    assert rows(table) == [(100, "only")]
    table.overwrite(batch([], []))
    assert rows(table) == []


def sdk_col(name: str):
    from datafusion import col

    return col(name)


@pytest.mark.parametrize(("write", "words"), [
    (lambda t: t.append(pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int32())})),
     ["'id' has type int32", "int64"]),
    (lambda t: t.append(pa.RecordBatch.from_pydict({"id": [1], "extra": ["x"]})), ["'extra'"]),
    (lambda t: t.append(label=["no id"]), ["missing column 'id'"]),
    (lambda t: t.append(id=["one"]), ["'id'", "int64"]),
    (lambda t: t.append(nope=[1]), ["nope"]),
    (lambda t: t.append(id=[1, 2], label=["a"]), ["mismatched"]),
])
def test_bad_rows_name_the_columns_and_nothing_is_produced(server: Server, client, write, words) -> None:
    table = client.create_table(unique("bad"), LABELS)
    table.append(id=[1], label=["kept"])
    before = end_offsets(server.bootstrap_servers)
    with pytest.raises(ValueError) as info:
        write(table)
    for word in words:
        assert word in str(info.value)
    assert end_offsets(server.bootstrap_servers) == before
    assert rows(table) == [(1, "kept")]


def test_upsert_without_an_index_column_is_refused_before_producing(server: Server, client) -> None:
    table = client.create_table(unique("plain"), pa.schema([("id", pa.int64()), ("label", pa.string())]))
    before = end_offsets(server.bootstrap_servers)
    with pytest.raises(ValueError, match="no index column"):
        table.upsert(id=[1], label=["a"])
    assert end_offsets(server.bootstrap_servers) == before


def test_bad_writes_from_other_producers_are_refused_by_the_projector(server: Server, client) -> None:
    # What the SDK would have refused, appended by another producer: the fold refuses it too.
    table = client.create_table(unique("foreign"), LABELS)
    table.append(id=[1], label=["kept"])
    wrong = pa.table({"id": pa.array([2], pa.int32())})
    with pytest.raises(ValueError, match="'id' has type int32"):
        command = WriteTable(TableWriteMode.APPEND, table_rows.to_ipc(wrong))
        Operation.submit(client._internal, table.id, command, "appending").wait()
    assert rows(table) == [(1, "kept")]


def test_a_write_above_the_message_limit_is_sent_in_parts_and_applies_whole(server: Server, client) -> None:
    table = client.create_table(unique("big"), LABELS)
    start = end_offsets(server.bootstrap_servers)
    # About 8 MB of random hex, which zstd compresses to about half.
    labels = [f"{i:08d}" + os.urandom(96).hex() for i in range(40_000)]
    table.append(id=list(range(40_000)), label=labels)
    writes = [c for c in commands_since(server, start) if isinstance(c, WriteTable)]
    assert len(writes) > 4 and all(len(w.rows) <= MAX_PART_BYTES for w in writes)
    assert len({w.write_id for w in writes}) == 1 and [w.part for w in writes] == list(range(len(writes)))
    data = table.reader().to_arrow_table()
    assert data.num_rows == 40_000 and data.column("label").to_pylist() == labels
    table.upsert(id=list(range(0, 40_000, 2)), label=labels[::2])  # an upsert in parts
    assert table.reader().to_arrow_table().num_rows == 40_000


def test_sql_sees_every_table_and_joins_with_a_segment_table(client: sdk.CatalogClient, make_rrd) -> None:
    dataset = client.create_dataset(unique("joined"))
    dataset.register([make_rrd("join_a"), make_rrd("join_b")]).wait()
    name = unique("status")
    table = client.create_table(name, pa.schema([pa.field("rerun_segment_id", pa.string(), metadata=INDEX),
                                                 pa.field("status", pa.string())]))
    table.append(rerun_segment_id=["join_a"], status=["done"])
    assert client.ctx.sql(f'SELECT status FROM "{name}"').to_arrow_table().to_pylist() == [{"status": "done"}]
    table.upsert(rerun_segment_id=["join_a", "join_b"], status=["redo", "new"])  # ctx sees the change
    client.ctx.register_view("segments", dataset.segment_table())
    joined = client.ctx.sql(f'SELECT s.rerun_segment_id, t.status FROM segments s JOIN "{name}" t '
                            "ON s.rerun_segment_id = t.rerun_segment_id ORDER BY 1").to_arrow_table()
    assert joined.to_pylist() == [{"rerun_segment_id": "join_a", "status": "redo"},
                                  {"rerun_segment_id": "join_b", "status": "new"}]
    meta = dataset.segment_table(join_meta=table.reader()).to_arrow_table()
    assert sorted(meta.column("status").to_pylist()) == ["new", "redo"]


def test_upsert_race_between_two_clients_ends_with_the_last_in_log_order(
        own_server: Server, tmp_path) -> None:
    # It replays its stack's whole log: a stack of its own, whose log holds only this test's.
    server = own_server
    name = unique("race")
    with sdk.CatalogClient(server.bootstrap_servers, server.store) as first, \
            sdk.CatalogClient(server.bootstrap_servers, server.store) as second:
        first.create_table(name, LABELS)
        start = end_offsets(server.bootstrap_servers)

        def upserts(client: sdk.CatalogClient, label: str) -> None:
            table = client.get_table(name)
            for round_ in range(15):
                table.upsert(id=[1, 2, 3], label=[f"{label}{round_}"] * 3)

        threads = [threading.Thread(target=upserts, args=(c, x)) for c, x in ((first, "a"), (second, "b"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for client in (first, second):  # each reads its own writes: now both read all 30
            client.flush()
        writes = [c for c in commands_since(server, start) if isinstance(c, WriteTable)]
        assert len(writes) == 30
        last = pa.ipc.open_stream(writes[-1].rows).read_all()
        live = first.get_table(name).reader().to_arrow_table()
        assert live.column("label").to_pylist() == last.column("label").to_pylist()
        assert second.get_table(name).reader().to_arrow_table() == live
    wait_caught_up(server.store, server.bootstrap_servers)
    strata_replay(server, tmp_path)
    assert dump(tmp_path / "store.db") == dump(server.store)


def test_table_writes_interleaved_with_dataset_commands(client: sdk.CatalogClient, make_rrd) -> None:
    table = client.create_table(unique("interleaved"), LABELS)
    dataset = client.create_dataset(unique("interleaved"))
    uris = [make_rrd(f"interleaved_{i}") for i in range(10)]

    def register() -> None:
        for uri in uris:
            dataset.register(uri).wait()

    thread = threading.Thread(target=register)
    thread.start()
    for i in range(10):
        table.append(id=[i], label=[f"l{i}"])
    thread.join()
    assert [i for i, _ in rows(table)] == list(range(10))
    assert len(dataset.segment_ids()) == 10


def test_register_table_of_a_lance_table(server: Server, client, tmp_path) -> None:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "label": ["a", "b", "c"]})
    lance.write_dataset(data, tmp_path / "labels.lance")
    name = unique("lance")
    table = client.register_table(name, (tmp_path / "labels.lance").as_uri())
    assert table.storage_url == (tmp_path / "labels.lance").as_uri()
    assert table.reader().to_arrow_table() == data and table.arrow_schema() == data.schema
    assert client.ctx.sql(f'SELECT sum(id) AS n FROM "{name}"').to_arrow_table().to_pylist() == [{"n": 6}]

    lance.write_dataset(data, tmp_path / "labels.lance", mode="append")  # a later version: not seen
    assert table.reader().to_arrow_table().num_rows == 3
    before = end_offsets(server.bootstrap_servers)
    with pytest.raises(ValueError, match="registered to be read"):
        table.append(id=[4], label=["d"])
    with pytest.raises(sdk.NotFoundError):
        client.register_table(unique("missing"), (tmp_path / "missing.lance").as_uri())
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match="not a Lance table"):
        client.register_table(unique("plain"), (tmp_path / "plain").as_uri())
    with pytest.raises(ValueError, match="file://"):
        client.register_table(unique("path"), str(tmp_path / "labels.lance"))
    assert end_offsets(server.bootstrap_servers) == before
