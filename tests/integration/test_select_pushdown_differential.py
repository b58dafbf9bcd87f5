"""A ``select()`` on a ``reader()`` narrows what is read to the entities it names, on strata as
on Rerun's own server: rows where every selected component column would be null are not
produced, ``fill_latest_at=True`` turns that off, a filter on another entity's column widens the
entities read, a ``filter_contents`` view intersects with the selection, and a filter on the index
column does not widen anything. Each test runs the same query on both, on the same files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import datafusion
import numpy as np
import pyarrow as pa
import pytest
import rerun as rr
from datafusion import col, lit
from datafusion import functions as F

import sdk

pytestmark = pytest.mark.store_agnostic

OBJ1, OBJ2, OBJ3 = (f"/obj{i}:Points3D:positions" for i in (1, 2, 3))
T0 = 1_700_000_000 * 1_000_000_000


def _write(path: Path, segment: int) -> str:
    """Three entities on three timelines, each logged at its own steps (some steps log none)."""
    with rr.RecordingStream("strata-pushdown", recording_id=f"segment{segment}") as rec:
        rec.save(path)
        for step in range(12):
            rec.set_time("time_1", sequence=step)
            rec.set_time("time_2", duration=step * 0.5)
            rec.set_time("time_3", timestamp=np.datetime64(T0 + step * 1_000_000_000, "ns"))
            for entity, every in (("/obj1", 2), ("/obj2", 3), ("/obj3", 5)):
                if (step + segment) % every == 0:
                    rec.log(entity, rr.Points3D([[step, segment, every]]))
    return path.as_uri()


@pytest.fixture(scope="module")
def pair(reading_client: sdk.CatalogClient, rerun_client, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("pushdown")
    uris = [_write(directory / f"segment{i}.rrd", i) for i in range(3)]
    name = f"pushdown-{os.urandom(3).hex()}"
    ours, theirs = reading_client.create_dataset(name), rerun_client.create_dataset(name)
    ours.register(uris).wait()
    theirs.register(uris).wait()
    return ours, theirs


def _same(pair, query: Callable[[object], datafusion.DataFrame]) -> pa.Table:
    ours, theirs = (pa.table(query(dataset)) for dataset in pair)
    # The index columns of a whole reader come in another order (README, "Reading the recordings").
    assert sorted(ours.column_names) == sorted(theirs.column_names)
    assert ours.select(theirs.column_names).to_pylist() == theirs.to_pylist()
    return ours


TIMELINES = ["time_1", "time_2", "time_3"]


@pytest.mark.parametrize("index", TIMELINES)
def test_selecting_one_entity_drops_its_all_null_rows(pair, index: str) -> None:
    table = _same(pair, lambda ds: ds.reader(index=index).select("rerun_segment_id", index, OBJ1)
                  .sort(col("rerun_segment_id"), col(index)))
    assert table.num_rows and table.column(OBJ1).null_count == 0


@pytest.mark.parametrize("index", TIMELINES)
def test_selecting_two_entities_keeps_rows_where_either_has_data(pair, index: str) -> None:
    table = _same(pair, lambda ds: ds.reader(index=index).select("rerun_segment_id", index, OBJ1, OBJ2)
                  .sort(col("rerun_segment_id"), col(index)))
    both_null = [a is None and b is None for a, b in zip(table.column(OBJ1).to_pylist(),
                                                         table.column(OBJ2).to_pylist(), strict=True)]
    assert table.num_rows and not any(both_null) and table.column(OBJ1).null_count > 0


@pytest.mark.parametrize("index", TIMELINES)
def test_fill_latest_at_keeps_every_row(pair, index: str) -> None:
    narrowed = _same(pair, lambda ds: ds.reader(index=index, fill_latest_at=True)
                     .select("rerun_segment_id", index, OBJ1).sort(col("rerun_segment_id"), col(index)))
    every = _same(pair, lambda ds: ds.reader(index=index, fill_latest_at=True)
                  .select("rerun_segment_id", index, OBJ1, OBJ2, OBJ3)
                  .sort(col("rerun_segment_id"), col(index)))
    assert narrowed.num_rows == every.num_rows


@pytest.mark.parametrize("index", TIMELINES)
def test_a_filter_on_another_entity_widens_what_is_read(pair, index: str) -> None:
    _same(pair, lambda ds: ds.reader(index=index).filter(col(OBJ2).is_not_null())
          .select("rerun_segment_id", index, OBJ1).sort(col("rerun_segment_id"), col(index)))


@pytest.mark.parametrize("index", TIMELINES)
def test_a_contents_view_intersects_with_the_selection(pair, index: str) -> None:
    _same(pair, lambda ds: ds.filter_contents(["/obj1/**", "/obj2/**"]).reader(index=index)
          .select("rerun_segment_id", index, OBJ1).sort(col("rerun_segment_id"), col(index)))
    _same(pair, lambda ds: ds.filter_contents(["/obj1/**", "/obj2/**"]).reader(index=index)
          .select("rerun_segment_id", index, OBJ1, OBJ2).sort(col("rerun_segment_id"), col(index)))


def test_a_filter_on_the_index_does_not_widen_what_is_read(pair) -> None:
    table = _same(pair, lambda ds: ds.reader(index="time_1").filter(col("time_1") > lit(3))
                  .select("rerun_segment_id", "time_1", OBJ1).sort(col("rerun_segment_id"), col("time_1")))
    assert table.num_rows and table.column(OBJ1).null_count == 0


def test_without_a_selection_every_row_is_read(pair) -> None:
    table = _same(pair, lambda ds: ds.reader(index="time_1").sort(col("rerun_segment_id"), col("time_1")))
    assert table.column(OBJ1).null_count > 0
    _same(pair, lambda ds: ds.reader(index="time_1").select("rerun_segment_id", "time_1")
          .sort(col("rerun_segment_id"), col("time_1")))
    assert pair[0].reader(index="time_1").count() == pair[1].reader(index="time_1").count()


def _descriptors(schema) -> list[tuple]:
    return [(c.name, getattr(c, "entity_path", None), getattr(c, "component", None),
             getattr(c, "archetype", None), getattr(c, "is_static", None)) for c in schema]


def test_schema_is_rerun_s_and_describes_every_column(pair) -> None:
    ours, theirs = (dataset.schema() for dataset in pair)
    assert type(ours) is type(theirs)
    assert _descriptors(ours) == _descriptors(theirs)
    assert ours.entity_paths() == theirs.entity_paths() == ["/obj1", "/obj2", "/obj3"]
    assert [c.name for c in ours.index_columns()] == [c.name for c in theirs.index_columns()]
    assert ours.column_for("/obj1", "Points3D:positions") is not None
    view = pair[0].filter_contents(["/obj2/**"])
    assert view.schema().entity_paths() == pair[1].filter_contents(["/obj2/**"]).schema().entity_paths()
    assert pair[0].arrow_schema().field(OBJ1).metadata[b"rerun:entity_path"] == b"/obj1"


def test_every_column_of_the_schema_can_be_read_alone(pair) -> None:
    """Rerun's own check that its schema describes the dataset: each component column's entity,
    read on the last index (static ones without), has rows; on both systems."""
    from rerun.catalog import IndexColumnDescriptor

    for dataset in pair:
        index = None
        for column in dataset.schema():
            if isinstance(column, IndexColumnDescriptor):
                index = column.name
                continue
            reader = dataset.filter_contents([column.entity_path]).reader(
                index=None if column.is_static else index)
            assert reader.count() > 0, column.name


def _filters(index: str, segments: list[str], times: list) -> list:
    """Rerun's filter shapes: on the index, on the segment id, both, or either; empty results;
    a filter that names neither (evaluated after the scan)."""
    low, high, first, last = (lit(t) for t in times)
    one, two = segments[0], segments[1]
    seg = col("rerun_segment_id")
    return [
        col(index) == low, col(index) > low, col(index) >= low, col(index) < low, col(index) <= low,
        (col(index) >= low) & (col(index) <= high), col(index).between(low, high),
        col(index).between(low, high, negated=True), (col(index) > low) & (col(index) < high),
        seg == one, F.in_list(seg, [lit(one), lit(two)]), F.in_list(seg, [lit(one), lit(two)], negated=True),
        (seg == one) & (col(index) >= low) & (col(index) <= high), (seg == one) & (col(index) < first),
        (seg == one) & (col(index) > last), (seg == one) | (seg == two),
        ((seg == one) & (col(index) > low)) | ((seg == two) & (col(index) < high)),
        F.substring(seg, lit(2), lit(3)) == lit("some_value"),
    ]


@pytest.mark.parametrize("index", ["time_2", "time_3"])
def test_filters_give_what_filtering_every_row_gives(pair, client: sdk.CatalogClient, index: str) -> None:
    ours, theirs = pair
    times = pa.table(ours.reader(index=index).filter(col("rerun_segment_id") == lit("segment0"))
                     .select(index).sort(col(index))).column(index).to_pylist()
    boundaries = [times[len(times) // 3], times[2 * len(times) // 3], times[0], times[-1]]
    everything = client.ctx.from_arrow(pa.table(ours.reader(index=index)))
    for condition in _filters(index, sorted(ours.segment_ids()), boundaries):
        ordered = [col("rerun_segment_id"), col(index)]
        expected = pa.table(everything.filter(condition).sort(*ordered))
        strata = pa.table(ours.reader(index=index).filter(condition).sort(*ordered))
        rerun = pa.table(theirs.reader(index=index).filter(condition).sort(*ordered))
        assert strata.to_pylist() == expected.to_pylist(), condition
        assert strata.select(rerun.column_names).to_pylist() == rerun.to_pylist(), condition
