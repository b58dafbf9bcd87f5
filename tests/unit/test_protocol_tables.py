"""Tables through the protocol server on a store folded in process (no broker, no Spark), driven
by rerun-sdk's own ``rr.catalog.CatalogClient``: it creates tables (with a Lance URL or without)
and registers Lance tables through the log as the SDK's commands, writes in every mode and reads
back what strata's own client reads, with the schemas' field metadata; its errors are Rerun's
exception classes with strata's messages, and a write refused, before or after the log had it,
leaves the rows as they were. The same against Rerun's own server is
``tests/integration/test_protocol_tables_differential.py``."""

from __future__ import annotations

import os
import uuid

import grpc
import pyarrow as pa
import pytest
import rerun as rr

import protocol
from events import DeleteTable, Event, WriteTable
from protocol import descriptors
from protocol.dataframes import decode, encode, read_schema, schema_message
from protocol.ids import entry_id
from table_tools import LABELS, batch, fields, rows

from .conftest import rpc
from .test_registration import recording


@pytest.fixture
def client(served: protocol.ProtocolServer) -> rr.catalog.CatalogClient:
    return rr.catalog.CatalogClient(served.url)


def write_request(data: pa.RecordBatch | pa.Table, mode: str) -> object:
    return descriptors.cloud("WriteTableRequest", dataframe_part=encode(data, compress=True),
                             insert_mode=descriptors.enum_value("rerun.cloud.v1alpha1.TableInsertMode",
                                                                f"TABLE_INSERT_MODE_{mode}"))


def test_rerun_s_client_creates_a_table_through_the_log_with_its_field_metadata(client, stack) -> None:
    sent = stack.producer.next_offset
    created = client.create_table("labels", LABELS)
    assert stack.producer.next_offset == sent + 1  # one CreateTable command, folded
    ours = stack.client.get_table("labels")
    assert uuid.UUID(hex=str(created.id)) == ours.id
    assert created.name == "labels" and created.kind == rr.catalog.EntryKind.TABLE
    assert fields(created.arrow_schema()) == fields(ours.arrow_schema()) == fields(LABELS)
    assert created.storage_url == ours.storage_url == f"strata://tables/{ours.id}"
    assert client.table_names() == ["labels"]
    assert client.table_names(include_hidden=True) == ["__entries", "labels"]
    assert rows(created) == []


def test_a_table_created_with_a_url_keeps_its_lance_copy_under_it(client, served, stack, tmp_path) -> None:
    url = (tmp_path / "copy").as_uri()
    created = client.create_table("copied", LABELS, url)
    # Rerun's client names a directory of its own under the URL, and sends that as the table's.
    assert created.storage_url == stack.client.get_table("copied").storage_url
    assert created.storage_url.startswith(f"{url}/")
    answer = rpc(served, "ReadTableEntry", descriptors.cloud("ReadTableEntryRequest"),
                  (("x-rerun-entry-id", uuid.UUID(hex=str(created.id)).hex),))
    lance = descriptors.cloud("LanceTable")
    assert answer.table.provider_details.Unpack(lance) and lance.table_url == created.storage_url


def test_every_write_mode_reads_back_what_strata_s_client_reads(client, stack) -> None:
    table = client.create_table("labels", LABELS)
    ours = stack.client.get_table("labels")
    writes = [
        (lambda: table.append(batch([1, 2], ["a", "b"])), [(1, "a", 1.0), (2, "b", 2.0)]),
        (lambda: table.append([batch([3], ["c"]), batch([4], ["d"])]),
         [(1, "a", 1.0), (2, "b", 2.0), (3, "c", 3.0), (4, "d", 4.0)]),
        (lambda: table.append(id=[5], label=["e"]),
         [(1, "a", 1.0), (2, "b", 2.0), (3, "c", 3.0), (4, "d", 4.0), (5, "e", None)]),
        (lambda: table.upsert(id=[2, 6], label=["B", "f"], score=[0.5, 6.0]),
         [(1, "a", 1.0), (2, "B", 0.5), (3, "c", 3.0), (4, "d", 4.0), (5, "e", None), (6, "f", 6.0)]),
        (lambda: table.overwrite(batch([10, 11], ["x", "y"])), [(10, "x", 10.0), (11, "y", 11.0)]),
        (lambda: table.upsert(pa.RecordBatchReader.from_batches(LABELS, [batch([11], ["Y"], [0.0])])),
         [(10, "x", 10.0), (11, "Y", 0.0)]),
        (lambda: table.overwrite(batch([], [])), []),
    ]
    for number, (write, expected) in enumerate(writes):
        sent = stack.producer.next_offset
        write()
        assert stack.producer.next_offset == sent + 1, number  # one WriteTable command
        assert rows(table) == rows(ours) == expected, number
    table.append(batch([1, 2, 3], ["a", "b", "a"]))
    assert table.to_arrow_reader().read_all().num_rows == 3
    query = "SELECT label, count(*) AS n FROM labels GROUP BY label ORDER BY label"
    assert client.ctx.sql(query).to_pylist() == [{"label": "a", "n": 2}, {"label": "b", "n": 1}]
    assert client.ctx.sql(query).to_arrow_table() == stack.client.ctx.sql(query).to_arrow_table()


