"""Reads of recordings' data over Rerun's protocol, on a store folded in process: chunk keys
(signed, and every key the server did not hand out refused before a byte is read), the candidate
rows of a query built from layers' chunk indexes, a segment's merged manifest, the ``ArrowMsg``s
``FetchChunks`` sends, the layers' chunk indexes read once, the catalog's lock released before
files are read, and Rerun's own client reading through both query paths (``FindChunks`` and
``QueryDataset``) what strata's SDK reads. The same against Rerun's own server is
``tests/integration/test_protocol_reads_differential.py``."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pyarrow as pa
import pytest
import rerun as rr

from commands import Catalog
from protocol import chunk_rows, chunks, descriptors, entries, service
from protocol.chunk_keys import ChunkKeys, ChunkLocation, InvalidChunkKeyError, LayerRef
from protocol.chunk_rows import Selection
from protocol.dataframes import decode, encode
from protocol.layer_chunks import LayerChunks
from recordings import chunk_index

from .conftest import rpc
from .in_process import InProcessStack
from .test_dataset_entry import static_recording
from .test_registration import recording

T0 = 1_700_000_000_000_000_000
LAYER = LayerRef("file:///data/ep_1.rrd", "ep_1", "base", 4096)


def episode(path: Path, recording_id: str, *, steps: int = 6, extra: bool = False) -> str:
    """An .rrd with two timelines, a static entity and a property; with ``extra``, a layer of
    other entities on a timeline of its own."""
    with rr.RecordingStream("app", recording_id=recording_id) as rec:
        rec.save(path)
        for step in range(steps):
            if extra:
                rec.set_time("frame_nr", sequence=step)
                rec.log("extra/points", rr.Points3D([[step, 0, 0]]))
            else:
                rec.set_time("real_time", timestamp=np.datetime64(T0 + step * 10**9, "ns"))
                rec.set_time("step", sequence=step)
                rec.log("arm/joints", rr.Scalars([step * 0.5, -step * 0.5]))
                rec.log("camera/points", rr.Points3D([[step, step, step]]))
        rec.log("notes", rr.TextDocument(f"{recording_id} extra" if extra else recording_id), static=True)
        if not extra:
            rec.send_property("episode", rr.AnyValues(success=True))
        rec.reset_time()  # rerun-sdk keeps a thread's times by recording id, for the next stream of that id
    return path.as_uri()


@pytest.fixture
def registered(stack: InProcessStack, tmp_path: Path) -> dict[str, str]:
    """Two segments, the first with a second layer ``extra``; their files by layer."""
    files = {f"ep_{i}": episode(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)}
    files["ep_0 extra"] = episode(tmp_path / "ep_0_extra.rrd", "ep_0", extra=True)
    stack.dataset.register([files["ep_0"], files["ep_1"]]).wait()
    stack.dataset.register([files["ep_0 extra"]], layer_name="extra").wait()
    return files


def fetch(keys: Any) -> Any:
    """A ``FetchChunksRequest`` of ``keys``, as Rerun's client sends it (LZ4)."""
    table = pa.table({"chunk_key": pa.array(list(keys), pa.binary())})
    return descriptors.cloud("FetchChunksRequest", chunk_infos=[encode(table, compress=True)])


def header(stack: InProcessStack) -> tuple[tuple[str, str]]:
    return (("x-rerun-entry-id", stack.dataset.id.hex),)


# -- chunk keys -----------------------------------------------------------------------------------


def test_a_chunk_key_names_its_layer_s_range_and_only_this_server_s_keys_are_taken() -> None:
    keys = ChunkKeys(b"one secret")
    [key, other] = keys.keys(LAYER, [180, 1159], [963, 2467])
    assert keys.location(key) == ChunkLocation(LAYER, 180, 963)
    assert keys.location(other) == ChunkLocation(LAYER, 1159, 2467)

    refused = {
        "another server's": ChunkKeys(b"another secret").keys(LAYER, [180], [963])[0],
        "a longer range": key[:17] + key[17:25] + (10**6).to_bytes(8, "little") + key[33:],
        "another offset": key[:17] + (0).to_bytes(8, "little") + key[25:],
        "an unregistered file": key.replace(b"ep_1.rrd", b"ep_9.rrd"),
        "a traversal": key.replace(b"/data/ep_1.rrd", b"/etc/../pass"),
        "truncated": key[:-3],
        "empty": b"",
        "another version": b"\x02" + key[1:],
    }
    for forged in refused.values():
        with pytest.raises(InvalidChunkKeyError, match="not one this server handed out"):
            keys.location(forged)


