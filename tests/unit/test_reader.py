"""The reader's plan: output columns, and the ranges of layers registered before envelope v4."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from events import IndexKind
from projector import layer_table
from recordings import ReadOptions, output_schema, read_recording, with_manifest_ranges
from stack.droid import write_episode


def test_layers_registered_before_v4_get_their_ranges_from_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "old.rrd"
    write_episode(path, "old", 0, steps=10)
    recording = read_recording(path.as_uri())
    assert recording.num_chunks and recording.index_ranges[0].kind is IndexKind.TIMESTAMP
    rows = [("old", "base", path.as_uri(), recording.size_bytes, 0, "", b"", None, "[]", "", b"", 0, 0),
            ("new", "base", "file:///elsewhere/new.rrd", 1, 0, "", b"", 3, '[["frame","sequence",1,2]]',
             "", b"", 1, 1)]
    filled = with_manifest_ranges(layer_table.from_rows(rows))
    assert filled.column("num_chunks").to_pylist() == [recording.num_chunks, 3]
    assert filled.column("index_ranges").to_pylist() == [
        [{"timeline": r.timeline, "kind": str(r.kind), "start": r.start, "end": r.end}
         for r in recording.index_ranges],
        [{"timeline": "frame", "kind": "sequence", "start": 1, "end": 2}]]


def test_an_unknown_index_lists_the_timelines() -> None:
    schema = pa.schema([pa.field("real_time", pa.timestamp("ns"), metadata={"rerun:kind": "index"}),
                        pa.field("frame", pa.int64(), metadata={"rerun:kind": "index"})])
    with pytest.raises(ValueError, match=r"'frame_nr' does not exist.*'real_time', 'frame'"):
        output_schema(schema, ReadOptions("frame_nr", (("/**",),)))
