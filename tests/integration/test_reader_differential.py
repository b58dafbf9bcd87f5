"""strata's data reads against Rerun's own catalog server, on the same files.

Each test runs the same calls on a strata dataset (the real broker and Spark projector) and on a
dataset of ``rr.server.Server``, and asserts the same columns (names, Arrow types, Rerun's field
metadata) and the same rows, after sorting; errors are compared the same way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import datafusion
import numpy as np
import pyarrow as pa
import pytest
import rerun as rr
from datafusion import col, lit

import sdk
from events import Event, RegisterLayer
from producers import EventProducer
from sdk import ContentFilter

pytestmark = pytest.mark.store_agnostic

SECOND = 1_000_000_000
T0 = 1_700_000_000 * SECOND


def _write(path: Path, recording_id: str, log: Callable[[rr.RecordingStream], None]) -> str:
    rec = rr.RecordingStream("strata-differential", recording_id=recording_id)
    rec.save(path)
    log(rec)
    rec.flush()
    del rec
    return path.as_uri()


def _alpha(rec: rr.RecordingStream) -> None:
    # Unordered on every timeline, joints dense, points sparse, one static text and properties.
    for step in (3, 1, 4, 2, 0):
        rec.set_time("real_time", timestamp=np.datetime64(T0 + step * SECOND, "ns"))
        rec.set_time("frame", sequence=step * 10)
        rec.log("/arm/joints", rr.Scalars(np.arange(7) * 0.1 + step))
        if step % 2 == 0:
            rec.log("/camera/points", rr.Points3D([[step, step, step]]))
    rec.log("/notes", rr.TextLog("alpha"), static=True)
    rec.send_property("episode", rr.AnyValues(success=True, task="pick"))


def _beta(rec: rr.RecordingStream) -> None:
    # A duration timeline of its own, no real_time, no static data.
    for step in (2, 0, 1):
        rec.set_time("elapsed", duration=step * 0.5)
        rec.set_time("frame", sequence=step)
        rec.log("/arm/joints", rr.Scalars(np.arange(7) * -0.1 - step))
        rec.log("/lidar", rr.Points3D(np.full((2, 3), step, np.float32)))
    rec.send_property("episode", rr.AnyValues(success=False, task="place"))


def _gamma(rec: rr.RecordingStream) -> None:
    for step in (1, 2, 5):
        rec.set_time("real_time", timestamp=np.datetime64(T0 + step * SECOND + 7, "ns"))
        rec.log("/arm/joints", rr.Scalars(np.arange(7) * 0.2 + step))
    rec.log("/notes", rr.TextLog("gamma"), static=True)


def _derived(seed: int) -> Callable[[rr.RecordingStream], None]:
    def log(rec: rr.RecordingStream) -> None:
        for step in (0, 2, 9):
            rec.set_time("real_time", timestamp=np.datetime64(T0 + step * SECOND, "ns"))
            rec.log("/derived/error", rr.Scalars([seed + step * 0.01]))
    return log


def _late(rec: rr.RecordingStream) -> None:
    # A layer with timelines and an entity that sort before the earlier layers' ones.
    for step in (0, 1):
        rec.set_time("aaa_step", sequence=step)
        rec.set_time("frame", sequence=step)
        rec.log("/aardvark", rr.Scalars([float(step)]))


def _quality(good: bool) -> Callable[[rr.RecordingStream], None]:
    def log(rec: rr.RecordingStream) -> None:
        rec.send_property("quality", rr.AnyValues(tracking_good=good))
    return log


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    directory = tmp_path_factory.mktemp("differential")
    return {
        "base": [_write(directory / "alpha.rrd", "alpha", _alpha),
                 _write(directory / "beta.rrd", "beta", _beta),
                 _write(directory / "gamma.rrd", "gamma", _gamma)],
        "derived": [_write(directory / "alpha_derived.rrd", "alpha", _derived(1)),
                    _write(directory / "gamma_derived.rrd", "gamma", _derived(2))],
        "quality": [_write(directory / "alpha_quality.rrd", "alpha", _quality(True))],
        "late": [_write(directory / "alpha_late.rrd", "alpha", _late)],
        "replacement": [_write(directory / "gamma_derived_2.rrd", "gamma", _derived(3))],
    }


class Pair:
    """The same dataset on strata and on Rerun's server."""

    def __init__(self, strata: sdk.DatasetEntry, rerun: rr.catalog.DatasetEntry) -> None:
        self.strata = strata
        self.rerun = rerun

    def register(self, uris: list[str], layer_name: str, on_duplicate: str = "error") -> None:
        self.strata.register(uris, layer_name=layer_name, on_duplicate=on_duplicate).wait()
        self.rerun.register(uris, layer_name=layer_name,
                            on_duplicate=rr.catalog.OnDuplicateSegmentLayer(on_duplicate)).wait()

    def both(self, query: Callable) -> tuple[pa.Table, pa.Table]:
        return _table(query(self.strata)), _table(query(self.rerun))


