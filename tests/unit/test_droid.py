"""The DROID-like episodes of the demo, the tests and the benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest

from recordings import read_recording
from stack import demo
from stack.droid import write_episode


def test_an_episode_is_as_heavy_as_a_droid_recording(tmp_path: Path) -> None:
    path = tmp_path / "episode.rrd"
    write_episode(path, "ep", 3, steps=30)
    recording = read_recording(path.as_uri())
    assert recording.recording_id == "ep"
    names = recording.arrow_schema.names
    assert "real_time" in names
    assert sum(n.startswith("/action/") for n in names) == 4
    assert sum(n.startswith("/observation/") for n in names) == 4
    assert sum(n.endswith(":EncodedImage:blob") for n in names) == 3
    # The field notes: a 13-14 KB Arrow schema and ~2.4 KB of properties per episode.
    assert 12_000 < len(recording.schema_bytes()) < 16_000
    assert 2_000 < len(recording.properties_bytes()) < 3_000


def test_the_demo_writes_absolute_uris_from_a_relative_directory(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths = demo.write_base(Path("relative"))
    assert [p.is_absolute() for p in paths] == [True] * len(demo.SEGMENT_IDS)
    assert all(p.as_uri().startswith("file:///") for p in paths)
