"""The catalog at a point of its history, on the real broker and Spark projector: tags pin what a
training run read, later replacements and removals do not change it, and bad points and names
raise before anything is sent."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pyarrow as pa
import pytest

import sdk


def rows(dataset) -> list[tuple]:
    """Each segment's points, as ``reader()`` reads them."""
    table = pa.table(dataset.reader(index="log_time"))
    [points] = [name for name in table.column_names if name.endswith(":positions")]
    return sorted((row["rerun_segment_id"], repr(row[points])) for row in table.to_pylist())


def test_a_tag_pins_a_training_set_through_later_changes(dataset: sdk.DatasetEntry, make_rrd) -> None:
    dataset.register([make_rrd(f"ep{i}", points=2) for i in range(3)]).wait()
    tag = dataset.create_tag("train-2026-11-25")
    trained_on = rows(dataset)
    assert {r[0] for r in trained_on} == {"ep0", "ep1", "ep2"}
    assert dataset.tags() == [tag] and tag.name == "train-2026-11-25"

    dataset.register([make_rrd("ep0", name="ep0-relabelled", points=5)], on_duplicate="replace").wait()
    dataset.unregister(segments_to_drop=["ep2"]).wait()
    dataset.register([make_rrd("ep3")]).wait()

    assert rows(dataset) != trained_on and dataset.segment_ids() == ["ep0", "ep1", "ep3"]
    then = dataset.as_of("train-2026-11-25")
    assert rows(then) == trained_on
    assert then.segment_ids() == ["ep0", "ep1", "ep2"] and then.point == tag.offset
    assert pa.table(then.segment_table())["rerun_storage_urls"].to_pylist()[0] == [
        make_rrd("ep0", points=2)]  # the file the run read, not its replacement
    changes = pa.table(dataset.diff("train-2026-11-25")).to_pylist()
    assert [(c["rerun_segment_id"], c["rerun_layer_name"] or c["property"], c["change"])
            for c in changes] == [
        ("ep0", "base", "layer_replaced"),
        ("ep0", "property:RecordingInfo:start_time", "property_changed"),  # a new recording, a new start
        ("ep3", None, "segment_added"), ("ep3", "base", "layer_added"),
        ("ep2", None, "segment_removed"), ("ep2", "base", "layer_removed")]
    assert changes[0]["new_storage_url"].endswith("ep0-relabelled.rrd")
    assert pa.table(dataset.diff(tag.offset, "train-2026-11-25")).num_rows == 0


def test_tags_are_unique_moved_by_delete_and_create_and_checked_before_sending(
        client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    first = dataset.create_tag("best")
    dataset.register([make_rrd("later")]).wait()
    with pytest.raises(sdk.AlreadyExistsError, match="tag 'best'.*delete it first"):
        dataset.create_tag("best")
    dataset.delete_tag("best")
    moved = dataset.create_tag("best")
    assert moved.offset > first.offset and [t.name for t in dataset.tags()] == ["best"]
    assert dataset.as_of("best").segment_ids() == ["later"]
    with pytest.raises(sdk.NotFoundError, match="no tag 'gone'"):
        dataset.delete_tag("gone")
    with pytest.raises(LookupError, match="no tag 'gone' \\(its tags: 'best'\\)"):
        dataset.as_of("gone")
    for bad in ("", "123", "tab\tname"):
        with pytest.raises(ValueError):
            dataset.create_tag(bad)
    with pytest.raises(ValueError, match="the log has offsets 0 to"):
        dataset.create_tag("far", 10**12)
    with pytest.raises(ValueError, match="read-only"):
        dataset.as_of("best").create_tag("from-the-past")
    pinned = dataset.create_tag("at-first", first.offset)
    assert pinned.offset == first.offset and dataset.as_of("at-first").segment_ids() == []
    assert [t.name for t in dataset.tags()] == ["at-first", "best"]


LABELS = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"rerun:is_table_index": b"true"}),
                    pa.field("label", pa.string())])


def table_rows(table) -> list[tuple]:
    return [(row["id"], row["label"]) for row in pa.table(table.reader()).to_pylist()]


def now_between_writes() -> datetime:
    """A point after the writes acknowledged so far and before the next one (Kafka's record
    times are in milliseconds)."""
    time.sleep(0.05)
    point = datetime.now(UTC)
    time.sleep(0.05)
    return point


def test_a_table_as_of_a_point_reads_the_rows_it_had_then(client: sdk.CatalogClient) -> None:
    name = f"labels_{uuid.uuid4().hex[:8]}"
    table = client.create_table(name, LABELS)
    before = now_between_writes()
    table.append(id=[1, 2, 3], label=["a", "b", "c"])
    table.append(id=[4], label=["d"])
    client.flush()
    appended = now_between_writes()
    table.upsert(id=[2, 5], label=["B", "e"])
    client.flush()
    upserted = now_between_writes()
    table.overwrite(id=[9], label=["z"])

    assert table_rows(table) == [(9, "z")]
    assert table_rows(table.as_of(appended)) == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert table_rows(table.as_of(upserted)) == [(1, "a"), (3, "c"), (4, "d"), (2, "B"), (5, "e")]
    assert table_rows(table.as_of(before)) == []
    with pytest.raises(ValueError, match="read-only"):
        table.as_of(appended).append(id=[6], label=["f"])

    table.delete()
    gone = client.as_of(upserted).get_table(name=name)  # deleted now, there then
    assert table_rows(gone) == [(1, "a"), (3, "c"), (4, "d"), (2, "B"), (5, "e")]
    later = client.create_table(f"{name}_later", LABELS)
    with pytest.raises(sdk.NotFoundError, match="did not exist yet"):
        later.as_of(upserted)
