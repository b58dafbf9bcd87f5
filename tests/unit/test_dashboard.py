"""The dashboard's pieces that need no stack: cursors from query parameters, the rate chart's
buckets, property values written for a person, the parts the routes read, and routes over a
store made by the fold."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from starlette.exceptions import HTTPException

from dashboard.app import BadParameter, parse_cursor
from dashboard.feed import BUCKET_SECS, WINDOW_SECS, FeedHub
from dashboard.recording_reads import RecordingReads
from dashboard.segment import display
from dashboard.segment_tables import SegmentTables
from events import Event
from projector import CatalogReader, Change, ChangeKind, LogPosition, apply_batch, open_store
from projector.stores.sqlite import SqliteStore
from sdk.errors import NotFoundError, ObjectStoreError, RecordingChangedError

from .conftest import create, log_record, register


@pytest.mark.parametrize(("value", "cursor"), [("0", (0, -1)), ("17", (17, -1)), ("17.0", (17, 0)),
                                               ("17.3", (17, 3))])
def test_a_cursor_is_an_offset_or_an_event_id(value: str, cursor: tuple[int, int]) -> None:
    assert parse_cursor("since", value) == cursor


@pytest.mark.parametrize("value", ["", "x", "1.x", "-1", "1.-2", "1.2.3"])
def test_a_bad_cursor_names_its_parameter(value: str) -> None:
    with pytest.raises(BadParameter) as error:
        parse_cursor("Last-Event-ID", value)
    assert error.value.status_code == 400
    assert error.value.detail.startswith("Last-Event-ID: ")


def change(offset: int, kind: ChangeKind, committed: float) -> Change:
    return Change(LogPosition("strata.catalog", 0, offset), 0, kind, uuid.uuid4(), "d", "s", "base", "",
                  datetime.fromtimestamp(committed, UTC))


def test_the_rates_count_registrations_and_rejections_per_bucket() -> None:
    hub = FeedHub(lambda: None)
    now = time.time()
    hub._count([change(0, ChangeKind.LAYER_ADDED, now - 1), change(1, ChangeKind.LAYER_REPLACED, now - 1),
                change(2, ChangeKind.SEGMENT_ADDED, now - 1), change(3, ChangeKind.REJECTED, now - 1),
                change(4, ChangeKind.LAYER_ADDED, now - 60),
                change(5, ChangeKind.LAYER_ADDED, now - WINDOW_SECS - 10)])
    series = hub.rates()
    assert len(series) == WINDOW_SECS // BUCKET_SECS
    counts = {rate: sum(b[rate] for b in series) * BUCKET_SECS
              for rate in ("registrations_per_sec", "rejections_per_sec")}
    # Not the segment's change, nor the registration older than the window.
    assert counts == {"registrations_per_sec": pytest.approx(3), "rejections_per_sec": pytest.approx(1)}
    last_two = series[-1]["registrations_per_sec"] + series[-2]["registrations_per_sec"]
    assert last_two == pytest.approx(2 / BUCKET_SECS)
    assert [b["t"] for b in series] == sorted(b["t"] for b in series)


@pytest.mark.parametrize(("field", "value", "text"), [
    (pa.field("p", pa.list_(pa.int64()), metadata={b"rerun:component_type": b"rerun.components.Timestamp"}),
     [1_700_000_000_123_456_789], "2023-11-14T22:13:20.123456+00:00"),
    (pa.field("p", pa.list_(pa.string())), ["ILIAD"], "ILIAD"),
    (pa.field("p", pa.list_(pa.float64())), [0.5, 1.5], "[0.5, 1.5]"),
    (pa.field("p", pa.list_(pa.int64())), list(range(10)), "[0, 1, 2, 3, 4, 5, 6, 7, ... 2 more]"),
    (pa.field("p", pa.duration("ns")), timedelta(seconds=7.5), "7.5 s"),
    (pa.field("p", pa.timestamp("ns")), datetime(2023, 7, 10, 14, 40), "2023-07-10T14:40:00+00:00"),
    (pa.field("p", pa.list_(pa.bool_())), [False], "false"),
    (pa.field("p", pa.int64()), None, ""),
])
def test_a_property_is_written_by_its_type(field: pa.Field, value, text: str) -> None:
    assert display(field, value) == text


# -- the parts the routes read ------------------------------------------------------------------

def fold_store(path: Path, events: list[Event], first_offset: int = 0) -> None:
    """``events`` folded into the SQLite store at ``path`` from ``first_offset`` on, as the
    projector commits a batch."""
    store = SqliteStore(path)
    try:
        apply_batch(store, [log_record(event, first_offset + n) for n, event in enumerate(events)])
    finally:
        store.close()


def test_a_segment_table_is_built_once_per_commit_and_the_last_few_are_kept(tmp_path: Path) -> None:
    robots, arms = uuid.uuid4(), uuid.uuid4()
    fold_store(tmp_path / "store.db", [create(robots, "robots"), register(robots, "ep1"),
                                       create(arms, "arms"), register(arms, "ep1")])
    built: list[tuple[uuid.UUID, str | None]] = []

    def now_or_at(store: CatalogReader, dataset_id: uuid.UUID, point: str | None) -> CatalogReader:
        built.append((dataset_id, point))
        return store if point is None else store.at(int(point))

    tables = SegmentTables(now_or_at, kept=2)
    store = open_store(tmp_path / "store.db", read_only=True)
    try:
        first = tables.table(store, robots, None)
        assert tables.table(store, robots, None) is first and built == [(robots, None)]
        assert first.column("rerun_segment_id").to_pylist() == ["ep1"]
        fold_store(tmp_path / "store.db", [register(robots, "ep2")], first_offset=4)
        after_commit = tables.table(store, robots, None)
        assert after_commit.column("rerun_segment_id").to_pylist() == ["ep1", "ep2"]
        assert tables.table(store, robots, "2").column("rerun_segment_id").to_pylist() == ["ep1"]
        assert built == [(robots, None), (robots, None), (robots, "2")]
        tables.table(store, arms, None)  # a third table: the oldest one kept, (robots, None), goes
        tables.table(store, robots, "2")
        tables.table(store, arms, None)
        assert built == [(robots, None), (robots, None), (robots, "2"), (arms, None)]
        assert tables.table(store, robots, None).equals(after_commit)
        assert built[-1] == (robots, None)  # built again
    finally:
        store.close()


@pytest.mark.parametrize(("error", "status"), [
    (NotFoundError("the recording at file:///gone.rrd no longer exists"), 404),
    (RecordingChangedError("the recording at file:///grown.rrd has 12 bytes, but 10 were registered"), 409),
    (ObjectStoreError("s3 is out of reach"), 503),
    (ConnectionError("s3 is out of reach"), 503),
    (ValueError("segment 's' has no entity '/nope'"), 400),
])
def test_a_recording_read_s_error_is_answered_with_its_status_and_message(error: Exception,
                                                                          status: int) -> None:
    def fail() -> None:
        raise error

    reads = RecordingReads()
    try:
        with pytest.raises(HTTPException) as answered:
            asyncio.run(reads.run(fail))
    finally:
        reads.close()
    assert (answered.value.status_code, answered.value.detail) == (status, str(error))


def test_a_recording_read_s_result_comes_back() -> None:
    reads = RecordingReads()
    try:
        assert asyncio.run(reads.run(divmod, 17, 5)) == (3, 2)
    finally:
        reads.close()
