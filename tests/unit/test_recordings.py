"""Reading recording ids, sizes, properties and chunk indexes from .rrd, Parquet and Arrow IPC
files, one or many at once."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

import recordings
from recordings import (
    NotFoundError,
    ObjectStoreConfig,
    Recording,
    WorkerPool,
    chunk_index,
    local_path,
    object_store,
    read_recording,
    read_recordings,
)
from stack.droid import write_episode

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
    with pytest.raises(ValueError, match="corrupt.rrd is not a readable .rrd recording"):
        read_recording(path.as_uri())


def test_empty_rrd_is_a_value_error(tmp_path):
    path = tmp_path / "empty.rrd"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="empty.rrd is not a readable .rrd recording"):
        read_recording(path.as_uri())


@pytest.mark.parametrize("fraction", [0.01, 0.5, 0.99])
def test_truncated_rrd_is_a_value_error(rrd, tmp_path, fraction):
    data = rrd.read_bytes()
    path = tmp_path / "truncated.rrd"
    path.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(ValueError, match="truncated.rrd is not a readable .rrd recording"):
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


def test_the_sdk_s_errors_are_the_recordings_own():
    # Code written against sdk.errors catches what recordings raises, wherever it is raised.
    import sdk.errors

    for name in ("NotFoundError", "ObjectStoreError", "RecordingChangedError", "WorkerError"):
        assert getattr(sdk.errors, name) is getattr(recordings, name)
    assert issubclass(recordings.NotFoundError, LookupError)


def test_the_public_names_are_sorted_constants_classes_then_functions():
    def kind(name: str) -> int:
        return 0 if name.isupper() else 1 if name[0].isupper() else 2

    assert recordings.__all__ == sorted(recordings.__all__, key=lambda n: (kind(n), n))
    for name in recordings.__all__:
        assert getattr(recordings, name) is not None


# -- the chunk index ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def episode(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("episode") / "ep_index.rrd"
    write_episode(path, "ep_index", 0, steps=5)
    return path


def test_a_chunk_index_has_a_row_per_chunk_with_where_its_bytes_are(episode):
    index = chunk_index(episode.as_uri())
    assert set(recordings.files.CHUNK_INDEX_COLUMNS) <= set(index.column_names)
    assert index.num_rows == read_recording(episode.as_uri()).num_chunks > 1
    assert index.schema.field("chunk_byte_offset").type == pa.uint64()
    assert index.schema.field("chunk_byte_size").type == pa.uint64()
    ranges = sorted(zip(index.column("chunk_byte_offset").to_pylist(),
                        index.column("chunk_byte_size").to_pylist(), strict=True))
    assert ranges[0][0] >= 12  # after the stream header
    for (offset, size), (next_offset, _) in zip(ranges, ranges[1:], strict=False):
        assert size > 0 and offset + size <= next_offset  # disjoint
    assert ranges[-1][0] + ranges[-1][1] <= episode.stat().st_size


def test_a_chunk_s_byte_range_holds_exactly_that_chunk(episode, tmp_path):
    """Pins rerun-sdk's private ``LazyStore._chunk_index()`` (``recordings.files._chunk_index``):
    with every other chunk's bytes zeroed, one entity's chunks still read as they were; with its
    own bytes zeroed, they do not."""
    from rerun.chunk import RrdReader

    entity = "/observation/joint_positions"
    rows = chunk_index(episode.as_uri()).select(
        ["chunk_entity_path", "chunk_byte_offset", "chunk_byte_size"]).to_pylist()
    assert entity in {row["chunk_entity_path"] for row in rows}
    copy = tmp_path / "zeroed.rrd"
    copy.write_bytes(episode.read_bytes())

    def zero(ours: bool) -> None:
        with copy.open("r+b") as file:
            for row in rows:
                if (row["chunk_entity_path"] == entity) == ours:
                    file.seek(row["chunk_byte_offset"])
                    file.write(bytes(row["chunk_byte_size"]))

    def batches(path: Path) -> list[pa.RecordBatch]:
        return [chunk.to_record_batch() for chunk in RrdReader(path).store().stream().filter(content=entity)]

    zero(ours=False)
    expected = batches(episode)
    assert expected
    assert all(b.equals(e) for b, e in zip(batches(copy), expected, strict=True))
    zero(ours=True)
    with pytest.raises(Exception, match="Failed to load chunks"):
        batches(copy)


def test_a_chunk_index_of_what_is_not_an_rrd_says_so(tmp_path):
    with pytest.raises(NotFoundError):
        chunk_index((tmp_path / "missing.rrd").as_uri())
    path = tmp_path / "rec.parquet"
    pq.write_table(with_recording_id(TABLE, b"rec_p"), path)
    with pytest.raises(ValueError, match=r"unsupported file type \.parquet"):
        chunk_index(path.as_uri())
    with pytest.raises(ValueError, match="file:// or s3://"):
        chunk_index("https://example.com/rec.rrd")


# -- many at once ---------------------------------------------------------------------------------


@pytest.fixture
def in_process() -> Iterator[WorkerPool]:
    pool = WorkerPool(0)
    yield pool
    pool.close()


def small_recordings(directory: Path, count: int) -> list[str]:
    uris = []
    for index in range(count):
        path = directory / f"rec_{index}.parquet"
        pq.write_table(with_recording_id(TABLE, f"rec_{index}".encode()), path)
        uris.append(path.as_uri())
    return uris


def test_many_recordings_are_read_in_order_and_progress_is_told_in_the_caller(tmp_path, in_process, capsys):
    uris = small_recordings(tmp_path, 120)
    calls: list[tuple[int, int, str]] = []

    def progress(done: int, total: int) -> None:
        calls.append((done, total, threading.current_thread().name))

    found = read_recordings(uris, object_store(ObjectStoreConfig()), in_process, progress=progress)
    assert [r.recording_id for r in found] == [f"rec_{i}" for i in range(120)]
    assert calls[0][:2] == (0, 120) and calls[-1][:2] == (120, 120)
    assert [done for done, _, _ in calls] == sorted({done for done, _, _ in calls})  # rising
    assert {thread for _, _, thread in calls} == {threading.current_thread().name}
    assert capsys.readouterr() == ("", "")  # library code never prints


def test_the_first_failed_read_in_order_is_the_error_even_when_a_later_one_fails_first(
        tmp_path, in_process, monkeypatch):
    uris = small_recordings(tmp_path, 5)
    first, second = (tmp_path / "missing_a.rrd").as_uri(), (tmp_path / "missing_b.rrd").as_uri()
    uris[3:3] = [second]
    uris[1:1] = [first]
    read = recordings.bulk.read_recording

    def slow_first(uri: str, **kwargs: object) -> Recording:
        if uri == first:
            time.sleep(0.5)  # fails after the later one has failed
        return read(uri, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(recordings.bulk, "read_recording", slow_first)
    with pytest.raises(NotFoundError, match="missing_a"):
        read_recordings(uris, object_store(ObjectStoreConfig()), in_process)
