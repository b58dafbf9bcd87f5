"""``segment_store()`` on strata and on Rerun's own server, on the same files: the segment as
rerun-sdk's ``LazyStore``, with the same manifest (length, schema, summary), the same chunks when
streamed (twice), a round trip through ``write_rrd``, and the error for an unknown segment."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import rerun as rr
from rerun.chunk import LazyStore, RrdReader

import sdk

pytestmark = pytest.mark.store_agnostic


def _write(path: Path, recording_id: str, entity: str, steps: int) -> str:
    with rr.RecordingStream("strata-segment-store", recording_id=recording_id) as rec:
        rec.save(path)
        for step in range(steps):
            rec.set_time("frame", sequence=step)
            rec.log(entity, rr.Points3D(np.full((2, 3), step, np.float32)))
            rec.log(f"{entity}/scalar", rr.Scalars([step * 0.5]))
        rec.log("/notes", rr.TextLog(f"{recording_id} {entity}"), static=True)
    return path.as_uri()


@pytest.fixture(scope="module")
def pair(client: sdk.CatalogClient, rerun_client, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("segment-store")
    name = f"segment-store-{os.urandom(3).hex()}"
    ours, theirs = client.create_dataset(name), rerun_client.create_dataset(name)
    base = [_write(directory / f"{s}.rrd", s, "/robot", 6) for s in ("one", "two")]
    extra = [_write(directory / "two_extra.rrd", "two", "/derived", 4)]
    for dataset in (ours, theirs):
        dataset.register(base).wait()
        dataset.register(extra, layer_name="extra").wait()
    return ours, theirs


def _summary(store: LazyStore) -> list[str]:
    return sorted(store.summary().splitlines())


@pytest.mark.parametrize("segment", ["one", "two"])  # one layer; two layers
def test_the_same_store_as_rerun_s(pair, segment: str) -> None:
    ours, theirs = (dataset.segment_store(segment) for dataset in pair)
    assert isinstance(ours, LazyStore) and isinstance(theirs, LazyStore)
    assert len(ours) == len(theirs) > 0
    assert ours.schema() == theirs.schema()
    assert _summary(ours) == _summary(theirs) and "rows=" in ours.summary()
    assert ours.schema().entity_paths() == theirs.schema().entity_paths()


@pytest.mark.parametrize("segment", ["one", "two"])
def test_streaming_gives_the_chunks_each_time(pair, segment: str) -> None:
    ours, theirs = (dataset.segment_store(segment) for dataset in pair)
    stream = ours.stream()
    first, second = stream.to_chunks(), stream.to_chunks()
    assert {c.id for c in first} == {c.id for c in second}
    assert sorted(c.num_rows for c in first) == sorted(c.num_rows for c in theirs.stream().to_chunks())
    assert all(c.num_rows > 0 for c in first)


def test_a_segment_written_back_to_an_rrd_round_trips(pair, tmp_path: Path) -> None:
    store = pair[0].segment_store("two")
    out = tmp_path / "out.rrd"
    store.stream().write_rrd(out, application_id="strata-test", recording_id="two")
    again = RrdReader(out).store()
    assert again.schema() == store.schema()
    assert len(again) == len(store)


def test_an_unknown_segment_is_not_found(pair) -> None:
    for dataset in pair:  # each system's own NotFoundError (strata's is also a LookupError)
        with pytest.raises(Exception, match="Segment 'does-not-exist' not found") as raised:  # noqa: PT011
            dataset.segment_store("does-not-exist")
        assert type(raised.value).__name__ == "NotFoundError"
