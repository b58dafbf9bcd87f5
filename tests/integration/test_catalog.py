"""The catalog of the seeds on the real broker and Spark job: entries, registration, unregister,
blueprints, schemas, properties and tables."""

from __future__ import annotations

import threading
import uuid

import pyarrow as pa
import pytest

import sdk
from events import DecodeError, DefineSchema, Event, RegisterLayer, decode
from producers import end_offsets, read_range
from stack import Server
from stack.droid import write_episode


def decode_record(value: bytes):
    return decode(value), len(value)


def decoded(records: list[tuple[str, int, int, bytes | None]]) -> list[Event]:
    """The events among ``records``: the shared log also holds the malformed records other tests
    write on purpose."""
    events = []
    for *_, value in records:
        if value is None:
            continue
        try:
            events.append(decode(value))
        except DecodeError:
            continue
    return events


def rows(df, *columns: str) -> list[dict]:
    table = df.to_arrow_table()
    return table.select(list(columns)).to_pylist() if columns else table.to_pylist()


# -- entries ----------------------------------------------------------------------------------


def test_entry_lifecycle(client: sdk.CatalogClient, make_rrd) -> None:
    name = f"lifecycle-{uuid.uuid4().hex[:8]}"
    entry = client.create_dataset(name)
    assert client.get_dataset(name=name) == entry == client.get_dataset(id=entry.id)
    assert client.get_dataset(id=str(entry.id)).name == name
    assert name in client.dataset_names() and entry in client.entries()
    created, updated = entry.created_at, entry.updated_at

    assert client.create_dataset(name, exist_ok=True) == entry
    with pytest.raises(sdk.AlreadyExistsError, match="already exists"):
        client.create_dataset(name)

    entry.register([make_rrd("lifecycle_a")]).wait()
    assert entry.updated_at > updated
    updated = entry.updated_at

    entry.set_name(f"{name} (renamed)")
    assert entry.name == f"{name} (renamed)" and entry.updated_at > updated
    assert entry.created_at == created
    with pytest.raises(LookupError):
        client.get_dataset(name=name)
    other = client.create_dataset(name)  # the old name is free again
    with pytest.raises(sdk.AlreadyExistsError):
        other.set_name(f"{name} (renamed)")

    entry.delete()
    with pytest.raises(sdk.NotFoundError):
        client.get_dataset(id=entry.id)
    with pytest.raises(LookupError):
        client.get_dataset(name=f"{name} (renamed)")
    assert entry not in client.datasets()
    with pytest.raises(sdk.NotFoundError):
        entry.delete()
    with pytest.raises(ValueError, match="was deleted"):  # a failed item, as in rerun
        entry.register([make_rrd("lifecycle_b")]).wait()
    client.create_dataset(f"{name} (renamed)")  # the deleted dataset's name is free too


@pytest.mark.parametrize("name, bad", [("a/b", "/"), ("tab\there", "\t"), ("é", "é"), ("x" * 181, None),
                                       ("", None)])
def test_invalid_names_are_refused_before_anything_is_produced(server: Server, client, name, bad) -> None:
    before = end_offsets(server.bootstrap_servers)
    with pytest.raises(ValueError) as info:
        client.create_dataset(name)
    if bad is not None:
        assert repr(bad) in str(info.value)
    assert end_offsets(server.bootstrap_servers) == before


def test_two_clients_racing_for_a_name_exactly_one_wins(server: Server) -> None:
    name = f"race-{uuid.uuid4().hex[:8]}"
    clients = [server.client(producer_id=f"racer-{i}") for i in range(2)]
    results: list[object] = [None, None]
    start = threading.Barrier(2)

    def create(i: int) -> None:
        start.wait()
        try:
            results[i] = clients[i].create_dataset(name)
        except sdk.AlreadyExistsError as exc:
            results[i] = exc

    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [r for r in results if isinstance(r, sdk.DatasetEntry)]
    assert len(winners) == 1, results
    assert sum(isinstance(r, sdk.AlreadyExistsError) for r in results) == 1
    assert clients[0].get_dataset(name=name) == winners[0]


# -- registration -----------------------------------------------------------------------------