def test_a_scan_holds_every_row_in_parts(client, served, stack, monkeypatch) -> None:
    from protocol import tables

    monkeypatch.setattr(tables, "ROWS_PER_PART", 4)
    table = client.create_table("labels", LABELS)
    table.append(batch(list(range(10)), [str(i) for i in range(10)]))
    answer = rpc(served, "ScanTable", descriptors.cloud(
        "ScanTableRequest", table_id=entry_id(stack.client.get_table("labels").id)))
    assert [decode(part.dataframe_part).num_rows for part in answer] == [4, 4, 2]
    assert rows(table) == [(i, str(i), float(i)) for i in range(10)]


def test_a_write_larger_than_grpc_s_default_message_limit_is_taken_in_one_call(client, stack) -> None:
    schema = pa.schema([("id", pa.int64()), ("blob", pa.binary())])
    table = client.create_table("blobs", schema)
    noise = [os.urandom(100_000) for _ in range(50)]  # 5 MB that no compression makes smaller
    big = pa.RecordBatch.from_pydict({"id": list(range(50)), "blob": noise}, schema=schema)
    sent = stack.producer.next_offset
    table.append(big)
    assert stack.producer.next_offset - sent > 1  # one write, in the log's parts
    assert table.to_arrow_reader().read_all().column("blob").to_pylist() == noise


def test_errors_reach_rerun_s_client_as_its_classes_with_strata_s_messages(client, served, stack) -> None:
    table = client.create_table("labels", LABELS)
    client.create_dataset("runs")
    with pytest.raises(rr.catalog.AlreadyExistsError, match="a table named 'labels'"):
        client.create_table("labels", LABELS)
    with pytest.raises(rr.catalog.AlreadyExistsError):
        client.create_table("runs", LABELS)
    with pytest.raises(LookupError, match="No table found with name 'nope'"):
        client.get_table("nope")
    with pytest.raises(rr.catalog.NotFoundError):
        client.get_table(id="0" * 31 + "1")
    with pytest.raises(ValueError):
        client.create_table("labels (v2)", LABELS)
    for unknown in ("GetTableSchema", "ScanTable"):
        request = descriptors.cloud(f"{unknown}Request", table_id=entry_id(uuid.UUID(int=1)))
        with pytest.raises(grpc.RpcError) as refused:
            rpc(served, unknown, request)
        assert refused.value.code() is grpc.StatusCode.NOT_FOUND and "not found" in refused.value.details()
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "WriteTable", [write_request(batch([1], ["a"]), "APPEND")],
             (("x-rerun-entry-id", stack.droid.hex),))
    assert refused.value.code() is grpc.StatusCode.NOT_FOUND and "not a table" in refused.value.details()
    assert rows(table) == []


BAD_WRITES = [
    ("an index column of another type",
     lambda t: t.append(pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int32())})), "has type int32"),
    ("a column not in the table",
     lambda t: t.append(pa.RecordBatch.from_pydict({"id": [1], "extra": ["x"]})), "'extra'"),
    ("a non-nullable column left out",
     lambda t: t.append(pa.RecordBatch.from_pydict({"label": ["no id"]})), "missing column 'id'"),
]