def _table(df: datafusion.DataFrame) -> pa.Table:
    return pa.table(df)


@pytest.fixture
def pair(reading_client: sdk.CatalogClient, rerun_client, files: dict[str, list[str]]) -> Pair:
    name = f"differential-{os.urandom(4).hex()}"
    pair = Pair(reading_client.create_dataset(name), rerun_client.create_dataset(name))
    pair.register(files["base"], "base")
    pair.register(files["derived"], "derived")
    pair.register(files["quality"], "quality")
    return pair


def _rows(table: pa.Table) -> list[tuple]:
    names = sorted(table.column_names)
    return sorted(tuple(repr(row[n]) for n in names) for row in table.to_pylist())


def _columns(table: pa.Table) -> dict[str, tuple[pa.DataType, dict]]:
    return {f.name: (f.type, dict(f.metadata or {})) for f in table.schema}


def assert_same(strata: pa.Table, rerun: pa.Table) -> None:
    assert _columns(strata) == _columns(rerun)
    assert strata.num_rows == rerun.num_rows
    assert _rows(strata) == _rows(rerun)


@pytest.mark.parametrize("index", ["real_time", "frame", "elapsed", None])
def test_reader_on_every_timeline_and_static(pair: Pair, index: str | None) -> None:
    strata, rerun = pair.both(lambda d: d.reader(index=index))
    assert rerun.num_rows > 0
    assert_same(strata, rerun)


@pytest.mark.parametrize("contents", [
    ["/arm/**"],
    ["/**", "-/camera/**"],
    ["/arm/joints", "/derived/**"],
    "/camera/points",
    ["/**", "/__properties/**"],
    ContentFilter.everything().include_properties(),
    ContentFilter.nothing().include("/arm", subtree=True).exclude("/arm/joints"),
    [],
    "__properties/**",
    ["/**", "__properties/**"],
    ["/**", "__properties"],
    "arm/**",
    "camera/points",
    ["/**", "-camera/**"],
    ["/**", "-arm/joints", "+ derived/**"],
    ["-/arm/**", "arm/**"],
    ["arm/**", "-/arm/**"],
    "/** - arm/joints + __properties/**",
], ids=repr)
def test_filter_contents(pair: Pair, contents) -> None:
    assert_same(*pair.both(lambda d: d.filter_contents(contents).reader(index="real_time")))


@pytest.mark.parametrize("contents", ["__properties/**", ["/**", "-camera/**"], "arm/**"], ids=repr)
def test_filter_contents_without_leading_slash_selects_rerun_s_schema(pair: Pair, contents) -> None:
    strata, rerun = pair.strata.filter_contents(contents), pair.rerun.filter_contents(contents)
    components = sorted(n for n in rerun.schema().column_names() if ":" in n)  # index names have none
    assert components and sorted(n for n in strata.schema().column_names() if ":" in n) == components
    assert sorted(strata.segment_ids()) == sorted(rerun.segment_ids())
    assert_same(_table(strata.reader(index=None)), _table(rerun.reader(index=None)))


def test_filter_contents_twice_narrows(pair: Pair) -> None:
    assert_same(*pair.both(lambda d: d.filter_contents(["/**", "-/camera/**"])
                           .filter_contents(["/arm/**", "/camera/**", "/derived/**"])
                           .reader(index="frame")))


