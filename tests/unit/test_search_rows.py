"""An index's rows of a segment read from the column's chunks (``search.rows.segment_rows``, what
the follower and searches use) equal the rows ``reader()`` gives (``reader_rows``, rerun-sdk's
query engine, the specification): over layers, times logged twice in one layer or in two, lists
of several instances, empty lists (a clear), and a static column logged more than once."""

from __future__ import annotations

import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from events import CreateSearchIndex, SearchIndexKind
from profiles import examples
from projector import SearchIndex
from recordings import read_recording
from recordings.segments import LayerFile
from search.rows import reader_rows, segment_rows

logged = st.tuples(st.integers(0, 5), st.integers(0, 3), st.booleans())
"""One log call: its frame, how many instances, and whether the other entity logs too."""
layers = st.lists(st.lists(logged, max_size=8), min_size=1, max_size=3)
statics = st.lists(st.integers(0, 2), max_size=3)
"""Per layer, how many times the static text is logged in it."""


def write_layer(path: Path, calls: list[tuple[int, int, bool]], static_times: int, seed: int) -> None:
    import rerun as rr

    rng = np.random.default_rng(seed)
    rec = rr.RecordingStream("rows-test", recording_id="segment")
    rec.save(path)
    for frame, count, other in calls:
        rec.set_time("frame", sequence=frame)
        vectors = rng.standard_normal((count, 4)).astype(np.float32)
        rec.log("camera", rr.AnyValues(embedding=pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.ravel(), pa.float32()), 4)))
        if other:
            rec.log("camera/child", rr.AnyValues(embedding=pa.FixedSizeListArray.from_arrays(
                pa.array(np.ones(4, np.float32)), 4)))
    for n in range(static_times):
        rec.log("task", rr.TextDocument(f"task {seed} {n}"), static=True)
    rec.flush()
    del rec


def index_of(entity: str, component: str) -> SearchIndex:
    kind = SearchIndexKind.FULL_TEXT if entity == "/task" else SearchIndexKind.VECTOR
    definition = CreateSearchIndex(entity, component, "frame", kind)
    return SearchIndex(uuid.uuid4(), entity, component, definition, 0, datetime.now(UTC))


def sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(str(v) for v in row.values()) for row in table.to_pylist())


@settings(max_examples=examples(30))
@given(layer_calls=layers, static_counts=statics)
def test_rows_from_chunks_equal_the_readers(layer_calls: list[list[tuple[int, int, bool]]],
                                            static_counts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        files = []
        for n, calls in enumerate(layer_calls):
            path = Path(directory) / f"layer_{n}.rrd"
            write_layer(path, calls, static_counts[n] if n < len(static_counts) else 0, seed=n)
            files.append(LayerFile("segment", f"layer_{n}", path.as_uri(), path.stat().st_size))
        schemas = [pa.ipc.read_schema(pa.py_buffer(read_recording(f.storage_url).schema_message))
                   for f in files]
        merged = pa.unify_schemas(schemas, promote_options="permissive")
        for entity, component in (("/camera", "embedding"), ("/task", "TextDocument:text")):
            if f"{entity}:{component}" not in merged.names or "frame" not in merged.names:
                continue  # an index the fold refuses: the column or the timeline is missing
            index = index_of(entity, component)
            assert sorted_rows(segment_rows(index, merged, "segment", files)) == \
                sorted_rows(reader_rows(index, merged, "segment", files))
