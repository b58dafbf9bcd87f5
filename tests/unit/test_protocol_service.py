"""The protocol server on a store folded in process (no broker, no Spark), driven by rerun-sdk's
own ``rr.catalog.CatalogClient``: its writes reach the log as the SDK's commands, its reads are
the store's, its errors are Rerun's exception classes with strata's messages, and malformed or
unscoped requests are ``INVALID_ARGUMENT``. The same against Rerun's own server is
``tests/integration/test_protocol_entries_differential.py``."""

from __future__ import annotations

import queue
import socket
import threading
import time
import uuid
from typing import Any

import grpc
import pyarrow as pa
import pytest
import rerun as rr

import protocol
import sdk
from commands import Catalog
from protocol import descriptors
from protocol.dataframes import decode, read_schema
from protocol.ids import entry_id

from .conftest import rpc
from .test_registration import recording


def test_the_url_is_rerun_s_and_binds_this_machine_by_default(served) -> None:
    assert served.url == f"rerun+http://127.0.0.1:{served.port}" and served.port > 0
    assert protocol.DEFAULT_PORT == 51234 and protocol.DEFAULT_HOST == "127.0.0.1"


def test_strata_s_client_given_the_endpoint_s_url_reaches_the_same_catalog(served, stack) -> None:
    by_url = sdk.CatalogClient(served.url)
    try:
        assert by_url.bootstrap_servers == stack.client.bootstrap_servers
        assert by_url.store == stack.client.store
        assert by_url.url == served.url  # as Rerun's client: the URL it was given
        assert by_url.dataset_names() == ["droid"]
    finally:
        by_url.close()


def test_a_url_where_nothing_answers_is_endpoint_unavailable(served) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(sdk.EndpointUnavailableError) as refused:
        sdk.CatalogClient(f"rerun+http://127.0.0.1:{port}")
    assert str(refused.value).startswith(f"no catalog answered at rerun+http://127.0.0.1:{port} within 10 s "
                                         "(UNAVAILABLE: ")  # refused at once, not waited out
    assert "start one there ('strata up', 'strata serve')" in str(refused.value)


def test_rerun_s_own_server_s_url_is_a_value_error_naming_rerun_s_client() -> None:
    theirs = rr.server.Server()
    try:
        with pytest.raises(ValueError, match="not a strata catalog: read it with rerun-sdk's rr.catalog"):
            sdk.CatalogClient(theirs.url())
    finally:
        theirs.shutdown()


def test_a_taken_port_is_an_os_error(served, stack) -> None:
    with pytest.raises(OSError, match=f"cannot serve Rerun's catalog protocol on 127.0.0.1:{served.port}"):
        protocol.serve(stack.catalog, port=served.port)


def test_rerun_s_client_creates_lists_renames_and_deletes_through_the_log(served, stack) -> None:
    client = rr.catalog.CatalogClient(served.url)
    assert client.dataset_names() == ["droid"]
    sent = stack.producer.next_offset

    created = client.create_dataset("pick_place")
    assert stack.producer.next_offset == sent + 1  # one CreateDataset command, folded
    ours = stack.client.get_dataset("pick_place")
    assert uuid.UUID(hex=str(created.id)) == ours.id
    assert bytes(created.id.as_bytes()) == ours.id.bytes
    assert created.name == "pick_place" and created.kind == rr.catalog.EntryKind.DATASET
    assert created.created_at == ours.created_at

    assert sorted(client.dataset_names()) == ["droid", "pick_place"]
    assert sorted(e.name for e in client.entries()) == ["droid", "pick_place"]
    hidden = {d.name for d in client.datasets(include_hidden=True)}
    assert hidden == {d.name for d in stack.client.datasets(include_hidden=True)}
    assert any(name.startswith("__bp_") for name in hidden)
    assert [t.name for t in client.tables(include_hidden=True)] == ["__entries"]
    assert client.get_dataset(id=str(created.id)).name == "pick_place"

    client.get_dataset("pick_place").set_name("pick_place_v2")
    assert stack.client.get_dataset(id=ours.id).name == "pick_place_v2"
    client.get_dataset("pick_place_v2").delete()
    assert stack.client.dataset_names() == ["droid"]
    assert client.dataset_names() == ["droid"]


