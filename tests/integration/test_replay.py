"""Replay for rebuilds: random histories through the live stack, rebuilt from offset 0 with
``strata replay``, give identical tables; ``--swap`` loses nothing that arrives meanwhile.

Every test here rebuilds its stack's whole log, some a few offsets per batch: they run on a stack
of this module's own (``server`` and ``client`` below), whose log holds only what they write, so
that their time does not grow with what the tests before them wrote to the shared stack."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdk
from events import (
    CATALOG_TOPIC,
    AssetMode,
    AssetScopeEdit,
    CreateDataset,
    CreateTable,
    CreateTag,
    DeleteDataset,
    DeleteTable,
    DeleteTag,
    Event,
    OnDuplicate,
    RegisterBlueprint,
    RegisterLayer,
    RenameDataset,
    RenameTable,
    ScopeAsset,
    SetDefaultBlueprint,
    TableWriteMode,
    UnregisterLayers,
    WriteTable,
)
from producers import EventProducer, end_offsets, log_reader
from projector import DatasetKind, companion_id, table_rows
from projector.stores import snapshots
from spark_streaming import replay
from stack import Server
from stack_tools import strata_replay, wait_caught_up
from stores import applied_batches, dump, lock_for_writing_at_once

SCHEMAS = [pa.schema(fields).serialize().to_pybytes() for fields in (
    [("/x", pa.int32())], [("/x", pa.int64())], [("/y", pa.struct([("a", pa.float32())]))],
    [("/y", pa.struct([("a", pa.float32()), ("b", pa.float32())]))], [("/x", pa.null())])]
TABLE_SCHEMA = pa.schema([pa.field("id", pa.int64(), metadata={b"rerun:is_table_index": b"true"}),
                          pa.field("label", pa.string())])
ROWS = [table_rows.to_ipc(pa.Table.from_pylist(rows, schema=TABLE_SCHEMA)) for rows in (
    [{"id": 1, "label": "a"}], [{"id": 1, "label": "b"}, {"id": 2, "label": "c"}],
    [{"id": 2, "label": "d"}, {"id": 3, "label": None}, {"id": 2, "label": "e"}])]
SEGMENTS = ["s1", "s2", "s3"]
LAYERS = ["base", "extra"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, new_store) -> Iterator[Server]:
    """This module's stack (its own broker, projector and store, on the run's store backend), in
    place of the shared one."""
    with Server(tmp_path_factory.mktemp("replay-stack"), store=new_store(), protocol_port=None) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: Server) -> sdk.CatalogClient:
    return server.client()


def commands(datasets: list[uuid.UUID], tables: list[uuid.UUID], token: str) -> st.SearchStrategy:
    dataset = st.sampled_from(datasets)
    name = st.sampled_from([f"{token}-a", f"{token}-b", f"{token}-c"])
    segments = st.lists(st.sampled_from(SEGMENTS), max_size=2, unique=True).map(tuple)
    layers = st.lists(st.sampled_from(LAYERS), max_size=2, unique=True).map(tuple)
    register = st.builds(
        RegisterLayer, segment_id=st.sampled_from(SEGMENTS), layer_name=st.sampled_from(LAYERS),
        storage_url=st.sampled_from(["file:///a.rrd", "file:///b.rrd"]),
        on_duplicate=st.sampled_from(list(OnDuplicate)), size_bytes=st.integers(0, 10),
        arrow_schema=st.sampled_from([b"", *SCHEMAS]))
    command = st.one_of(
        st.builds(CreateDataset, name), st.builds(RenameDataset, name), st.just(DeleteDataset()),
        register, register, register, st.builds(UnregisterLayers, segments, layers),
        st.builds(RegisterBlueprint, st.sampled_from(["bp1", "bp2"]), st.just("file:///bp.rbl"),
                  st.booleans()),
        st.builds(SetDefaultBlueprint, st.sampled_from([None, "bp1", "bp2"])),
        st.builds(CreateTag, st.sampled_from(["t1", "t2"]), st.integers(0, 5)),
        st.builds(DeleteTag, st.sampled_from(["t1", "t2"])))
    write = st.builds(WriteTable, st.sampled_from(list(TableWriteMode)), st.sampled_from(ROWS))
    table_command = st.one_of(
        st.builds(CreateTable, name, st.just(TABLE_SCHEMA.serialize().to_pybytes())),
        st.builds(RenameTable, name), st.just(DeleteTable()), write, write, write)
    static_register = st.builds(  # an asset is static: no timeline, a chunk count
        RegisterLayer, segment_id=st.sampled_from(SEGMENTS), layer_name=st.just("base"),
        storage_url=st.just("file:///asset.rrd"), on_duplicate=st.sampled_from(list(OnDuplicate)),
        num_chunks=st.sampled_from([None, 2]))
    asset_command = st.one_of(
        static_register, st.builds(UnregisterLayers, segments, st.just(())),
        st.builds(ScopeAsset, st.sampled_from(SEGMENTS), st.sampled_from(list(AssetScopeEdit)),
                  st.sampled_from(list(AssetMode)), segments, st.one_of(st.none(), st.integers(0, 60))))
    assets = st.sampled_from([companion_id(d, DatasetKind.ASSET) for d in datasets])
    return st.one_of(st.tuples(dataset, command), st.tuples(st.sampled_from(tables), table_command),
                     st.tuples(assets, asset_command))


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[list[Event]], int]:
    token = uuid.uuid4().hex[:8]
    datasets = [uuid.uuid4() for _ in range(2)]
    tables = [uuid.uuid4() for _ in range(2)]
    events = [Event(dataset_id, command) for dataset_id, command in
              draw(st.lists(commands(datasets, tables, token), min_size=5, max_size=40))]
    for i in draw(st.lists(st.integers(0, len(events) - 1), max_size=3)):
        events.append(events[i])  # the same event appended twice
    cuts = sorted(draw(st.lists(st.integers(1, len(events)), max_size=4, unique=True)))
    chunks = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)], strict=True) if a < b]
    return chunks, draw(st.integers(1, 30))  # the replay's number of batches


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(history=histories())
def test_random_histories_rebuild_to_identical_tables(server: Server, tmp_path_factory, history) -> None:
    chunks, batches = history
    with EventProducer(server.bootstrap_servers) as producer:
        for chunk in chunks:  # pauses between chunks give the live projector other batches
            producer.send(chunk)
            time.sleep(0.3)
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=120)
    into = tmp_path_factory.mktemp("rebuild")
    # The log holds every example's events: its batches are counted, not sized, so that a replay
    # of a long log a record at a time does not outlast the run.
    per_batch = -(-sum(end_offsets(server.bootstrap_servers).values()) // batches)
    output = strata_replay(server, into, "--batch-records", str(per_batch))
    assert "records" in output
    assert dump(into / "store.db") == dump(server.store)


@pytest.mark.parametrize("kept_in", ["a directory", "object storage"])
def test_a_replay_from_a_snapshot_folds_only_the_log_after_it(server: Server, client: sdk.CatalogClient,
                                                              make_rrd, tmp_path, kept_in, request) -> None:
    if kept_in == "object storage":
        s3 = request.getfixturevalue("s3")
        bucket = f"snapshots-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(bucket)
        kept, env = f"s3://{bucket}/strata/snapshots", s3.environment()
    else:
        kept, env = str(tmp_path / "kept"), {}
    dataset = client.create_dataset(f"snapshot-{uuid.uuid4().hex[:8]}")
    dataset.register([make_rrd(f"before_{i}") for i in range(3)]).wait()
    dataset.create_tag("snapshotted")
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=120)
    taken = subprocess.run([sys.executable, "-m", "stack.cli", "snapshot", "--data-dir", str(server.data_dir),
                            "--to", kept], capture_output=True, text=True, timeout=300,
                           env={**os.environ, **env})
    assert taken.returncode == 0, taken.stderr
    directory, summary = taken.stdout.strip().split("\t")
    offset = int(summary.split(" at offset ")[1].split()[0])
    assert directory == f"{kept}/snapshot-{offset:012d}"
    dataset.register([make_rrd("after_0")]).wait()
    dataset.unregister(segments_to_drop=["before_0"]).wait()
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=120)

    output = strata_replay(server, tmp_path / "rebuild", "--from-snapshot", kept, env=env)
    assert f"rebuilding from {directory} (offset {offset})" in output
    assert dump(tmp_path / "rebuild" / "store.db") == dump(server.store)
    # (topic, partition, first_offset, next_offset, records): the batches up to the snapshot are the
    # live store's, copied; the rebuild's own start at the snapshot's offset and tile the rest.
    rebuilt = applied_batches(tmp_path / "rebuild" / "store.db")
    live = applied_batches(server.store)
    assert [b for b in rebuilt if b[3] <= offset] == [b for b in live if b[3] <= offset]
    own = [b for b in rebuilt if b[2] >= offset]
    assert own[0][2] == offset and all(a[3] == b[2] for a, b in zip(own, own[1:], strict=False))


def test_replay_swap_loses_nothing_that_arrives_meanwhile(server: Server, client: sdk.CatalogClient,
                                                         make_rrd, tmp_path) -> None:
    dataset = client.create_dataset(f"swap-{uuid.uuid4().hex[:8]}")
    uris = [make_rrd(f"swap_{i}") for i in range(40)]
    registered: list[str] = []
    stop = threading.Event()

    def keep_registering() -> None:
        for uri in uris:
            if stop.is_set():
                break
            registered.extend(dataset.register([uri]).wait().segment_ids)
            time.sleep(0.2)

    writer = threading.Thread(target=keep_registering)
    writer.start()
    try:
        output = strata_replay(server, tmp_path / "rebuild", "--swap")
    finally:
        stop.set()
        writer.join()
    assert "swapped into" in output
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=120)
    assert registered and set(registered) <= set(dataset.segment_ids())
    check = tmp_path / "check"
    strata_replay(server, check)
    assert dump(check / "store.db") == dump(server.store)
    assert CATALOG_TOPIC in {row[0] for row in dump(server.store)["offsets"]}


def test_swap_reads_kafka_with_the_live_store_unlocked(server: Server, client: sdk.CatalogClient,
                                                       make_rrd, tmp_path, monkeypatch) -> None:
    # Whenever the swap reads the log, a writer (the live projector) can lock the live store at
    # once; it waits only for the final copy.
    dataset = client.create_dataset(f"unlocked-{uuid.uuid4().hex[:8]}")
    strata_replay(server, tmp_path / "rebuild")
    dataset.register([make_rrd("unlocked_after_rebuild")]).wait()  # for the swap to catch up
    reads = []

    def read_range_while_writing(*args, **kwargs):
        reads.append(lock_for_writing_at_once(server.store))  # raises if the swap held the lock
        return log_reader.read_range(*args, **kwargs)

    monkeypatch.setattr(replay, "read_range", read_range_while_writing)
    caught_up = replay.swap_into(server.store, tmp_path / "rebuild" / "store.db",
                                 server.bootstrap_servers)
    assert reads and caught_up >= 1
    assert dataset.segment_ids() == ["unlocked_after_rebuild"]
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=120)
    check = tmp_path / "check"
    strata_replay(server, check)
    assert dump(check / "store.db") == dump(server.store)


def test_the_projector_writes_a_snapshot_every_n_records_and_a_replay_starts_from_the_newest(
        tmp_path, new_store, make_rrd) -> None:
    every = 4
    with Server(tmp_path / "stack", store=new_store(), snapshot_every=every, protocol_port=None) as stack:
        dataset = stack.client().create_dataset("snapshotted")
        kept = tmp_path / "stack" / "snapshots"
        # A snapshot reads the store a moment after it is due, when more records may have come:
        # register until two are written (at most 30 registrations), however long each took.
        for i in range(30):
            dataset.register([make_rrd(f"every_{i}")]).wait()
            if i >= 5 and len(list(kept.glob("snapshot-*"))) >= 2:
                break
        end = wait_caught_up(stack.store, stack.bootstrap_servers, timeout_secs=120)[(CATALOG_TOPIC, 0)]

        def newest_offset() -> int:
            newest = snapshots.newest(kept)
            return 0 if newest is None else newest.next_offsets()[(CATALOG_TOPIC, 0)]

        deadline = time.monotonic() + 60
        while newest_offset() <= end - every and time.monotonic() < deadline:
            time.sleep(0.2)
        written = sorted(int(p.name.removeprefix("snapshot-")) for p in kept.glob("snapshot-*"))
        assert end - every < written[-1] <= end and len(written) >= 2
        assert all(b - a >= every for a, b in zip(written, written[1:], strict=False))
        output = strata_replay(stack, tmp_path / "rebuild", "--from-snapshot")
        assert f"rebuilding from {kept / f'snapshot-{written[-1]:012d}'} (offset {written[-1]})" in output
        assert dump(tmp_path / "rebuild" / "store.db") == dump(stack.store)


def test_a_rebuild_tells_its_progress_in_records_folded(server: Server, client: sdk.CatalogClient, make_rrd,
                                                        tmp_path) -> None:
    dataset = client.create_dataset(f"progress-{uuid.uuid4().hex[:8]}")
    dataset.register([make_rrd(f"progress_{i}") for i in range(3)]).wait()
    total = sum(end_offsets(server.bootstrap_servers).values())
    told: list[tuple[int, int]] = []
    replay.rebuild(server.bootstrap_servers, tmp_path / "rebuild", batch_limit=max(1, total // 3),
                   progress=lambda done, of: told.append((done, of)))
    assert told[0] == (0, total) and told[-1] == (total, total)
    assert len(told) >= 4 and [done for done, _ in told] == sorted(done for done, _ in told)


def _replacements(dataset_id: uuid.UUID, *, segments: int, events: int) -> list[Event]:
    """``segments`` segments of three layers each, then registrations replacing random layers of
    them (``on_duplicate="replace"``), ``events`` in all."""
    draw = random.Random(events)
    layers = ["base", "extra", "third"]
    added = [RegisterLayer(f"heavy_{i}", layer, f"file:///heavy/{i}/{layer}-v0.rrd", size_bytes=i)
             for i in range(segments) for layer in layers]
    replaced = [RegisterLayer(f"heavy_{i}", layer, f"file:///heavy/{i}/{layer}-v{n}.rrd", size_bytes=n,
                              on_duplicate=OnDuplicate.REPLACE)
                for n in range(events - len(added))
                for i, layer in [(draw.randrange(segments), draw.choice(layers))]]
    return [Event(dataset_id, command) for command in [*added, *replaced]]


def test_a_replacement_heavy_log_replayed_in_large_batches_equals_the_live_projection(
        server: Server, client: sdk.CatalogClient, tmp_path) -> None:
    dataset = client.create_dataset(f"heavy-{uuid.uuid4().hex[:8]}")
    events = _replacements(dataset.id, segments=300, events=12_000)
    with EventProducer(server.bootstrap_servers) as producer:
        for start in range(0, len(events), 500):  # the live projector folds it in many batches
            producer.send(events[start:start + 500])
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=300)
    total = sum(end_offsets(server.bootstrap_servers).values())
    told: list[int] = []
    replay.rebuild(server.bootstrap_servers, tmp_path / "rebuild", progress=lambda done, _: told.append(done))
    # Every batch after the first is sized by bytes: a log of small events comes in a few.
    assert told[-1] == total and len(told) <= 2 + total // replay.FIRST_BATCH_RECORDS
    rebuilt = dump(tmp_path / "rebuild" / "store.db")
    assert rebuilt == dump(server.store)
    urls = [url for entry_id, _, _, url, *_ in rebuilt["layers"] if entry_id == str(dataset.id)]
    assert len(urls) == 900 and sum(not url.endswith("-v0.rrd") for url in urls) > 800


def test_a_replay_killed_while_it_commits_leaves_the_store_that_was_there(
        server: Server, client: sdk.CatalogClient, make_rrd, tmp_path) -> None:
    dataset = client.create_dataset(f"killed-{uuid.uuid4().hex[:8]}")
    dataset.register([make_rrd(f"killed_{i}") for i in range(2)]).wait()
    into = tmp_path / "rebuild"
    strata_replay(server, into)
    before = dump(into / "store.db")
    with EventProducer(server.bootstrap_servers) as producer:
        producer.send(_replacements(dataset.id, segments=2_000, events=20_000))
    wait_caught_up(server.store, server.bootstrap_servers, timeout_secs=300)

    replaying = subprocess.Popen(
        [sys.executable, "-m", "stack.cli", "replay", "--data-dir", str(server.data_dir), "--into", str(into),
         "--batch-records", "1000", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    partial = into / "store.db.partial"
    try:
        seen, deadline = 0, time.monotonic() + 240
        while replaying.poll() is None and time.monotonic() < deadline:
            size = sum(_size(log) for log in into.glob("*-wal"))
            if seen and size > seen:  # a write-ahead log grows: a batch is being committed
                break
            seen = size
            time.sleep(0.02)
    finally:
        replaying.kill()
        replaying.wait()
    assert seen, "the replay committed nothing before it was killed or timed out"
    assert replaying.returncode == -9
    assert dump(into / "store.db") == before  # the store there before, not the partial one
    assert partial.exists()

    strata_replay(server, into)  # starts its partial store afresh, and completes
    assert not list(into.glob("store.db.partial*"))
    assert dump(into / "store.db") == dump(server.store)


def _size(path: Path) -> int:
    """A file's size; 0 once it is gone (a write-ahead log removed as its store closes)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