def test_failed_items_do_not_stop_the_others(dataset: sdk.DatasetEntry, make_rrd) -> None:
    first = make_rrd("items_a")
    dataset.register([first]).wait()
    operation = dataset.register([make_rrd("items_b"), make_rrd("items_a", name="items_a2"),
                                  make_rrd("items_c")], layer_name=["base", "base", "extra"])
    results = list(operation.iter_results())
    assert [(r.segment_id, r.is_success) for r in results] == [
        ("items_b", True), ("items_a", False), ("items_c", True)]
    assert "already exists" in results[1].error
    with pytest.raises(ValueError, match="1 of 3"):
        operation.wait()
    assert rows(dataset.segment_table(), "rerun_segment_id", "rerun_layer_names") == [
        {"rerun_segment_id": "items_a", "rerun_layer_names": ["base"]},
        {"rerun_segment_id": "items_b", "rerun_layer_names": ["base"]},
        {"rerun_segment_id": "items_c", "rerun_layer_names": ["extra"]}]


def test_skip_and_replace(dataset: sdk.DatasetEntry, make_rrd) -> None:
    dataset.register([make_rrd("dup", name="v1", properties={"q": {"score": 1}})]).wait()
    dataset.register([make_rrd("dup", name="extra")], layer_name="extra").wait()
    assert dataset.register([make_rrd("dup", name="v2")], on_duplicate="skip").wait().segment_ids == ["dup"]
    [row] = rows(dataset.manifest(), "rerun_layer_name", "rerun_storage_url")[:1]
    assert row["rerun_storage_url"].endswith("v1.rrd")

    v3 = make_rrd("dup", name="v3", properties={"q": {"score": 3}})
    dataset.register([v3], on_duplicate="replace").wait()
    [segment] = rows(dataset.segment_table())
    assert segment["rerun_layer_names"] == ["extra", "base"]  # the replaced layer moves last
    assert segment["rerun_storage_urls"][-1] == v3
    assert segment["property:q:score"] == [3]


def test_many_writers_replacing_one_layer_end_with_the_last_in_log_order(
        server: Server, dataset: sdk.DatasetEntry, make_rrd) -> None:
    uris = [make_rrd("contested", name=f"writer{i}") for i in range(6)]
    clients = [server.client(producer_id=f"writer-{i}") for i in range(len(uris))]
    entries = [c.get_dataset(id=dataset.id) for c in clients]
    operations: list = [None] * len(uris)
    start = threading.Barrier(len(uris))

    def write(i: int) -> None:
        start.wait()
        operations[i] = entries[i].register([uris[i]], on_duplicate="replace")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(uris))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for operation in operations:
        operation.wait()
    last = max(range(len(uris)), key=lambda i: operations[i]._items[0].position.offset)
    [layer] = rows(dataset.manifest(), "rerun_storage_url")
    assert layer["rerun_storage_url"] == uris[last]


def test_register_prefix_and_unregister(dataset: sdk.DatasetEntry, make_rrd, tmp_path) -> None:
    with pytest.raises(ValueError, match="no rrd files found in"):
        dataset.register_prefix((tmp_path / "empty").mkdir() or (tmp_path / "empty").as_uri())
    nested = tmp_path / "prefix" / "deeper"
    nested.mkdir(parents=True)
    for i, directory in enumerate([tmp_path / "prefix", nested, nested]):
        uri = make_rrd(f"pre_{i}")
        (directory / f"pre_{i}.rrd").write_bytes((tmp_path / f"pre_{i}.rrd").read_bytes())
        assert uri
    ids = dataset.register_prefix((tmp_path / "prefix").as_uri(), layer_name="raw").wait().segment_ids
    assert sorted(ids) == ["pre_0", "pre_1", "pre_2"]
    dataset.register([make_rrd("pre_0", name="pre_0_extra")], layer_name="extra").wait()

    with pytest.raises(ValueError, match="segments_to_drop or layers_to_drop"):
        dataset.unregister(segments_to_drop=[], layers_to_drop=[])
    dataset.unregister(segments_to_drop=["pre_1"], layers_to_drop=[]).wait()
    assert sorted(dataset.segment_ids()) == ["pre_0", "pre_2"]
    dataset.unregister(segments_to_drop=[], layers_to_drop=["raw"]).wait()
    assert dataset.segment_ids() == ["pre_0"]  # pre_2 lost its last layer
    dataset.unregister(segments_to_drop=["nope"], layers_to_drop=["extra"]).wait()  # no-op
    assert rows(dataset.segment_table(), "rerun_layer_names") == [{"rerun_layer_names": ["extra"]}]

    dataset.register([make_rrd("pre_2", name="pre_2_again")]).wait()  # like new: it goes last
    assert dataset.segment_ids() == ["pre_0", "pre_2"]
    info = dataset.info()
    assert info.num_segments == 2
    assert {(x.name, x.num_segments) for x in info.layers} == {("extra", 1), ("base", 1)}