def test_a_name_rerun_s_client_cannot_read_is_left_out_of_its_listings(served, stack) -> None:
    # strata's names may hold brackets; Rerun's client fails a whole listing on one it refuses.
    stack.client.create_dataset("droid (cleaned)")
    stack.client.create_dataset("runs[2]")
    client = rr.catalog.CatalogClient(served.url)
    assert sorted(client.dataset_names()) == ["droid", "runs[2]"]
    assert sorted(e.name for e in client.entries()) == ["droid", "runs[2]"]
    assert sorted(stack.client.dataset_names()) == ["droid", "droid (cleaned)", "runs[2]"]
    by_id = rpc(served, "FindEntries", descriptors.cloud("FindEntriesRequest", filter=descriptors.cloud(
        "EntryFilter", id=entry_id(stack.client.get_dataset("droid (cleaned)").id))))
    assert [e.name for e in by_id.entries] == ["droid (cleaned)"]  # asked for by id, it is found


def test_errors_reach_rerun_s_client_as_its_classes_with_strata_s_messages(served) -> None:
    client = rr.catalog.CatalogClient(served.url)
    with pytest.raises(rr.catalog.AlreadyExistsError, match="a dataset named 'droid'"):
        client.create_dataset("droid")
    with pytest.raises(LookupError, match="No dataset found with name 'nope'"):
        client.get_dataset("nope")
    with pytest.raises(rr.catalog.NotFoundError,
                       match="no dataset with id 00000000-0000-0000-0000-000000000001"):
        client.get_dataset(id="0" * 31 + "1")
    droid = client.get_dataset("droid")
    droid.delete()
    with pytest.raises(rr.catalog.NotFoundError, match="Entry id .* not found"):
        droid.delete()


def test_who_am_i_says_whether_the_catalog_can_write(served, stack, tmp_path) -> None:
    answer = rpc(served, "WhoAmI")
    assert (answer.can_read, answer.can_write) == (True, True)
    assert answer.HasField("capabilities")
    assert list(answer.capabilities.capabilities) == ["dataset:find_chunks"]
    reader = Catalog(None, tmp_path / "store.db", workers=0)
    with protocol.serve(reader, port=0) as read_only:
        answer = rpc(read_only, "WhoAmI")
        assert (answer.can_read, answer.can_write) == (True, False)
        assert rr.catalog.CatalogClient(read_only.url).dataset_names() == ["droid"]
    reader.close()
    assert rr.catalog.CatalogClient(served.url).version_info().version.startswith("strata/")


def test_find_entries_filters_by_id_name_and_kind(served, stack) -> None:
    def find(**fields: object) -> object:
        return rpc(served, "FindEntries", descriptors.cloud(
            "FindEntriesRequest", filter=descriptors.cloud("EntryFilter", **fields)))

    droid = stack.client.get_dataset("droid")
    by_name = find(name="droid")
    assert [e.name for e in by_name.entries] == ["droid"]
    assert by_name.entries[0].id.id.time_ns == droid.id.int >> 64
    by_id = find(id=by_name.entries[0].id)
    assert [e.name for e in by_id.entries] == ["droid"]
    tables = find(entry_kinds=[3])
    assert [e.name for e in tables.entries] == ["__entries"]
    with pytest.raises(grpc.RpcError) as refused:
        find(entry_kinds=[0])
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "ENTRY_KIND_UNSPECIFIED" in refused.value.details()


@pytest.mark.parametrize("metadata, message", [
    ((), "missing mandatory"),
    ((("x-rerun-entry-id", "zz"),), "expected exactly 32 hex characters, got 2"),
    ((("x-rerun-entry-id", "g" * 32),), "expected exactly 32 hex characters"),
])
def test_a_dataset_call_without_a_valid_entry_header_is_invalid_argument(served, metadata, message) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "ReadDatasetEntry", metadata=metadata)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert message in refused.value.details()


