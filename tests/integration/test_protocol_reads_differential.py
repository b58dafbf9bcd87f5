"""rerun-sdk's own, unmodified ``rr.catalog.CatalogClient`` reading recordings' data from Rerun's
server (``rr.server.Server``) and from strata's endpoint of Rerun's catalog protocol, on the same
files: ``reader()`` plain, with segment and content filters, a DataFusion filter on the index,
``using_index_values`` (values, and values per segment), the static view and a timeline only a
second layer has; ``segment_store()`` and ``Segment.schema()``. Rows and schemas (with their
field metadata) must be equal, rows sorted where Rerun does not define their order. Every read
runs through both of Rerun's query paths: ``FindChunks`` (strata's ``WhoAmI`` advertises
``dataset:find_chunks``) and ``QueryDataset`` (an endpoint that does not).

strata's endpoint runs in a process of its own beside the session's stack (``endpoints``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import rerun as rr
from datafusion import col, lit

import sdk
from endpoints import endpoint
from stack import Server
from stack.droid import EPOCH_NS, STEP_NS, write_episode

pytestmark = pytest.mark.store_agnostic

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND


@pytest.fixture(scope="module", params=["find_chunks", "query_dataset"])
def strata_url(request: pytest.FixtureRequest, server: Server) -> Iterator[str]:
    with endpoint(server, request.param) as url:
        yield url


def _small(path: Path, recording_id: str) -> str:
    """Several timelines (one of durations), unordered logging, a static entity and properties."""
    with rr.RecordingStream("strata-reads", recording_id=recording_id) as rec:
        rec.save(path)
        for step in (3, 1, 4, 2, 0):
            rec.set_time("real_time", timestamp=np.datetime64(T0 + step * SECOND, "ns"))
            rec.set_time("frame", sequence=step * 10)
            rec.set_time("elapsed", duration=step * 0.5)
            rec.log("/arm/joints", rr.Scalars(np.arange(3) * 0.1 + step))
            if step % 2 == 0:
                rec.log("/camera/points", rr.Points3D([[step, step, step]]))
        rec.log("/notes", rr.TextDocument(recording_id), static=True)
        rec.send_property("episode", rr.AnyValues(success=True, task="pick"))
    return path.as_uri()


def _extra(path: Path, recording_id: str) -> str:
    """A second layer: other entities on a timeline of its own, and static data."""
    with rr.RecordingStream("strata-reads", recording_id=recording_id) as rec:
        rec.save(path)
        for step in range(4):
            rec.set_time("frame_nr", sequence=step)
            rec.log("/extra/points", rr.Points3D([[step, 0, 0]]))
        rec.log("/extra/label", rr.TextDocument("derived"), static=True)
    return path.as_uri()


@pytest.fixture(scope="module")
def pair(client: sdk.CatalogClient, rerun_client, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[str, Any]:
    """The same dataset on both servers: its name (strata's, registered through strata's SDK) and
    Rerun's dataset."""
    directory = tmp_path_factory.mktemp("protocol-reads")
    tag = os.urandom(3).hex()
    base = []
    for number in range(3):
        path = directory / f"droid_{number}.rrd"
        write_episode(path, f"droid_{tag}_{number}", number, steps=30)
        base.append(path.as_uri())
    base.append(_small(directory / "small.rrd", f"small_{tag}"))
    extra = [_extra(directory / "droid_0_extra.rrd", f"droid_{tag}_0")]
    name = f"protocol-reads-{tag}"
    ours, theirs = client.create_dataset(name), rerun_client.create_dataset(name)
    for dataset in (ours, theirs):
        dataset.register(base).wait()
        dataset.register(extra, layer_name="extra").wait()
    return name, theirs


@pytest.fixture(scope="module")
def datasets(strata_url: str, pair: tuple[str, Any]) -> dict[str, Any]:
    name, theirs = pair
    return {"strata": rr.catalog.CatalogClient(strata_url).get_dataset(name), "rerun": theirs}


def _first_segment(dataset: Any) -> str:
    return sorted(s for s in dataset.segment_ids() if s.endswith("_0"))[0]


def _sorted(table: pa.Table) -> pa.Table:
    """Rows in a defined order: by segment, then every index column."""
    keys = ["rerun_segment_id", *sorted(f.name for f in table.schema
                                        if (f.metadata or {}).get(b"rerun:kind") == b"index")]
    return table.sort_by([(key, "ascending") for key in keys if key in table.column_names])


