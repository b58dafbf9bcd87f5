"""Reading recording ids, sizes and properties from .rrd, Parquet and Arrow IPC files."""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from recordings import NotFoundError, Recording, local_path, read_recording

TABLE = pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})


@pytest.fixture(scope="module")
def rrd(tmp_path_factory) -> Path:
    """A small recording with id 'seg_x', one point cloud and one property."""
    import rerun as rr

    path = tmp_path_factory.mktemp("rrd") / "seg_x.rrd"
    rec = rr.RecordingStream("app", recording_id="seg_x")
    rec.save(path)
    rec.log("points", rr.Points3D([[1, 2, 3]]))
    rec.send_property("quality", rr.AnyValues(tracking_good=True))
    rec.flush()
    del rec
    assert path.stat().st_size > 0
    return path


def with_recording_id(table: pa.Table, recording_id: bytes) -> pa.Table:
    return table.replace_schema_metadata({b"recording_id": recording_id, b"other": b"kept"})


# -- .rrd -----------------------------------------------------------------------------------------


def test_rrd_recording_id_size_and_properties(rrd):
    recording = read_recording(rrd.as_uri())

    assert recording.recording_id == "seg_x"
    assert recording.uri == rrd.as_uri()
    assert recording.size_bytes == rrd.stat().st_size == os.path.getsize(rrd)
    assert recording.properties is not None
    assert recording.properties.num_rows == 1
    assert "property:quality:tracking_good" in recording.properties.column_names
    assert recording.properties.column("property:quality:tracking_good").to_pylist() == [[True]]
    assert all(name.startswith("property:") for name in recording.properties.column_names)


def test_rrd_schema_and_properties_serialize(rrd):
    recording = read_recording(rrd.as_uri())
    assert isinstance(recording.arrow_schema, pa.Schema)
    assert len(recording.arrow_schema) > 0
    assert pa.ipc.read_schema(pa.py_buffer(recording.schema_bytes())) == recording.arrow_schema
    table = pa.ipc.open_stream(recording.properties_bytes()).read_all()
    assert table.equals(recording.properties)


def test_corrupt_rrd_is_a_value_error(tmp_path):
    path = tmp_path / "corrupt.rrd"
    path.write_bytes(random.Random(1).randbytes(4096))
    with pytest.raises(ValueError, match="corrupt.rrd"):
        read_recording(path.as_uri())


def test_empty_rrd_is_a_value_error(tmp_path):
    path = tmp_path / "empty.rrd"
    path.write_bytes(b"")
    with pytest.raises(ValueError):
        read_recording(path.as_uri())


@pytest.mark.parametrize("fraction", [0.01, 0.5, 0.99])
def test_truncated_rrd_is_a_value_error(rrd, tmp_path, fraction):
    data = rrd.read_bytes()
    path = tmp_path / "truncated.rrd"
    path.write_bytes(data[:int(len(data) * fraction)])
    with warnings.catch_warnings(), pytest.raises(ValueError):
        warnings.simplefilter("ignore")  # rerun warns that the file has no footer
        read_recording(path.as_uri())


# -- Parquet and Arrow IPC ------------------------------------------------------------------------


def test_parquet_recording_id_from_schema_metadata(tmp_path):
    path = tmp_path / "rec.parquet"
    pq.write_table(with_recording_id(TABLE, b"rec_p"), path)

    recording = read_recording(path.as_uri())

    assert recording.recording_id == "rec_p"
    assert recording.size_bytes == path.stat().st_size
    assert recording.arrow_schema.names == ["x", "y"]
    assert recording.properties is None
    assert recording.properties_bytes() == b""


@pytest.mark.parametrize("suffix", [".arrow", ".feather", ".ipc"])
def test_arrow_ipc_file_recording_id(tmp_path, suffix):
    path = tmp_path / f"rec{suffix}"
    table = with_recording_id(TABLE, b"rec_ipc")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)

    recording = read_recording(path.as_uri())

    assert recording.recording_id == "rec_ipc"
    assert recording.size_bytes == path.stat().st_size
    assert recording.arrow_schema.names == ["x", "y"]


