"""The dashboard's pieces that need no stack: cursors from query parameters, the rate chart's
buckets, and property values written for a person."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from dashboard.app import BadParameter, parse_cursor
from dashboard.feed import BUCKET_SECS, WINDOW_SECS, FeedHub
from dashboard.segment import display
from projector import Change, ChangeKind, LogPosition


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
