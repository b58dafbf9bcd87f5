"""``recordings.rrd`` reads an ``.rrd``'s footer and chunks itself; on every file, what it reads
equals what rerun-sdk's own reader (``rerun.chunk.RrdReader``) gives."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from recordings import read_recording, rrd
from stack.droid import write_episode


def multi_timeline(path: Path) -> None:
    """Three timelines of each kind, a static entity, nested properties and a recording name."""
    import rerun as rr

    with rr.RecordingStream("multi", recording_id="rec_multi") as rec:
        rec.save(path)
        rec.send_recording_name("several timelines")
        rec.send_property("robot", rr.AnyValues(model="franka", arms=2))
        rec.send_property("scene/lab", rr.AnyValues(building="B2"))
        rec.log("world/static", rr.Points3D([[0, 0, 0]]), static=True)
        for step in range(4):
            rec.set_time("frame", sequence=step)
            rec.set_time("wall", timestamp=1.7e9 + step)
            rec.set_time("elapsed", duration=step * 0.5)
            rec.log("world/points", rr.Points3D(np.full((2, 3), step, dtype=np.float32)))
            rec.log("world/arm/joint", rr.Scalars([float(step)]))


def with_blueprint(path: Path) -> None:
    import rerun as rr
    import rerun.blueprint as rrb

    with rr.RecordingStream("with_bp", recording_id="rec_bp") as rec:
        rec.save(path, default_blueprint=rrb.Spatial3DView(origin="/"))
        rec.log("points", rr.Points3D([[1, 2, 3]]))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("rrd")
    made = {"droid": directory / "ep_0.rrd", "multi": directory / "multi.rrd",
            "blueprint": directory / "with_bp.rrd"}
    write_episode(made["droid"], "ep_0", 0, steps=30)
    multi_timeline(made["multi"])
    with_blueprint(made["blueprint"])
    return made


def read_all(path: Path) -> list[rrd.Manifest]:
    with rrd.file_ranges(path) as read:
        return rrd.manifests(read, path.stat().st_size, path.as_uri())


@pytest.mark.parametrize("name", ["droid", "multi", "blueprint"])
def test_each_store_s_schema_index_and_id_equal_rerun_sdk_s(files, name):
    from rerun.chunk import RrdReader

    path = files[name]
    manifests = read_all(path)
    reader = RrdReader(path)
    stores = ([(rrd.RECORDING, s) for s in reader.recordings()]
              + [(rrd.BLUEPRINT, s) for s in reader.blueprints()])
    assert sorted((m.kind, m.recording_id) for m in manifests) == sorted(
        (kind, str(store.recording_id)) for kind, store in stores)
    for kind, store_id in stores:
        [ours] = [m for m in manifests if m.kind == kind and m.recording_id == store_id.recording_id]
        store = reader.store(store=store_id)
        theirs = store.schema().to_arrow()
        # Order included: the dataset schema lists columns in the order the files give them.
        assert ours.schema.equals(theirs, check_metadata=True), (ours.schema.names, theirs.names)
        index = pa.Table.from_batches([store._chunk_index().to_arrow()])
        assert ours.index.equals(index, check_metadata=True)


@pytest.mark.parametrize("name", ["droid", "multi"])
def test_a_chunk_read_by_its_byte_range_equals_rerun_sdk_s_chunk(files, name):
    from rerun.chunk import RrdReader

    path = files[name]
    [manifest] = [m for m in read_all(path) if m.kind == rrd.RECORDING]
    reader = RrdReader(path)
    theirs = {batch.schema.metadata[b"rerun:id"]: batch for batch in (
        chunk.to_record_batch() for chunk in reader.store(store=reader.recordings()[0]).stream())}
    rows = manifest.index.select(["chunk_byte_offset", "chunk_byte_size"]).to_pylist()
    with rrd.file_ranges(path) as read:
        ours = rrd.chunk_batches(read, [(row["chunk_byte_offset"], row["chunk_byte_size"]) for row in rows])
    assert len(ours) == len(theirs) == manifest.index.num_rows
    for batch in ours:
        assert batch.equals(theirs[batch.schema.metadata[b"rerun:id"]], check_metadata=True)


def test_another_rerun_version_s_file_is_read_by_rerun_sdk_with_the_same_facts(files, tmp_path):
    """A file whose header names another writer version takes rerun-sdk's reader; on a file both
    can read, the two paths give the same recording."""
    data = bytearray(files["multi"].read_bytes())
    assert data[4:6] == bytes([0, 41])
    data[5] = 40
    older = tmp_path / "older.rrd"
    older.write_bytes(bytes(data))
    with rrd.file_ranges(older) as read:
        with pytest.raises(rrd.NotThisFormat, match="rerun 0.40"):
            rrd.manifests(read, len(data), older.as_uri())

    ours, theirs = read_recording(files["multi"].as_uri()), read_recording(older.as_uri())
    assert ours.recording_id == theirs.recording_id == "rec_multi"
    assert ours.arrow_schema.equals(theirs.arrow_schema, check_metadata=True)
    assert ours.properties is not None and ours.properties.equals(theirs.properties)
    assert ours.properties.column("property:robot:arms").to_pylist() == [[2]]
    assert ours.properties.column("property:scene\\:lab:building").to_pylist() == [["B2"]]
    assert (ours.num_chunks, ours.index_ranges) == (theirs.num_chunks, theirs.index_ranges)
    assert {r.timeline for r in ours.index_ranges} == {"frame", "wall", "elapsed", "log_time"}


def test_a_file_whose_writer_did_not_finish_it_says_so(files, tmp_path):
    data = files["droid"].read_bytes()
    unfinished = tmp_path / "unfinished.rrd"
    unfinished.write_bytes(data[:-32])  # the trailer a finished writer adds
    with pytest.raises(ValueError, match="it has no footer, its writer did not finish it"):
        read_recording(unfinished.as_uri())


def test_a_blueprint_is_read_from_its_own_store(files):
    recording = read_recording(files["blueprint"].as_uri(), blueprint=True)
    assert recording.recording_id != "rec_bp"
    assert read_recording(files["blueprint"].as_uri()).recording_id == "rec_bp"


def test_a_corrupt_footer_is_a_clear_error(files, tmp_path):
    data = bytearray(files["droid"].read_bytes())
    start, length = struct.unpack_from("<QQ", data, len(data) - 32)
    data[start:start + length] = bytes(length)  # the footer's bytes zeroed, its trailer intact
    corrupt = tmp_path / "corrupt_footer.rrd"
    corrupt.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt_footer.rrd is not a readable .rrd recording: its footer"):
        read_recording(corrupt.as_uri())