def test_arrow_ipc_stream_recording_id(tmp_path):
    path = tmp_path / "rec.arrows"
    table = with_recording_id(TABLE, b"rec_stream")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    assert read_recording(path.as_uri()).recording_id == "rec_stream"


def test_uri_with_escaped_characters(tmp_path):
    path = tmp_path / "my recording #1.parquet"
    pq.write_table(with_recording_id(TABLE, b"rec_space"), path)
    uri = path.as_uri()
    assert "%20" in uri and "%23" in uri
    assert local_path(uri) == path
    assert read_recording(uri).recording_id == "rec_space"


# -- errors ---------------------------------------------------------------------------------------


def test_missing_file_is_not_found(tmp_path):
    uri = (tmp_path / "missing.rrd").as_uri()
    with pytest.raises(NotFoundError) as info:
        read_recording(uri)
    assert uri in str(info.value)
    assert isinstance(info.value, LookupError)
    assert not isinstance(info.value, ValueError)


def test_directory_is_a_value_error(tmp_path):
    directory = tmp_path / "dir.rrd"
    directory.mkdir()
    with pytest.raises(ValueError, match="not a file"):
        read_recording(directory.as_uri())


def test_plain_path_suggests_the_file_uri(tmp_path):
    path = tmp_path / "rec.parquet"
    pq.write_table(with_recording_id(TABLE, b"rec_p"), path)
    with pytest.raises(ValueError) as info:
        read_recording(str(path))
    message = str(info.value)
    assert "file://" in message
    assert path.as_uri() in message


def test_relative_plain_path_suggests_an_absolute_file_uri():
    with pytest.raises(ValueError) as info:
        read_recording("data/rec.rrd")
    assert Path("data/rec.rrd").absolute().as_uri() in str(info.value)


@pytest.mark.parametrize("uri", ["http://example.com/rec.rrd", "https://example.com/a.parquet",
                                 "gs://bucket/rec.rrd"])
def test_url_of_another_kind_is_a_value_error(uri):
    with pytest.raises(ValueError, match="file:// or s3://"):
        read_recording(uri)


def test_file_url_on_another_host_is_a_value_error():
    with pytest.raises(ValueError, match="host"):
        read_recording("file://fileserver/share/rec.rrd")


def test_non_string_uri_is_a_value_error(tmp_path):
    with pytest.raises(ValueError):
        read_recording(tmp_path / "rec.rrd")  # a Path, not a URI string


def test_parquet_without_recording_id(tmp_path):
    path = tmp_path / "anonymous.parquet"
    pq.write_table(TABLE, path)
    with pytest.raises(ValueError, match="recording_id"):
        read_recording(path.as_uri())


def test_ipc_without_recording_id(tmp_path):
    path = tmp_path / "anonymous.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, TABLE.schema) as writer:
        writer.write_table(TABLE)
    with pytest.raises(ValueError, match="recording_id"):
        read_recording(path.as_uri())


@pytest.mark.parametrize("name", ["notes.txt", "rec.mcap", "no_suffix"])
def test_unsupported_suffix(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"whatever")
    with pytest.raises(ValueError, match="unsupported"):
        read_recording(path.as_uri())


@pytest.mark.parametrize("name", ["corrupt.parquet", "corrupt.arrow"])
def test_corrupt_parquet_or_ipc_is_a_value_error(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(random.Random(2).randbytes(2048))
    with pytest.raises(ValueError, match="not a readable recording"):
        read_recording(path.as_uri())


def test_properties_bytes_is_empty_without_properties():
    recording = Recording("file:///x", "x", 0, pa.schema([]), None)
    assert recording.properties_bytes() == b""
    recording = Recording("file:///x", "x", 0, pa.schema([]), pa.table({}))
    assert recording.properties_bytes() == b""
