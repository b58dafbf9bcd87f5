"""A dataset entry's calls end to end without a broker: a producer that folds each batch into
the store as the projector would, so that every operation's wait returns with the projector's
outcome. The reads of a layer registered without a schema, a segment's store with the assets that
apply to it, and the dataset's history through its tags."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import sdk
from commands.file_schemas import FILE_SCHEMAS
from projector import views
from recordings import read_recording

from .conftest import register
from .test_registration import recording


def static_recording(path: Path, recording_id: str) -> str:
    """An .rrd of static data only (an asset); its URI."""
    import rerun as rr

    rec = rr.RecordingStream("app", recording_id=recording_id)
    rec.save(path)
    rec.log("mesh", rr.Points3D([[0, 0, 0], [1, 1, 1]]), static=True)
    rec.flush()
    del rec
    return path.as_uri()


def test_a_layer_registered_without_a_schema_shows_its_file_s_schema(stack, tmp_path) -> None:
    uri = recording(tmp_path / "ep_0.rrd", "ep_0")
    size = Path(uri.removeprefix("file://")).stat().st_size
    stack.apply([register(stack.droid, "ep_0", url=uri, size_bytes=size)])  # no schema named

    schema = stack.dataset.arrow_schema()

    from_file = pa.ipc.read_schema(pa.py_buffer(read_recording(uri).schema_bytes()))
    assert schema.names == from_file.names and len(schema) > 1
    assert FILE_SCHEMAS.get((uri, size)) is not None
    assert stack.dataset.info().num_component_columns == len(schema)


def test_a_segment_s_store_holds_the_assets_that_apply_to_it(stack, tmp_path) -> None:
    dataset = stack.dataset
    dataset.register([recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    mesh = dataset.register_asset(static_recording(tmp_path / "mesh.rrd", "gripper_mesh"),
                                  mode="opt_in", segments=["ep_1"])
    assert (mesh, dataset.assets()) == ("gripper_mesh", ["gripper_mesh"])
    assert [dataset.assets_for_segment(s) for s in ("ep_0", "ep_1")] == [[], ["gripper_mesh"]]

    def entities(segment_id: str, **options: bool) -> set[str]:
        store = dataset.segment_store(segment_id, **options)
        return {c.entity_path for c in store.schema().component_columns()}

    assert "/mesh" in entities("ep_1") and "/points" in entities("ep_1")
    assert "/mesh" not in entities("ep_0")
    assert "/mesh" not in entities("ep_1", include_assets=False)
    with pytest.raises(sdk.NotFoundError, match="Segment 'ep_9' not found in dataset 'droid'"):
        dataset.segment_store("ep_9")


def test_a_tag_names_a_point_that_later_writes_do_not_move(stack, tmp_path) -> None:
    dataset = stack.dataset
    dataset.register([recording(tmp_path / "ep_0.rrd", "ep_0")]).wait()
    tag = dataset.create_tag("first")
    dataset.register([recording(tmp_path / "ep_1.rrd", "ep_1")]).wait()

    assert [t.name for t in dataset.tags()] == ["first"] and tag.offset > 0
    assert dataset.as_of("first").segment_ids() == ["ep_0"]
    assert dataset.segment_ids() == ["ep_0", "ep_1"]
    changes = dataset.diff("first").to_arrow_table()
    assert sorted(zip(changes.column("rerun_segment_id").to_pylist(), changes.column("change").to_pylist(),
                      strict=True)) == [("ep_1", "layer_added"), ("ep_1", "segment_added")]
    with pytest.raises(LookupError, match=r"dataset 'droid' has no tag 'second' \(its tags: 'first'\)"):
        dataset.as_of("second")
    with pytest.raises(ValueError, match="read-only"):
        dataset.as_of("first").create_tag("again")

    dataset.delete_tag("first")
    assert dataset.tags() == []
    with pytest.raises(sdk.NotFoundError, match="deleting tag 'first' of dataset 'droid'"):
        dataset.delete_tag("first")


def test_an_entry_id_is_a_uuid_with_rerun_s_as_bytes(stack) -> None:
    entry_id = stack.dataset.id
    assert isinstance(entry_id, uuid.UUID)
    assert entry_id == stack.droid and hash(entry_id) == hash(stack.droid)
    assert str(entry_id) == str(stack.droid)
    assert entry_id.as_bytes() == stack.droid.bytes  # rerun-sdk's EntryId.as_bytes()
    assert stack.client.get_dataset(id=entry_id).name == "droid"
    assert entry_id in {stack.droid} and stack.dataset in stack.client.entries()


def test_a_segment_table_and_a_manifest_are_made_once_per_commit(stack, tmp_path, monkeypatch) -> None:
    made: list[str] = []
    for name in ("segment_table", "manifest_table"):
        read = getattr(views, name)
        monkeypatch.setattr(views, name,
                            lambda *args, name=name, read=read: (made.append(name), read(*args))[1])
    dataset = stack.dataset
    dataset.register([recording(tmp_path / "ep_0.rrd", "ep_0")]).wait()
    first = stack.producer.next_offset
    for _ in range(3):
        assert pa.table(dataset.segment_table()).column("rerun_segment_id").to_pylist() == ["ep_0"]
        assert pa.table(dataset.manifest()).num_rows == 1
    assert made == ["segment_table", "manifest_table"]
    dataset.register([recording(tmp_path / "ep_1.rrd", "ep_1")]).wait()  # the projector commits
    assert pa.table(dataset.segment_table()).column("rerun_segment_id").to_pylist() == ["ep_0", "ep_1"]
    assert pa.table(dataset.manifest()).num_rows == 2
    assert made == ["segment_table", "manifest_table"] * 2
    assert pa.table(dataset.as_of(first).segment_table()).num_rows == 1  # another point, read anew