def test_filter_segments_and_pushed_down_filters(pair: Pair) -> None:
    assert_same(*pair.both(lambda d: d.filter_segments(["alpha", "gamma"]).reader(index="real_time")))
    assert_same(*pair.both(lambda d: d.filter_segments(["gamma", "no such segment"])
                           .filter_contents("/arm/**").reader(index="real_time")))
    assert_same(*pair.both(lambda d: d.reader(index="real_time")
                           .filter(col("rerun_segment_id") == lit("alpha"))))
    since = pa.scalar(T0 + 2 * SECOND, pa.timestamp("ns"))
    assert_same(*pair.both(lambda d: d.reader(index="real_time").filter(col("real_time") >= lit(since))))
    by_table = pair.strata.segment_table().filter(col("rerun_segment_id") != lit("beta"))
    assert sorted(pair.strata.filter_segments(by_table).segment_ids()) == ["alpha", "gamma"]
    assert pair.strata.filter_segments("no such segment").segment_ids() == \
        pair.rerun.filter_segments("no such segment").segment_ids() == []


@pytest.mark.parametrize("index", ["frame", "aaa_step", "log_time", None])
@pytest.mark.parametrize("contents", [None, ["/**", "/__properties/**"], "arm/**"], ids=repr)
def test_reader_columns_are_in_rerun_s_order(pair: Pair, files: dict[str, list[str]], index: str | None,
                                             contents) -> None:
    pair.register(files["late"], "late")  # a two-layer segment whose last layer sorts first
    def read(d):
        return (d if contents is None else d.filter_contents(contents)).reader(index=index)
    strata, rerun = pair.both(read)
    assert strata.schema.names == rerun.schema.names
    assert rerun.schema.names.index("aaa_step") < rerun.schema.names.index("real_time")
    assert_same(strata, rerun)


def test_fill_latest_at(pair: Pair) -> None:
    assert_same(*pair.both(lambda d: d.reader(index="real_time", fill_latest_at=True)))


def test_using_index_values_in_each_form(pair: Pair) -> None:
    values = np.array([T0 + 2 * SECOND, T0 + 3 * SECOND + 500, T0 + 5 * SECOND + 7], "datetime64[ns]")
    assert_same(*pair.both(lambda d: d.reader(index="real_time", using_index_values=values,
                                              fill_latest_at=True)))
    per_segment = {"alpha": values[:2], "gamma": values[1:], "no such segment": values}
    assert_same(*pair.both(lambda d: d.reader(index="real_time", using_index_values=per_segment)))
    frames = datafusion.SessionContext().from_pydict(
        {"rerun_segment_id": ["alpha", "beta", "beta"], "frame": [15, 0, 2]})
    assert_same(*pair.both(lambda d: d.filter_contents("/arm/**").reader(
        index="frame", using_index_values=frames, fill_latest_at=True)))


def test_segment_table_has_rerun_s_chunks_and_index_ranges(pair: Pair) -> None:
    strata, rerun = pair.both(lambda d: d.segment_table())
    ranges = [n for n in rerun.column_names if n.endswith((":start", ":end"))]
    assert len(ranges) == 2 * 4  # real_time, frame, elapsed and log_time
    columns = ["rerun_segment_id", "rerun_num_chunks", *ranges]
    assert sorted(n for n in strata.column_names if n.endswith((":start", ":end"))) == sorted(ranges)
    assert_same(strata.select(columns), rerun.select(columns))


def test_index_ranges(pair: Pair) -> None:
    strata, rerun = pair.both(lambda d: d.get_index_ranges())
    assert _rows(strata.select(sorted(strata.column_names))) == \
        _rows(rerun.select(sorted(strata.column_names)))
    assert sorted(strata.column_names) == sorted(rerun.column_names)


def test_after_unregister_and_replace(pair: Pair, files: dict[str, list[str]]) -> None:
    pair.strata.unregister(segments_to_drop=["alpha"], layers_to_drop=["derived"]).wait()
    pair.rerun.unregister(segments_to_drop=["alpha"], layers_to_drop=["derived"]).wait()
    pair.register(files["replacement"], "derived", on_duplicate="replace")
    assert_same(*pair.both(lambda d: d.reader(index="real_time")))
    assert_same(*pair.both(lambda d: d.filter_contents("/derived/**").reader(index="real_time")))