def test_fetch_chunks_refuses_a_forged_key_before_sending_anything(served, stack, registered) -> None:
    chunks_of = chunk_index(registered["ep_1"]).to_pylist()[1]
    offset, size = chunks_of["chunk_byte_offset"], chunks_of["chunk_byte_size"]
    ref = LayerRef(registered["ep_1"], "ep_1", "base", Path(registered["ep_1"][7:]).stat().st_size)
    forged = ChunkKeys(b"guessed").keys(ref, [offset], [size])[0]
    request = fetch([forged])
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "FetchChunks", request)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not one this server handed out" in refused.value.details()

    no_keys = descriptors.cloud("FetchChunksRequest", chunk_infos=[encode(pa.table({"chunk_id": [1]}))])
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "FetchChunks", no_keys)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "'chunk_key'" in refused.value.details()


# -- candidate rows and manifests ------------------------------------------------------------------


def index_of(rows: list[dict[str, Any]]) -> pa.Table:
    """A chunk index as rerun-sdk's, of the columns candidate rows read, one timeline ``t``."""
    timeline = {"rerun:index": "t"}
    return pa.table({
        "chunk_entity_path": pa.array([r["path"] for r in rows], pa.string()),
        "chunk_id": pa.array([bytes([n]) * 16 for n in range(len(rows))], pa.binary(16)),
        "chunk_is_static": pa.array([r.get("static", False) for r in rows]),
        "chunk_byte_offset": pa.array([100 * n for n in range(len(rows))], pa.uint64()),
        "chunk_byte_size": pa.array([90] * len(rows), pa.uint64()),
        "chunk_byte_size_uncompressed": pa.array([180] * len(rows), pa.uint64()),
        "t:start": pa.array([r.get("t") and r["t"][0] for r in rows], pa.timestamp("ns")),
        "t:end": pa.array([r.get("t") and r["t"][1] for r in rows], pa.timestamp("ns")),
        "chunk_key": pa.array([b"key%d" % n for n in range(len(rows))], pa.binary()),
    }).cast(pa.schema([pa.field(name, kind, metadata=timeline if name.startswith("t:") else None)
                       for name, kind in (("chunk_entity_path", pa.string()), ("chunk_id", pa.binary(16)),
                                          ("chunk_is_static", pa.bool_()), ("chunk_byte_offset", pa.uint64()),
                                          ("chunk_byte_size", pa.uint64()),
                                          ("chunk_byte_size_uncompressed", pa.uint64()),
                                          ("t:start", pa.timestamp("ns")), ("t:end", pa.timestamp("ns")),
                                          ("chunk_key", pa.binary()))]))


INDEX = index_of([
    {"path": "/a", "static": True}, {"path": "/a", "t": (0, 10)}, {"path": "/a", "t": (11, 20)},
    {"path": "/b", "t": (5, 15)}, {"path": "/c"},  # a temporal chunk on another timeline only
])


@pytest.mark.parametrize("selection, kept", [
    (Selection(), [0, 1, 2, 3, 4]),
    (Selection(temporal=False), [0]),
    (Selection(static=False), [1, 2, 3, 4]),
    (Selection(frozenset({"/a"})), [0, 1, 2]),
    (Selection(timeline="t"), [0, 1, 2, 3]),
    (Selection(timeline="t", start=12, end=14), [0, 2, 3]),
    (Selection(timeline="t", end=9), [0, 1, 3]),  # latest-at 9: every chunk starting by then
    (Selection(frozenset({"/b"}), static=False, timeline="t", start=16), []),
    (Selection(timeline="other"), [0]),  # no data on that timeline in this layer
])
def test_candidate_chunks_are_pruned_by_entity_kind_and_timeline(selection, kept) -> None:
    assert chunk_rows.selected(INDEX, selection).column("chunk_key").to_pylist() == [
        b"key%d" % n for n in kept]


