"""The schemas of layers registered without one: read from their files, merged once per distinct
schema, and kept in a cache that never holds more than its bound (the least recently used file
dropped first, equal schemas kept once)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest

import sdk
from commands import file_schemas as _file_schemas
from commands.file_schemas import MAX_FILE_SCHEMAS, FileSchemaCache, with_file_schemas
from projector import schemas
from recordings import ObjectStoreConfig, WorkerPool, object_store


def schema_of(*names: str) -> bytes:
    return pa.schema([pa.field(n, pa.float64()) for n in names]).serialize().to_pybytes()


def test_the_cache_keeps_at_most_its_bound_dropping_the_least_recently_used() -> None:
    cache = FileSchemaCache(3)
    for n in range(10):
        cache.put((f"file:///ep_{n}.rrd", n), schema_of(f"c{n}"))
        assert len(cache) <= 3
    assert len(cache) == 3 and cache.distinct() == 3
    assert [cache.get((f"file:///ep_{n}.rrd", n)) is not None for n in range(10)] == [False] * 7 + [True] * 3

    cache.get(("file:///ep_7.rrd", 7))  # used: ep_8 is now the least recently used
    cache.put(("file:///ep_10.rrd", 10), schema_of("c10"))
    assert cache.get(("file:///ep_8.rrd", 8)) is None
    assert cache.get(("file:///ep_7.rrd", 7)) == schema_of("c7")
    assert len(cache) == 3


def test_equal_schemas_are_kept_once_and_freed_with_their_last_file() -> None:
    cache = FileSchemaCache(4)
    for n in range(4):
        cache.put((f"file:///ep_{n}.rrd", 1), schema_of("x", "y"))  # equal, but a new object each
    assert cache.distinct() == 1
    assert cache.get(("file:///ep_0.rrd", 1)) is cache.get(("file:///ep_3.rrd", 1))
    for n in range(4, 8):
        cache.put((f"file:///ep_{n}.rrd", 1), schema_of(f"z{n}"))
    assert len(cache) == 4 and cache.distinct() == 4  # the shared one went with its last file
    cache.put(("file:///ep_4.rrd", 1), schema_of("z4", "again"))  # a file kept again: replaced
    assert len(cache) == 4 and cache.distinct() == 4


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FileSchemaCache(0)


def test_the_process_cache_is_bounded_as_the_docs_say() -> None:
    assert _file_schemas.FILE_SCHEMAS.max_files == MAX_FILE_SCHEMAS
    assert f"{MAX_FILE_SCHEMAS} files" in (sdk.DatasetEntry.arrow_schema.__doc__ or "")


@dataclass
class FileRead:
    uri: str

    def schema_bytes(self) -> bytes:
        return FILES[self.uri]


OBJECTS = object_store(ObjectStoreConfig.resolve(None))
"""Never used: the files' reading is stood in for."""

FILES = {f"file:///ep_{n}.rrd": schema_of("a", f"b{n % 3}") for n in range(6)}
"""Six files, three distinct schemas."""


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files read, in order, with the reading of a file stood in for."""
    read: list[str] = []

    def read_recording(uri: str, objects: object = None) -> FileRead:
        read.append(uri)
        return FileRead(uri)

    monkeypatch.setattr(_file_schemas, "read_recording", read_recording)
    return read


@pytest.fixture
def workers() -> Iterator[WorkerPool]:
    pool = WorkerPool(0)
    yield pool
    pool.close()


def layers(uris: list[str]) -> pa.Table:
    """A dataset's layer table with ``uris`` registered without a schema."""
    return pa.table({"segment_id": [u.rsplit("/", 1)[1] for u in uris], "layer_name": ["base"] * len(uris),
                     "storage_url": uris, "size_bytes": [100] * len(uris),
                     "schema_sha256": pa.nulls(len(uris), pa.string())})


def test_reading_a_dataset_s_schema_keeps_no_more_files_than_the_bound(reads, workers) -> None:
    cache = FileSchemaCache(4)
    uris = sorted(FILES)
    merged = with_file_schemas(b"", layers(uris), OBJECTS, workers, cache)

    assert pa.ipc.read_schema(pa.py_buffer(merged)).names == ["a", "b0", "b1", "b2"]
    assert sorted(reads) == uris and len(cache) == 4 and cache.distinct() == 3
    # Read again: only the files that did not fit are read again, and the answer is the same.
    reads.clear()
    assert with_file_schemas(b"", layers(uris), OBJECTS, workers, cache) == merged
    assert len(reads) == 2 and len(cache) == 4


def test_kept_schemas_are_not_read_again(reads, workers) -> None:
    cache = FileSchemaCache(MAX_FILE_SCHEMAS)
    uris = sorted(FILES)
    first = with_file_schemas(b"", layers(uris), OBJECTS, workers, cache)
    reads.clear()
    assert with_file_schemas(b"", layers(uris), OBJECTS, workers, cache) == first
    assert reads == []


def test_a_file_s_schema_that_conflicts_names_its_layer(reads, workers) -> None:
    dataset = schemas.serialize(pa.schema([pa.field("a", pa.string())]))
    with pytest.raises(ValueError, match=r'segment "ep_0.rrd", layer "base" \(file:///ep_0.rrd\) was '
                                         "registered without a schema"):
        with_file_schemas(dataset, layers(["file:///ep_0.rrd"]), OBJECTS, workers,
                          FileSchemaCache(2))