def test_unknown_index_is_a_value_error(pair: Pair) -> None:
    with pytest.raises(ValueError) as rerun_error:
        pair.rerun.reader(index="no_such_timeline")
    with pytest.raises(ValueError, match="'no_such_timeline' does not exist") as strata_error:
        pair.strata.reader(index="no_such_timeline")
    assert "does not exist" in str(rerun_error.value)
    for timeline in ("real_time", "frame", "elapsed"):
        assert timeline in str(strata_error.value)


def test_a_changed_or_missing_file_is_an_error_naming_it(dataset: sdk.DatasetEntry, tmp_path: Path) -> None:
    first = _write(tmp_path / "one.rrd", "one", _gamma)
    second = _write(tmp_path / "two.rrd", "two", _gamma)
    dataset.register([first, second]).wait()
    assert _table(dataset.reader(index="real_time")).num_rows == 6
    (tmp_path / "one.rrd").write_bytes((tmp_path / "one.rrd").read_bytes()[:-10])
    with pytest.raises(sdk.RecordingChangedError, match=r'segment "one", layer "base".*one\.rrd'):
        dataset.reader(index="real_time")
    (tmp_path / "two.rrd").unlink()
    with pytest.raises(sdk.NotFoundError, match=r'segment "two", layer "base".*two\.rrd'):
        dataset.filter_segments("two").reader(index="real_time")


def test_segment_and_index_filters_open_only_the_segments_they_need(dataset: sdk.DatasetEntry,
                                                                   tmp_path: Path) -> None:
    # "late" has data up to T0 + 9 s, "gone" up to T0 + 5 s: its file must not be opened by a
    # filter on either column that excludes it.
    uris = [_write(tmp_path / "late.rrd", "late", _derived(1)), _write(tmp_path / "gone.rrd", "gone", _gamma)]
    dataset.register(uris).wait()
    reader = dataset.reader(index="real_time")
    (tmp_path / "gone.rrd").unlink()
    late = _table(reader.filter(col("rerun_segment_id") == lit("late")))
    assert late.column("rerun_segment_id").to_pylist() == ["late"] * 3
    after = _table(reader.filter(col("real_time") > lit(pa.scalar(T0 + 6 * SECOND, pa.timestamp("ns")))))
    assert after.column("rerun_segment_id").to_pylist() == ["late"]
    with pytest.raises(Exception, match=r'segment "gone", layer "base"'):
        _table(reader)


def _register_without_schemas(dataset: sdk.DatasetEntry, client: sdk.CatalogClient, uris: list[str],
                              layer_name: str) -> None:
    """As a pipeline in another language registers: bare RegisterLayer events, with neither a
    schema nor a chunk manifest (the wire format lets a producer leave them out)."""
    events = []
    for uri in uris:
        path = Path(uri.removeprefix("file://"))
        recording_id = path.stem.split("_")[0]  # the files are named after their recordings
        events.append(Event(dataset.id, RegisterLayer(recording_id, layer_name, uri,
                                                      size_bytes=path.stat().st_size)))
    with EventProducer(client.bootstrap_servers) as producer:
        positions = producer.send(events)
    client._internal.wait(positions, 60)


@pytest.mark.parametrize("index", ["real_time", "frame", "elapsed", None])
def test_layers_registered_without_schemas_read_as_sdk_registered_ones(
        client: sdk.CatalogClient, rerun_client, files: dict[str, list[str]], index: str | None) -> None:
    name = f"schemaless-{os.urandom(4).hex()}"
    pair = Pair(client.create_dataset(name), rerun_client.create_dataset(name))
    _register_without_schemas(pair.strata, client, files["base"], "base")
    pair.rerun.register(files["base"], layer_name="base").wait()
    pair.register(files["derived"], "derived")  # beside SDK-registered layers, merged
    assert not {x.schema_sha256 for x in client._internal.wait_for_store().layers(pair.strata.id)
                if x.layer_name == "base"} - {""}
    assert sorted(pair.strata.schema().column_names()) == sorted(pair.rerun.schema().column_names())
    assert_same(*pair.both(lambda d: d.reader(index=index)))
    strata, rerun = pair.both(lambda d: d.get_index_ranges())
    columns = sorted(strata.column_names)
    assert _rows(strata.select(columns)) == _rows(rerun.select(columns))