@pytest.mark.parametrize(("write", "message"), [w[1:] for w in BAD_WRITES], ids=[w[0] for w in BAD_WRITES])
def test_a_batch_that_does_not_fit_the_schema_is_a_value_error_and_nothing_is_written(
        client, stack, write, message) -> None:
    table = client.create_table("labels", LABELS)
    table.append(batch([1], ["kept"]))
    sent = stack.producer.next_offset
    with pytest.raises(ValueError, match=message):
        write(table)
    assert stack.producer.next_offset == sent
    assert rows(table) == [(1, "kept", 1.0)]


def test_an_upsert_without_an_index_column_is_a_value_error(client, stack) -> None:
    table = client.create_table("plain", pa.schema([("id", pa.int64()), ("label", pa.string())]))
    table.append(id=[1], label=["kept"])
    sent = stack.producer.next_offset
    with pytest.raises(ValueError, match="no index column"):
        table.upsert(id=[1], label=["x"])
    assert stack.producer.next_offset == sent and rows(table) == [(1, "kept")]


def test_a_malformed_part_or_an_unknown_mode_is_invalid_argument_and_writes_nothing(
        client, served, stack) -> None:
    table = client.create_table("labels", LABELS)
    header = (("x-rerun-entry-id", stack.client.get_table("labels").id.hex),)
    broken = write_request(batch([2], ["b"]), "APPEND")
    broken.dataframe_part.CopyFrom(descriptors.common("DataframePart", encoder_version=1,
                                                      payload=b"not arrow", compression=1))
    update = write_request(batch([1], ["a"]), "UPDATE")
    mixed = [write_request(batch([1], ["a"]), "APPEND"), write_request(batch([2], ["b"]), "OVERWRITE")]
    first = write_request(batch([1], ["a"]), "APPEND")
    for requests, message in (([first, broken], "not an Arrow IPC stream"),
                              ([update], "TABLE_INSERT_MODE_UPDATE is not one strata takes"),
                              (mixed, "different insert modes")):
        sent = stack.producer.next_offset
        with pytest.raises(grpc.RpcError) as refused:
            rpc(served, "WriteTable", requests, header)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert message in refused.value.details()
        assert stack.producer.next_offset == sent
    assert rows(table) == []
    rpc(served, "WriteTable", [write_request(batch([1], ["a"]), "APPEND")] * 2, header)
    assert rows(table) == [(1, "a", 1.0), (1, "a", 1.0)]  # the parts of one stream, one write
    rpc(served, "WriteTable", [write_request(batch([2], ["b"]), "UNSPECIFIED")], header)
    assert rows(table) == [(1, "a", 1.0), (1, "a", 1.0), (2, "b", 2.0)]  # no mode appends, as in Rerun


def test_a_write_the_catalog_refuses_after_the_log_has_it_is_the_call_s_error(
        client, stack, monkeypatch) -> None:
    table = client.create_table("labels", LABELS)
    table_id = stack.client.get_table("labels").id
    send = stack.producer.send

    def deleted_meanwhile(events):  # another client deletes the table just before the write lands
        if any(isinstance(event.command, WriteTable) for event in events):
            send([Event(table_id, DeleteTable(), producer_id="another")])
        return send(events)

    monkeypatch.setattr(stack.producer, "send", deleted_meanwhile)
    with pytest.raises(rr.catalog.NotFoundError, match="append of 1 row to table 'labels'"):
        table.append(batch([1], ["a"]))
    assert stack.client.table_names() == []


def test_a_registration_refused_earlier_is_its_task_s_to_report_not_a_later_write_s(
        client, served, stack, tmp_path) -> None:
    uri = recording(tmp_path / "ep_0.rrd", "ep_0")
    stack.dataset.register([uri]).wait()
    table = client.create_table("labels", LABELS)
    header = (("x-rerun-entry-id", stack.client.get_table("labels").id.hex),)
    again = descriptors.cloud("RegisterWithDatasetRequest",
                              data_sources=[descriptors.cloud("DataSource", storage_url=uri)])
    # The fold refuses it (a duplicate): the server's client meets the refusal at its next read.
    rpc(served, "RegisterWithDataset", again, (("x-rerun-entry-id", stack.droid.hex),))
    rpc(served, "WriteTable", [write_request(batch([1], ["a"]), "APPEND")], header)
    assert rows(table) == [(1, "a", 1.0)]