def test_blueprints(dataset: sdk.DatasetEntry, tmp_path, make_rrd) -> None:
    import rerun.blueprint as rrb

    paths = []
    for name in ("a", "b"):
        path = tmp_path / f"{name}.rbl"
        rrb.Blueprint(rrb.Spatial3DView(origin="/")).save("strata-test", path)
        paths.append(path.as_uri())
    assert dataset.default_blueprint() is None
    first = dataset.register_blueprint(paths[0])
    assert dataset.default_blueprint() == first and dataset.blueprints() == [first]
    second = dataset.register_blueprint(paths[1], set_default=False)
    assert dataset.default_blueprint() == first
    assert dataset.register_blueprint(paths[0]) == first  # the same blueprint again replaces it
    assert dataset.blueprints() == [first, second]  # segments stay in registration order
    dataset.set_default_blueprint(second)
    assert dataset.default_blueprint() == second
    dataset.set_default_blueprint(None)
    assert dataset.default_blueprint() is None
    # A recording is not a blueprint, and a blueprint is not a recording.
    with pytest.raises(ValueError, match="holds no blueprint"):
        dataset.register_blueprint(make_rrd("not_a_blueprint"))
    with pytest.raises(ValueError, match="register it with register_blueprint"):
        dataset.register([_copy_as_rrd(paths[0], tmp_path)])
    (tmp_path / "notes.txt").write_text("not a blueprint")
    with pytest.raises(ValueError, match="unsupported file type .txt for a blueprint"):
        dataset.register_blueprint((tmp_path / "notes.txt").as_uri())
    assert dataset.blueprints() == [first, second]


def _copy_as_rrd(uri: str, directory) -> str:
    """A blueprint file under an ``.rrd`` name."""
    import shutil

    target = directory / "blueprint.rrd"
    shutil.copy(uri[len("file://"):], target)
    return target.as_uri()


# -- schemas and properties -------------------------------------------------------------------


@pytest.mark.parametrize("first, second", [
    (pa.int32(), pa.int64()),
    (pa.float64(), pa.float32()),
    (pa.list_(pa.float32(), 3), pa.list_(pa.float32(), 2)),
    (pa.dictionary(pa.int32(), pa.string()), pa.string()),
], ids=["int32-int64", "float64-float32", "list-length", "dictionary-plain"])
def test_incompatible_schemas_fail_and_appear_nowhere(dataset, make_parquet, first, second) -> None:
    dataset.register([make_parquet("s1", {"/robot:value": first})]).wait()
    result = next(dataset.register([make_parquet("s2", {"/robot:value": second})]).iter_results())
    assert result.error is not None and "schema" in result.error
    assert dataset.segment_ids() == ["s1"]
    assert len(rows(dataset.manifest())) == 1
    assert dataset.arrow_schema().field("/robot:value").type == first