def test_candidate_rows_are_in_rerun_s_columns() -> None:
    other = LayerRef("file:///data/ep_2.rrd", "ep_2", "extra", 10)
    layers = [chunk_rows.layer_rows(LAYER, INDEX), chunk_rows.layer_rows(other, INDEX.slice(0, 2))]
    table = chunk_rows.candidates(layers, Selection(timeline="t"), chunk_rows.FIND_CHUNKS_TIMELINE)
    assert table.schema.names == [
        "chunk_id", "chunk_segment_id", "rerun_segment_layer", "chunk_key", "chunk_entity_path",
        "chunk_is_static", "chunk_byte_len", "chunk_byte_size_uncompressed", "rerun_layer_direct_url",
        "rerun_layer_direct_url_expires_at", "chunk_timeline_start"]
    assert table.schema.field("chunk_id").metadata == {b"rerun:kind": b"control"}
    assert table.schema.field("chunk_timeline_start").metadata == {b"rerun:kind": b"index"}
    rows = table.to_pylist()
    assert [(r["chunk_segment_id"], r["rerun_segment_layer"]) for r in rows] == [
        ("ep_1", "base")] * 4 + [("ep_2", "extra")] * 2
    assert [r["chunk_timeline_start"] for r in rows] == [None, 0, 11, 5, None, 0]
    assert {r["chunk_byte_len"] for r in rows} == {90}  # the bytes FetchChunks sends
    assert {r["rerun_layer_direct_url"] for r in rows} == {None}  # FetchChunks, not direct URLs

    named = chunk_rows.candidates(layers[:1], Selection(timeline="t"), chunk_rows.query_dataset_timeline("t"))
    assert named.schema.field("t:start").metadata == {
        b"rerun:index": b"t", b"rerun:index_marker": b"start", b"rerun:kind": b"index"}
    empty = chunk_rows.candidates([], Selection(), chunk_rows.FIND_CHUNKS_TIMELINE)
    assert empty.num_rows == 0 and empty.schema == table.schema


def test_a_segment_s_manifest_is_its_layers_chunk_indexes_one_after_the_other() -> None:
    first = INDEX.append_column("a:has_static_data", pa.array([True, False, False, False, False]))
    second = pa.table({"chunk_entity_path": ["/x"], "chunk_key": [b"x"],
                       "u:X:num_rows": pa.array([3], pa.uint64())})
    merged = chunk_rows.manifest([first, second])
    assert merged.num_rows == 6
    assert merged.column("chunk_key").to_pylist()[-1] == b"x"
    assert merged.column("a:has_static_data").to_pylist() == [True, False, False, False, False, False]
    assert merged.column("u:X:num_rows").to_pylist() == [0, 0, 0, 0, 0, 3]
    assert merged.column("t:start").null_count == 3  # what a layer lacks stays unknown
    assert chunk_rows.manifest([first]) is first


def test_an_arrow_msg_is_sent_as_read_with_the_segment_id_as_its_recording_id(tmp_path) -> None:
    uri = episode(tmp_path / "rec.rrd", "inside_the_file")
    index = chunk_index(uri).slice(0, 2)
    data = (tmp_path / "rec.rrd").read_bytes()
    offsets = index.column("chunk_byte_offset").to_pylist()
    sizes = index.column("chunk_byte_size").to_pylist()
    offset, size = offsets[1], sizes[1]
    arrow_msg = descriptors.message_class("rerun.log_msg.v1alpha1.ArrowMsg")
    original = arrow_msg.FromString(data[offset:offset + size])
    response = descriptors.message_class("rerun.cloud.v1alpha1.FetchChunksResponse").FromString(
        chunks.fetch_response([data[offsets[0]:offsets[0] + sizes[0]],
                               memoryview(data)[offset:offset + size]], ["other", "the_segment"]))
    assert response.chunks[0].store_id.recording_id == "other"
    sent = response.chunks[1]
    assert original.store_id.recording_id == "inside_the_file"
    assert sent.store_id.recording_id == "the_segment"
    assert sent.store_id.application_id == original.store_id.application_id
    assert (sent.store_id.kind, sent.payload, sent.chunk_id) == (
        original.store_id.kind, original.payload, original.chunk_id)


# -- the server -------------------------------------------------------------------------------------


def test_fetch_chunks_sends_many_chunks_per_message_in_the_order_asked(served, stack, registered,
                                                                        monkeypatch) -> None:
    found = rpc(served, "FindChunks", descriptors.cloud("FindChunksRequest"), metadata=header(stack))
    table = pa.concat_tables(decode(part.data) for part in found)
    assert table.num_rows == sum(chunk_index(uri).num_rows for uri in registered.values())
    reversed_keys = pa.table({"chunk_key": table.column("chunk_key").to_pylist()[::-1]})
    request = fetch(reversed_keys.column("chunk_key"))
    answers = rpc(served, "FetchChunks", request)
    sent = [chunk for answer in answers for chunk in answer.chunks]
    assert len(answers) == 1 < len(sent) == table.num_rows
    assert [(c.chunk_id.time_ns, c.chunk_id.inc) for c in sent] == [
        (int.from_bytes(i[:8], "big"), int.from_bytes(i[8:], "big"))
        for i in table.column("chunk_id").to_pylist()[::-1]]
    assert [c.store_id.recording_id for c in sent] == table.column("chunk_segment_id").to_pylist()[::-1]

    monkeypatch.setattr(chunks, "RESPONSE_BYTES", 1)
    assert len(rpc(served, "FetchChunks", request)) == table.num_rows