READS: dict[str, Callable[[Any], Any]] = {
    "plain": lambda ds: ds.reader(index="real_time"),
    "a sequence timeline": lambda ds: ds.reader(index="frame"),
    "a duration timeline": lambda ds: ds.reader(index="elapsed"),
    "static": lambda ds: ds.reader(index=None),
    "segments": lambda ds: ds.filter_segments([_first_segment(ds)]).reader(index="real_time"),
    "a second layer's timeline": lambda ds: ds.filter_segments([_first_segment(ds)]).reader(index="frame_nr"),
    "contents": lambda ds: ds.filter_contents(["/observation/**", "/cameras/wrist_left/**"]).reader(
        index="real_time"),
    "contents with latest-at": lambda ds: ds.filter_contents(["/arm/**", "/notes", "/camera/**"]).reader(
        index="real_time", fill_latest_at=True),
    "a filter on the index": lambda ds: ds.filter_contents(["/action/**"]).reader(index="real_time").filter(
        col("real_time") >= lit(np.datetime64(EPOCH_NS + 10**12 + 10 * STEP_NS, "ns"))),
    "index values": lambda ds: ds.filter_contents(["/observation/**", "/arm/**"]).reader(
        index="real_time", fill_latest_at=True, using_index_values=np.array(
            [T0 + SECOND // 2, T0 + 3 * SECOND, EPOCH_NS + 5 * STEP_NS + 7], dtype="datetime64[ns]")),
    "index values per segment": lambda ds: ds.filter_contents(["/arm/**"]).reader(
        index="frame", fill_latest_at=True, using_index_values={
            segment: np.array([5, 25], dtype=np.int64) for segment in ds.segment_ids()
            if segment.startswith("small_")}),
}


@pytest.mark.parametrize("read", READS)
def test_reader_gives_rerun_s_rows_and_columns(datasets, read: str) -> None:
    strata, rerun = (_sorted(READS[read](datasets[side]).to_arrow_table()) for side in ("strata", "rerun"))
    assert strata.schema.equals(rerun.schema, check_metadata=True)
    assert strata.num_rows == rerun.num_rows
    assert strata.equals(rerun)


@pytest.mark.parametrize("layers", ["one", "two"])
def test_segment_store_streams_rerun_s_chunks(datasets, layers: str) -> None:
    stores = {}
    for side, dataset in datasets.items():
        segment = _first_segment(dataset) if layers == "two" else sorted(dataset.segment_ids())[-1]
        stores[side] = dataset.segment_store(segment)
    strata, rerun = stores["strata"], stores["rerun"]
    assert len(strata) == len(rerun) > 0
    assert strata.schema().to_arrow().equals(rerun.schema().to_arrow(), check_metadata=True)
    chunks = {side: sorted((c.id, c.entity_path, c.num_rows) for c in store.stream())
              for side, store in stores.items()}
    assert chunks["strata"] == chunks["rerun"]
    assert len(chunks["strata"]) == len(strata)


def _fields(schema: pa.Schema) -> list[tuple[str, str, bool, dict[bytes, bytes]]]:
    return sorted((f.name, str(f.type), f.nullable, dict(f.metadata or {})) for f in schema)


def test_a_segment_s_schema_is_rerun_s(datasets) -> None:
    one = {side: dataset.segment(sorted(dataset.segment_ids())[-1]).schema().to_arrow()
           for side, dataset in datasets.items()}
    assert one["strata"].equals(one["rerun"], check_metadata=True)
    # Rerun's client merges a segment's layers' schemas in the order of their digests, and
    # strata's digests are not Rerun's: the same fields, in another order.
    two = {side: dataset.segment(_first_segment(dataset)).schema().to_arrow()
           for side, dataset in datasets.items()}
    assert _fields(two["strata"]) == _fields(two["rerun"])
    assert two["strata"].metadata == two["rerun"].metadata
    assert "/extra/points:Points3D:positions" in two["strata"].names


def test_an_unknown_segment_is_not_found_alike(datasets) -> None:
    for dataset in datasets.values():
        with pytest.raises(rr.catalog.NotFoundError):
            dataset.segment_store("does-not-exist")


def test_a_recording_in_an_object_store_reads_as_the_same_file_on_rerun_s_server(
        server: Server, client: sdk.CatalogClient, rerun_client, s3, tmp_path: Path) -> None:
    tag = os.urandom(3).hex()
    path = tmp_path / "remote.rrd"
    write_episode(path, f"remote_{tag}", 7, steps=30)
    url = s3.put(f"protocol-reads-{tag}", "droid/remote.rrd", path)
    name = f"protocol-reads-s3-{tag}"
    client.create_dataset(name).register([url], object_store_config=s3.config()).wait()
    rerun_client.create_dataset(name).register([path.as_uri()]).wait()
    with endpoint(server, "find_chunks", s3.environment()) as strata_url:
        datasets = {"strata": rr.catalog.CatalogClient(strata_url).get_dataset(name),
                    "rerun": rerun_client.get_dataset(name)}
        read = {side: _sorted(dataset.reader(index="real_time").to_arrow_table())
                for side, dataset in datasets.items()}
        streamed = {side: sorted((c.id, c.num_rows) for c in dataset.segment_store(f"remote_{tag}").stream())
                    for side, dataset in datasets.items()}
    assert read["strata"].num_rows == read["rerun"].num_rows == 30
    assert read["strata"].equals(read["rerun"])
    assert streamed["strata"] == streamed["rerun"]