def test_compatible_schema_changes_merge(dataset, make_parquet) -> None:
    point = pa.struct([("x", pa.float32())])
    dataset.register([make_parquet("m1", {"/p": point, "/n": pa.null(), "/v": pa.int64()})]).wait()
    wider = pa.struct([("x", pa.float32()), ("y", pa.float32())])
    dataset.register([make_parquet("m2", {"/p": wider, "/n": pa.string(), "/w": pa.bool_()})]).wait()
    schema = dataset.arrow_schema()
    assert schema.field("/p").type == wider
    assert schema.field("/n").type == pa.string()
    assert schema.names == ["/p", "/n", "/v", "/w"]
    assert dataset.info().num_component_columns == 4

    # The only layer with /v as int64 goes: another type for /v is then accepted.
    dataset.unregister(segments_to_drop=["m1"]).wait()
    dataset.register([make_parquet("m3", {"/v": pa.int32()})]).wait()
    assert dataset.arrow_schema().field("/v").type == pa.int32()


def test_properties_given_with_the_uri(dataset: sdk.DatasetEntry, make_rrd) -> None:
    base = make_rrd("props", properties={"quality": {"tracking_good": False}})
    dataset.register([base]).wait()
    dataset.register([make_rrd("props", name="props_q")], layer_name="quality",
                     properties={"quality": {"tracking_good": True, "note": "checked"}}).wait()
    [segment] = rows(dataset.segment_table())
    assert segment["property:quality:tracking_good"] == [True]
    assert segment["property:quality:note"] == ["checked"]
    manifest = rows(dataset.manifest(), "rerun_layer_name", "property:quality:tracking_good")
    assert manifest == [{"rerun_layer_name": "base", "property:quality:tracking_good": [False]},
                        {"rerun_layer_name": "quality", "property:quality:tracking_good": [True]}]
    with pytest.raises(ValueError, match="more than"):
        dataset.register([make_rrd("huge")], properties={"big": {"blob": "x" * 300_000}})


# -- schemas by reference -------------------------------------------------------------------------


def test_schemas_are_defined_once_and_registrations_stay_small(server: Server, client, tmp_path) -> None:
    """DROID-like episodes share one layer schema and one properties schema: the log gets each
    once, before the first RegisterLayer that names them (and not at all if it has them: other
    tests on the shared stack may have registered DROID-like episodes first), a client connected
    later defines none of them, and every RegisterLayer stays under 1 KB."""
    first = client.create_dataset(f"droid-{uuid.uuid4().hex[:8]}")
    second = client.create_dataset(f"droid-{uuid.uuid4().hex[:8]}")
    paths = []
    for index in range(4):
        paths.append(tmp_path / f"episode_{index}.rrd")
        write_episode(paths[-1], f"episode_{uuid.uuid4().hex[:8]}_{index}", index)

    before = end_offsets(server.bootstrap_servers)
    first.register([p.as_uri() for p in paths[:3]]).wait()
    middle = end_offsets(server.bootstrap_servers)
    later = server.client()  # a connection that has defined nothing: the store has the schemas
    later.get_dataset(name=second.name).register([paths[3].as_uri()]).wait()
    records = [decode_record(value) for *_, value in
               read_range(server.bootstrap_servers, before, end_offsets(server.bootstrap_servers))]

    layers = [event.command for event, _ in records if isinstance(event.command, RegisterLayer)]
    named = {layers[0].schema_sha256, layers[0].properties_schema_sha256}
    assert len(layers) == 4 and len(named) == 2
    for command in layers:
        assert {command.schema_sha256, command.properties_schema_sha256} == named
    assert all(size < 1024 for event, size in records if isinstance(event.command, RegisterLayer))

    # The definitions come first, each once, and are those of the schemas the log lacked.
    known = {event.command.sha256 for event in decoded(read_range(server.bootstrap_servers, {}, before))
             if isinstance(event.command, DefineSchema)}
    ours = [event.command.sha256 for event, _ in records if isinstance(event.command, DefineSchema)]
    kinds = [type(event.command).__name__ for event, _ in records]
    assert kinds == ["DefineSchema"] * len(ours) + ["RegisterLayer"] * 4
    assert sorted(ours) == sorted(named - known)
    assert sum(middle.values()) == sum(before.values()) + len(ours) + 3  # the later client's: one layer
    table = second.segment_table().to_arrow_table()
    assert table.column("property:episode:scene_id").to_pylist() == [[3]]
    assert table.column("property:episode:building").to_pylist() == [["ILIAD"]]
    assert second.arrow_schema() == first.arrow_schema()