def test_rerun_s_client_sets_a_table_s_default_blueprint(client, stack) -> None:
    table = client.create_table("labels", LABELS)
    ours = stack.client.get_table("labels")
    assert uuid.UUID(hex=str(table.blueprint_dataset().id)) == ours.blueprint_dataset().id
    table.set_default_blueprint("layout_1")
    assert ours.default_blueprint() == "layout_1"
    assert client.get_table("labels").default_blueprint() == "layout_1"
    table.set_default_blueprint(None)
    assert ours.default_blueprint() is None
    with pytest.raises(ValueError, match="system table"):
        client.get_table("__entries").set_default_blueprint("layout_1")


def test_rerun_s_client_registers_a_lance_table_strata_reads(client, stack, tmp_path) -> None:
    lance = pytest.importorskip("lance")
    data = pa.table({"id": pa.array([3, 1, 2], pa.int64()), "label": ["c", "a", "b"]})
    lance.write_dataset(data, tmp_path / "labels.lance")
    url = (tmp_path / "labels.lance").as_uri()
    registered = client.register_table("lance_labels", url)
    assert registered.storage_url.rstrip("/") == url
    assert rows(registered) == rows(stack.client.get_table("lance_labels")) == [(1, "a"), (2, "b"), (3, "c")]
    assert fields(registered.arrow_schema()) == fields(data.schema)
    with pytest.raises(ValueError, match="registered to be read"):
        registered.append(id=[4], label=["d"])
    with pytest.raises(rr.catalog.NotFoundError, match="no Lance table"):
        client.register_table("missing", (tmp_path / "missing.lance").as_uri())
    with pytest.raises(ValueError, match="file:// URLs"):
        client.register_table("remote", "s3://bucket/labels.lance")
    assert stack.client.table_names() == ["lance_labels"]


def test_the_system_table_lists_every_entry_and_refuses_writes(client, stack) -> None:
    client.create_table("labels", LABELS)
    entries = client.get_table("__entries")
    listed = entries.reader().to_arrow_table()
    assert "labels" in listed["name"].to_pylist() and "droid" in listed["name"].to_pylist()
    assert fields(entries.arrow_schema()) == fields(stack.client.get_table("__entries").arrow_schema())
    with pytest.raises(ValueError, match="system table"):
        entries.append(listed.to_batches())
    assert entries.reader().to_arrow_table().num_rows == listed.num_rows


def test_a_table_schema_answer_is_the_table_s_arrow_schema(served, stack) -> None:
    stack.client.create_table("labels", LABELS)
    table_id = stack.client.get_table("labels").id
    answer = rpc(served, "GetTableSchema", descriptors.cloud("GetTableSchemaRequest"),
                  (("x-rerun-entry-id", table_id.hex),))
    assert fields(read_schema(answer.schema)) == fields(LABELS)


def test_a_table_request_strata_cannot_take_is_invalid_argument_and_sends_nothing(served, stack) -> None:
    system = descriptors.message_class("google.protobuf.Any")()
    system.Pack(descriptors.cloud("SystemTable", kind=1), type_url_prefix="/")
    schema = schema_message(LABELS)
    other_kind = "not rerun.cloud.v1alpha1.SystemTable"
    sent = stack.producer.next_offset
    for name, request, message in (
            ("CreateTableEntry", descriptors.cloud("CreateTableEntryRequest", name="labels"), "schema"),
            ("CreateTableEntry", descriptors.cloud("CreateTableEntryRequest", name="labels", schema=schema,
                                                   provider_details=system), other_kind),
            ("RegisterTable", descriptors.cloud("RegisterTableRequest", name="labels"), "name no table"),
            ("RegisterTable", descriptors.cloud("RegisterTableRequest", name="labels",
                                                provider_details=system), "LanceTable only")):
        with pytest.raises(grpc.RpcError) as refused:
            rpc(served, name, request)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert message in refused.value.details()
    assert stack.producer.next_offset == sent and stack.client.table_names() == []