def test_a_schemaless_layer_whose_file_conflicts_is_named(client: sdk.CatalogClient, tmp_path: Path) -> None:
    int32 = _write(tmp_path / "alpha.rrd", "alpha",
                   lambda rec: rec.log("/x", rr.AnyValues(v=pa.array([1], pa.int32()))))
    int64 = _write(tmp_path / "beta.rrd", "beta",
                   lambda rec: rec.log("/x", rr.AnyValues(v=pa.array([1], pa.int64()))))
    dataset = client.create_dataset(f"conflict-{os.urandom(4).hex()}")
    dataset.register([int32]).wait()
    _register_without_schemas(dataset, client, [int64], "base")
    with pytest.raises(ValueError, match=r'segment "beta", layer "base" .*beta.rrd.* was registered without '
                                         r"a schema.*schema conflict in column"):
        dataset.reader(index=None)
    assert dataset.segment_ids() == ["alpha", "beta"]  # nothing registered is lost


def test_a_dataset_as_of_a_point_reads_like_rerun_loaded_with_what_was_there(
        reading_client: sdk.CatalogClient, rerun_client, files: dict[str, list[str]]) -> None:
    name = f"as-of-{os.urandom(4).hex()}"
    strata = reading_client.create_dataset(name)
    strata.register(files["base"], layer_name="base").wait()
    strata.register(files["derived"], layer_name="derived").wait()
    time.sleep(0.01)  # Kafka's record times are in milliseconds
    point = datetime.now(UTC)
    time.sleep(0.01)
    strata.unregister(segments_to_drop=["alpha"], layers_to_drop=["derived"]).wait()
    strata.register(files["replacement"], layer_name="derived", on_duplicate="replace").wait()
    strata.register(files["quality"], layer_name="quality").wait()
    rerun = rerun_client.create_dataset(name)
    rerun.register(files["base"], layer_name="base").wait()
    rerun.register(files["derived"], layer_name="derived").wait()

    then = strata.as_of(point)
    assert then.point is not None and f"as_of={then.point}" in repr(then)
    assert then.segment_ids() == sorted(rerun.segment_ids()) == ["alpha", "beta", "gamma"]
    stable = ["rerun_segment_id", "rerun_layer_names", "rerun_storage_urls", "rerun_num_chunks"]
    assert _rows(_table(then.segment_table()).select(stable)) == _rows(
        _table(rerun.segment_table()).select(stable))
    for read in (lambda d: d.reader(index="real_time"), lambda d: d.reader(index="frame"),
                 lambda d: d.filter_contents("/derived/**").reader(index="real_time"),
                 lambda d: d.filter_segments(["alpha", "gamma"]).reader(index="real_time")):
        assert_same(_table(read(then)), _table(read(rerun)))
    assert _rows(_table(then.get_index_ranges())) == _rows(_table(rerun.get_index_ranges()))
    assert then.arrow_schema() == strata.as_of(then.point).arrow_schema()
    # Now is another catalog: alpha lost its derived layer, gamma's was replaced, a layer was added.
    now = _table(strata.segment_table())
    assert sorted(now["rerun_layer_names"].to_pylist()) != sorted(
        _table(then.segment_table())["rerun_layer_names"].to_pylist())
    with pytest.raises(ValueError, match=f"as of log offset {then.point}, which is read-only"):
        then.register(files["quality"], layer_name="quality")
    with pytest.raises(ValueError, match="read-only"):
        then.unregister(segments_to_drop=["beta"])
    assert strata.as_of(point).segment_ids() == ["alpha", "beta", "gamma"]  # nothing was sent
    assert "beta" in strata.segment_ids()


def test_as_of_refuses_points_that_name_nothing(client: sdk.CatalogClient, dataset) -> None:
    with pytest.raises(ValueError, match="the log has offsets 0 to"):
        dataset.as_of(10**12)
    with pytest.raises(ValueError, match="timezone-aware"):
        dataset.as_of(datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="log offset"):
        dataset.as_of(1.5)
    with pytest.raises(sdk.NotFoundError, match="did not exist yet as of log offset 0"):
        dataset.as_of(0)
    before = client.as_of(0)
    assert dataset.name not in before.dataset_names() and dataset.name in client.dataset_names()