def test_a_request_that_does_not_parse_is_invalid_argument_and_the_server_carries_on(served) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "FindEntries", b"\xff\xff\xff\xff not a message")
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a rerun.cloud.v1alpha1.FindEntriesRequest" in refused.value.details()
    assert [e.name for e in rpc(served, "FindEntries").entries if e.name == "droid"] == ["droid"]


def test_the_segment_table_honours_the_projection(served, stack, tmp_path) -> None:
    stack.dataset.register([recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    header = (("x-rerun-entry-id", stack.dataset.id.hex),)
    full = rpc(served, "ScanSegmentTable", metadata=header)
    table = pa.concat_tables(decode(part.data) for part in full)
    assert table.column("rerun_segment_id").to_pylist() == ["ep_0", "ep_1"]
    schema = read_schema(rpc(served, "GetSegmentTableSchema", metadata=header).schema)
    assert table.schema.equals(schema, check_metadata=True)
    assert full[0].meta.entry_id.id.inc == stack.dataset.id.int & ((1 << 64) - 1)

    columns = ["rerun_size_bytes", "rerun_segment_id"]
    projected = rpc(served, "ScanSegmentTable", descriptors.cloud("ScanSegmentTableRequest", columns=columns),
                    metadata=header)
    assert decode(projected[0].data).column_names == columns
    for wrong, message in ((["nope"], "'nope' not found"), (["rerun_segment_id"] * 2, "requested twice")):
        with pytest.raises(grpc.RpcError) as refused:
            rpc(served, "ScanSegmentTable", descriptors.cloud("ScanSegmentTableRequest", columns=wrong),
                metadata=header)
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT and message in refused.value.details()

    client = rr.catalog.CatalogClient(served.url)
    assert sorted(client.get_dataset("droid").segment_ids()) == ["ep_0", "ep_1"]


def test_rerun_s_client_reads_a_dataset_s_overview_manifest_and_index_ranges(served, stack, tmp_path) -> None:
    stack.dataset.register([recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")

    info = dataset.info()
    assert (info.num_segments, info.dataset_name) == (2, "droid")
    ranges = dataset.get_index_ranges().to_arrow_table()
    ours = stack.dataset.get_index_ranges().to_arrow_table()
    assert sorted(ranges.column("rerun_segment_id").to_pylist()) == ["ep_0", "ep_1"]
    assert sorted(ranges.column_names) == sorted(ours.column_names)
    with pytest.warns(DeprecationWarning):
        manifest = dataset.manifest().to_arrow_table()
    assert sorted(zip(manifest["rerun_segment_id"].to_pylist(), manifest["rerun_layer_name"].to_pylist(),
                      strict=True)) == [("ep_0", "base"), ("ep_1", "base")]
    assert set(manifest["rerun_layer_type"].to_pylist()) == {"rrd"}

    with pytest.warns(DeprecationWarning, match="update"):
        dataset.update(name="droid_v2")
    assert stack.client.dataset_names() == ["droid_v2"]


def test_rerun_s_client_sets_and_reads_the_default_blueprints(served, stack) -> None:
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    assert dataset.blueprint_dataset().name == stack.dataset.blueprint_dataset().name
    dataset.set_default_blueprint("layout_1")
    assert stack.dataset.default_blueprint() == "layout_1"
    assert dataset.default_blueprint() == "layout_1"
    dataset.set_default_blueprint(None)
    assert stack.dataset.default_blueprint() is None


def test_rerun_s_client_registers_recordings_and_waits_on_tasks_named_by_their_events(
        served, stack, tmp_path) -> None:
    uris = [recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    sent = stack.producer.next_offset

    result = dataset.register(uris).wait()
    assert sorted(result.segment_ids) == ["ep_0", "ep_1"]
    assert stack.client.get_dataset("droid").segment_ids() == ["ep_0", "ep_1"]
    assert stack.producer.next_offset > sent  # the SDK's commands, in the log

    # A task is named by its event's place in the log, and read from the store by any server.
    answer = rpc(served, "RegisterWithDataset", descriptors.cloud(
        "RegisterWithDatasetRequest", data_sources=[descriptors.cloud("DataSource", storage_url=uris[0])],
        on_duplicate=descriptors.enum_value("rerun.common.v1alpha1.IfDuplicateBehavior",
                                            "IF_DUPLICATE_BEHAVIOR_ERROR")),
        metadata=(("x-rerun-entry-id", stack.dataset.id.hex),))
    [row] = decode(answer.data).to_pylist()
    assert row["rerun_segment_id"] == "ep_0" and row["rerun_segment_layer"] == "base"
    topic, partition, offset = row["rerun_task_id"].split(":")
    assert (topic, partition) == ("strata.catalog", "0") and int(offset) >= sent
    with protocol.serve(stack.catalog, port=0) as another:
        [part] = rpc(another, "QueryTasksOnCompletion", descriptors.cloud(
            "QueryTasksOnCompletionRequest", ids=[descriptors.common("TaskId", id=row["rerun_task_id"])]))
    [task] = decode(part.data).to_pylist()
    assert task["exec_status"] == "failed"
    assert task["msgs"].endswith('- Segment "ep_0", layer "base": already exists')  # as Rerun words it

    # The refusal is the registering call's alone: its task reports it, and no other caller's
    # call meets it (with one ledger for every caller, the next read here would raise it).
    assert sorted(dataset.segment_ids()) == ["ep_0", "ep_1"]
    with pytest.raises(ValueError, match='Segment "ep_1", layer "base": already exists') as refused:
        dataset.register([uris[1]]).wait()
    assert '"ep_0"' not in str(refused.value)
    assert sorted(rr.catalog.CatalogClient(served.url).dataset_names()) == ["droid"]


def test_rerun_s_client_unregisters_layers_and_segments_through_the_log(served, stack, tmp_path) -> None:
    uris = [recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(3)]
    stack.dataset.register(uris).wait()
    stack.dataset.register(uris[:2], layer_name="extra").wait()
    client = rr.catalog.CatalogClient(served.url)
    dataset = client.get_dataset("droid")
    sent = stack.producer.next_offset

    dataset.unregister(segments_to_drop=["ep_0"], layers_to_drop=["extra"]).wait()
    assert stack.producer.next_offset == sent + 1  # one UnregisterLayers command, folded
    layers = stack.client.get_dataset("droid").manifest().select("rerun_segment_id", "rerun_layer_name")
    assert sorted(tuple(row.values()) for row in layers.to_arrow_table().to_pylist()) == [
        ("ep_0", "base"), ("ep_1", "base"), ("ep_1", "extra"), ("ep_2", "base")]
    dataset.unregister(segments_to_drop=["ep_1"], layers_to_drop=[]).wait()
    dataset.unregister(segments_to_drop=["nope"], layers_to_drop=[]).wait()  # nothing there: no error
    assert sorted(dataset.segment_ids()) == ["ep_0", "ep_2"]
    with pytest.raises(ValueError, match="must specify at least 1 segment ID or layer for removal"):
        dataset.unregister(segments_to_drop=[], layers_to_drop=[]).wait()
    request = descriptors.cloud("UnregisterFromDatasetRequest", layers_to_drop=["base"])
    header = (("x-rerun-entry-id", stack.dataset.id.hex),)
    [answer] = rpc(served, "UnregisterFromDataset", request, metadata=header)
    assert decode(answer.data).num_rows == 0 and answer.task_id.id.startswith("strata.catalog:0:")
    [part] = rpc(served, "QueryTasksOnCompletion", descriptors.cloud(
        "QueryTasksOnCompletionRequest", ids=[answer.task_id]))
    assert decode(part.data).column("exec_status").to_pylist() == ["success"]
    assert stack.client.get_dataset("droid").segment_ids() == []


def test_a_task_id_that_names_no_event_is_invalid_argument(served) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "QueryTasksOnCompletion", descriptors.cloud(
            "QueryTasksOnCompletionRequest", ids=[descriptors.common("TaskId", id="task_00000000DEADBEEF")]))
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "<topic>:<partition>:<offset>" in refused.value.details()


def test_registering_a_missing_file_is_not_found_and_sends_nothing(served, stack, tmp_path) -> None:
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    sent = stack.producer.next_offset
    with pytest.raises(rr.catalog.NotFoundError):
        dataset.register([(tmp_path / "missing.rrd").as_uri()]).wait()
    assert stack.producer.next_offset == sent


def _watch(channel: grpc.Channel) -> Any:
    method = descriptors.service().methods_by_name["WatchEvents"]
    output = descriptors.message_class(method.output_type.full_name)
    watch = channel.unary_stream(f"/{protocol.SERVICE}/WatchEvents",
                                 request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=output.FromString)
    return watch(descriptors.cloud("WatchEventsRequest"), timeout=60)


def _drain(stream: Any, events: queue.Queue[Any]) -> None:
    try:
        for event in stream:
            events.put(event)
    except grpc.RpcError as exc:
        assert exc.code() is grpc.StatusCode.CANCELLED  # by the test, once it has seen enough


def test_watch_events_streams_the_entries_created_and_deleted_after_it_starts(served, stack) -> None:
    events: queue.Queue[Any] = queue.Queue()
    with grpc.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        stream = _watch(channel)
        reader = threading.Thread(target=_drain, args=(stream, events), daemon=True)
        reader.start()
        warm_ups = 0
        while events.empty():  # the watch starts at the end of the feed as its call arrives
            stack.client.create_dataset(f"warm_up_{warm_ups}")
            warm_ups += 1
            time.sleep(0.05)
        table = stack.client.create_table("labels", pa.schema([pa.field("id", pa.int64())]))
        stack.client.get_dataset("droid").delete()
        seen: list[tuple[str, Any]] = []
        while ("entry_deleted", entry_id(stack.droid)) not in seen:
            event = events.get(timeout=30)
            kind = event.WhichOneof("kind")
            seen.append((kind, getattr(event, kind).id))
        stream.cancel()
        reader.join(30)
    created = [entry_id(d.id) for d in stack.client.datasets(include_hidden=True)]
    assert seen[0][0] == "entry_created" and seen[0][1] in created  # a warm-up dataset or its companions
    deleted = seen.index(("entry_deleted", entry_id(stack.droid)))
    assert seen.index(("entry_created", entry_id(table.id))) < deleted


def test_a_watch_of_the_catalog_as_of_a_point_sees_no_entry_made_since(stack) -> None:
    point = stack.client.get_dataset("droid").create_tag("then").offset
    events: queue.Queue[Any] = queue.Queue()
    with protocol.serve(stack.catalog.at(point), port=0) as then, \
            grpc.insecure_channel(f"127.0.0.1:{then.port}") as channel:
        stream = _watch(channel)
        reader = threading.Thread(target=_drain, args=(stream, events), daemon=True)
        reader.start()
        for index in range(5):
            stack.client.create_dataset(f"after_{index}")
            time.sleep(0.05)
        time.sleep(1.5)  # more than a live watch takes to see the first (its POLL_SECS)
        stream.cancel()
        reader.join(30)
    assert events.empty()


def test_a_cancelled_watch_gives_its_thread_back(served) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{served.port}") as channel:
        for _ in range(12):  # more than the server's 8 threads
            stream = _watch(channel)
            time.sleep(0.1)
            stream.cancel()
        # With every thread held by a watch nobody reads, this would wait out its deadline.
        assert rpc(served, "Version").version.startswith("strata/")
