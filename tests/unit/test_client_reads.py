"""A client made with a store and no Kafka cluster reads the whole catalog (what the read commands
of ``strata`` show) and says that Kafka is needed for what only the log can answer; the catalog's
rejected records and its table of datasets, as the client reads them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import sdk
from events import CreateTag, Event
from projector import apply_batch
from projector.stores.sqlite import SqliteStore

from .conftest import T0, at, create, log_record, register, undecodable

DROID, EMPTY = uuid.uuid4(), uuid.uuid4()
NEEDS_KAFKA = r"needs the Kafka cluster, and this client was made without bootstrap_servers: it reads"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A store as the projector leaves it after offsets 0 to 7: two datasets, three layers, a tag
    and two rejected records."""
    path = tmp_path / "store.db"
    projector = SqliteStore(path)
    events = [create(DROID, "droid"), register(DROID, "ep_0", size_bytes=1000),
              register(DROID, "ep_1", size_bytes=2000), register(DROID, "ep_0", "extra", size_bytes=500)]
    records = [log_record(event, offset) for offset, event in enumerate(events)]
    records += [undecodable(b"\x00bad", 4, reason="not Avro"),
                log_record(create(EMPTY, "empty", when=at(5)), 5),
                log_record(Event(DROID, CreateTag("trained", 3), produced_at=T0), 6),
                undecodable(b"\x01\x02\x03", 7, reason="unknown schema")]
    apply_batch(projector, records)
    projector.close()
    yield path


@pytest.fixture
def client(store: Path) -> Iterator[sdk.CatalogClient]:
    reader = sdk.CatalogClient(store=store)
    yield reader
    reader.close()


def test_a_client_without_kafka_reads_the_catalog(client: sdk.CatalogClient) -> None:
    assert client.bootstrap_servers is None
    assert client.dataset_names() == ["droid", "empty"]
    droid = client.get_dataset("droid")
    segments = droid.segment_table().to_arrow_table().to_pylist()
    assert [(s["rerun_segment_id"], s["rerun_layer_names"], s["rerun_size_bytes"]) for s in segments] == [
        ("ep_0", ["base", "extra"], 1500), ("ep_1", ["base"], 2000)]
    assert [(t.name, t.offset) for t in droid.tags()] == [("trained", 3)]
    assert droid.as_of("trained").segment_ids() == ["ep_0", "ep_1"]
    assert len(droid.as_of(3).manifest().to_arrow_table()) == 2
    assert client.as_of(1).dataset_names() == ["droid"]
    changed = droid.diff("trained").to_arrow_table().to_pylist()
    assert [(c["rerun_segment_id"], c["rerun_layer_name"], c["change"]) for c in changed] == [
        ("ep_0", "extra", "layer_added")]
    kinds = [change.kind for change in client.changes(0, dataset="droid", timeout_secs=0)]
    assert kinds[:3] == [sdk.ChangeKind.DATASET_CREATED, sdk.ChangeKind.LAYER_ADDED,
                         sdk.ChangeKind.SEGMENT_ADDED]


def test_writes_and_log_lookups_without_kafka_say_that_kafka_is_needed(client: sdk.CatalogClient,
                                                                      tmp_path: Path) -> None:
    droid = client.get_dataset("droid")
    writes = {
        "create_dataset": lambda: client.create_dataset("new"),
        "register": lambda: droid.register([(tmp_path / "absent.rrd").as_uri()]),
        "create_tag": lambda: droid.create_tag("later"),
        "unregister": lambda: droid.unregister(segments_to_drop=["ep_0"]),
        "set_name": lambda: droid.set_name("renamed"),
    }
    for name, write in writes.items():
        with pytest.raises(ValueError, match=rf"^writing {NEEDS_KAFKA}") as refused:
            write()
        assert "bootstrap_servers" in str(refused.value), name
    with pytest.raises(ValueError, match=rf"^point 2026-03-03T12:00:00\+00:00 \(a time, looked up in the "
                                         rf"log\) {NEEDS_KAFKA}"):
        client.as_of(datetime(2026, 3, 3, 12, tzinfo=UTC))
    with pytest.raises(ValueError, match=rf"^point 9 is past the store's 8 \(the log offsets it has "
                                         rf"folded\): a later point {NEEDS_KAFKA}"):
        droid.as_of(9)
    with pytest.raises(ValueError, match=rf"^a stack's URL {NEEDS_KAFKA}"):
        _ = client.url
    assert client.dataset_names() == ["droid", "empty"]  # nothing was written, the client still reads


def test_a_client_needs_a_store_or_a_stack_url() -> None:
    with pytest.raises(ValueError, match=r"needs a store to read \(and bootstrap_servers to write\)"):
        sdk.CatalogClient()


def test_rejections_are_read_with_their_bytes_and_reasons(client: sdk.CatalogClient) -> None:
    rejected = client.rejections()
    assert all(isinstance(r, sdk.Rejection) for r in rejected)
    assert [(r.position.offset, r.raw, r.reason) for r in rejected] == [
        (4, b"\x00bad", "not Avro"), (7, b"\x01\x02\x03", "unknown schema")]
    assert [r.position.offset for r in client.as_of(5).rejections()] == [4]
    assert client.as_of(4).rejections() == []


def test_the_dataset_table_counts_segments_layers_and_bytes_per_dataset(client: sdk.CatalogClient) -> None:
    rows = client.dataset_table().to_arrow_table().to_pylist()
    assert [(r["name"], r["id"], r["segments"], r["layers"], r["size_bytes"]) for r in rows] == [
        ("droid", str(DROID), 2, 3, 3500), ("empty", str(EMPTY), 0, 0, 0)]
    assert all(r["updated_at"].tzinfo is not None for r in rows)
    then = client.as_of(3).dataset_table().to_arrow_table().to_pylist()
    assert [(r["name"], r["segments"], r["layers"], r["size_bytes"]) for r in then] == [("droid", 2, 2, 3000)]


def test_a_selection_s_manifest_is_the_dataset_s_rows_of_its_segments(client: sdk.CatalogClient) -> None:
    droid = client.get_dataset("droid")
    whole = droid.manifest().to_arrow_table().to_pylist()
    ep_0 = droid.filter_segments(["ep_0", "nope"]).manifest().to_arrow_table().to_pylist()
    assert ep_0 == [row for row in whole if row["rerun_segment_id"] == "ep_0"] and len(ep_0) == 2
    assert droid.filter_segments([]).manifest().to_arrow_table().num_rows == 0