def test_a_file_changed_since_registration_is_refused(served, stack, registered) -> None:
    found = rpc(served, "FindChunks", descriptors.cloud("FindChunksRequest"), metadata=header(stack))
    keys = pa.concat_tables(decode(part.data) for part in found).column("chunk_key")
    path = Path(registered["ep_1"][len("file://"):])
    path.write_bytes(path.read_bytes() + b"\0")
    request = fetch(keys)
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "FetchChunks", request)
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert 'segment "ep_1", layer "base"' in refused.value.details()
    assert "were registered" in refused.value.details()


def test_each_layer_s_chunk_index_is_read_once(stack, registered) -> None:
    cache = LayerChunks()
    handlers = service.Handlers(stack.catalog, cache)
    for _ in range(3):
        list(call(handlers, "FindChunks", descriptors.cloud("FindChunksRequest"), header(stack)))
    assert cache.reads == 3  # three layers, each read once


class Context:
    """What a handler uses of grpc's servicer context."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AssertionError(f"{code}: {details}")

    def is_active(self) -> bool:
        return True


def call(handlers: service.Handlers, name: str, message: Any, metadata: tuple[tuple[str, str], ...]) -> Any:
    return handlers.streaming(name, service.STREAMING[name])(message.SerializeToString(), Context(metadata))


def test_calls_run_at_once_a_registration_reading_its_files_holds_up_no_other(
        served, stack, registered, tmp_path, monkeypatch) -> None:
    """The server has no lock of its own over its calls: while one caller's registration reads
    its files, other callers' listings, segment ids and chunk reads are answered. Were the calls
    run one at a time (a lock over each), these would wait for the registration, and fail their
    deadline here."""
    from commands import registration

    entered, release = threading.Event(), threading.Event()
    read_recordings = registration.read_recordings

    def slow_read(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(120)
        return read_recordings(*args, **kwargs)

    monkeypatch.setattr(registration, "read_recordings", slow_read)
    uri = recording(tmp_path / "ep_9.rrd", "ep_9")
    pool = ThreadPoolExecutor(2)
    try:
        registering = pool.submit(
            lambda: rr.catalog.CatalogClient(served.url).get_dataset("droid").register([uri]).wait())
        assert entered.wait(30)

        def reads() -> tuple[list[str], list[str], int]:
            client = rr.catalog.CatalogClient(served.url)
            dataset = client.get_dataset("droid")
            rows = dataset.reader(index="step").to_arrow_table().num_rows
            return client.dataset_names(), sorted(dataset.segment_ids()), rows

        names, segments, rows = pool.submit(reads).result(timeout=60)
        assert (names, segments) == (["droid"], ["ep_0", "ep_1"]) and rows > 0
        assert not registering.done()
    finally:
        release.set()
        pool.shutdown(wait=False)
    assert registering.result(timeout=60).segment_ids == ["ep_9"]


def test_the_workers_start_at_the_first_call_of_a_caller_that_may_write(stack) -> None:
    """An endpoint no one has called holds no worker process; a client's first call (its
    ``WhoAmI`` on connecting) starts them, so its first registration finds them started."""
    catalog = Catalog("127.0.0.1:1", stack.client.store, workers=1)
    try:
        handlers = service.Handlers(catalog)
        assert catalog.workers.pids == []
        who_am_i = handlers.unary("WhoAmI", service.UNARY["WhoAmI"])
        who_am_i(descriptors.cloud("WhoAmIRequest").SerializeToString(), Context(()))
        deadline = time.monotonic() + 60
        while not catalog.workers.pids:
            assert time.monotonic() < deadline, "the first call started no worker"
            time.sleep(0.05)
    finally:
        catalog.close()


def test_rerun_s_client_reads_what_strata_s_sdk_reads(served, stack, registered) -> None:
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    for index in ("real_time", "frame_nr", None):
        theirs = dataset.reader(index=index).to_arrow_table()
        ours = stack.dataset.reader(index=index).to_arrow_table()
        keys = [c for c in ("rerun_segment_id", "real_time", "step", "frame_nr", "log_time")
                if c in ours.column_names]
        theirs, ours = (t.select(sorted(t.column_names)).sort_by([(k, "ascending") for k in keys])
                        for t in (theirs, ours))
        assert theirs.num_rows == ours.num_rows > 0
        assert theirs.equals(ours), index
    joints = dataset.filter_segments(["ep_1"]).filter_contents(["/arm/**"]).reader(index="step")
    joints = joints.to_arrow_table()
    assert set(joints.column("rerun_segment_id").to_pylist()) == {"ep_1"} and joints.num_rows == 6


def test_rerun_s_client_streams_a_segment_of_two_layers_and_reads_its_schema(served, stack,
                                                                             registered) -> None:
    dataset = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    store = dataset.segment_store("ep_0")
    streamed = list(store.stream())
    assert len(streamed) == sum(chunk_index(registered[layer]).num_rows for layer in ("ep_0", "ep_0 extra"))
    assert {c.entity_path for c in streamed} >= {"/arm/joints", "/extra/points"}
    ours = stack.dataset.segment_store("ep_0")
    assert store.schema().to_arrow().equals(ours.schema().to_arrow(), check_metadata=True)
    merged = dataset.segment("ep_0").schema().to_arrow()  # merged by the client, in its own order
    assert sorted((f.name, f.type, f.metadata) for f in merged) == sorted(
        (f.name, f.type, f.metadata) for f in ours.schema().to_arrow())
    with pytest.raises(rr.catalog.NotFoundError, match="Segment 'nope' not found"):
        dataset.segment_store("nope")


def test_without_find_chunks_rerun_s_client_queries_the_dataset_and_reads_the_same(
        served, stack, registered, monkeypatch) -> None:
    asked: list[str] = []
    for name in ("find_chunks_selection", "query_dataset_selection"):
        read = getattr(chunks, name)
        monkeypatch.setattr(chunks, name, lambda message, name=name, read=read: (
            asked.append(name), read(message))[1])
    found = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    expected = found.filter_contents(["/arm/**", "/notes"]).reader(index="real_time", fill_latest_at=True)
    expected = expected.to_arrow_table()
    assert set(asked) == {"find_chunks_selection"}
    monkeypatch.setattr(entries, "CAPABILITIES", [])
    queried = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    answer = rpc(served, "QueryDataset", descriptors.cloud("QueryDatasetRequest"), metadata=header(stack))
    assert decode(answer[0].data).num_rows > 0
    table = queried.filter_contents(["/arm/**", "/notes"]).reader(index="real_time", fill_latest_at=True)
    keys = [("rerun_segment_id", "ascending"), ("real_time", "ascending")]
    assert table.to_arrow_table().sort_by(keys).equals(expected.sort_by(keys))
    assert set(asked) == {"find_chunks_selection", "query_dataset_selection"}
    with pytest.raises(grpc.RpcError) as refused:
        rpc(served, "QueryDataset", descriptors.cloud("QueryDatasetRequest", chunk_ids=[
            descriptors.common("Tuid", time_ns=1, inc=2)]), metadata=header(stack))
    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_rerun_s_client_streams_a_segment_with_the_assets_that_apply_to_it(served, stack, tmp_path) -> None:
    dataset = stack.dataset
    dataset.register([recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    dataset.register_asset(static_recording(tmp_path / "mesh.rrd", "gripper_mesh"), mode="opt_in",
                           segments=["ep_1"])
    theirs = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    for segment in ("ep_0", "ep_1"):
        streamed, ours = theirs.segment_store(segment), dataset.segment_store(segment)
        assert sorted(c.entity_path for c in streamed.stream()) == sorted(
            c.entity_path for c in ours.stream())
        assert streamed.schema().to_arrow().equals(ours.schema().to_arrow(), check_metadata=True)
    assert "/mesh" in {c.entity_path for c in theirs.segment_store("ep_1").stream()}
    assert "/mesh" not in {c.entity_path for c in theirs.segment_store("ep_1", include_assets=False).stream()}
    theirs.unregister_asset("gripper_mesh")  # through the asset dataset's UnregisterFromDataset
    assert dataset.asset_dataset().segment_ids() == []
    assert "/mesh" not in {c.entity_path for c in theirs.segment_store("ep_1").stream()}
