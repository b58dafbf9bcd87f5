"""Selecting segments: ``where`` conditions read from text by the column's type
(``dashboard.query``) and evaluated on the segment table (``projector.views.select_segments``),
sorting with nulls last, pages, and the message of each bad input."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest

from dashboard.query import parse_sort, parse_value, parse_where, split_condition
from projector.segment_filters import (
    Condition,
    HasLayer,
    SegmentQueryError,
    SortKey,
    resolve_column,
    select_segments,
)
from projector.views import TIMESTAMP, layer_counts

JULY_10_NS = 1_688_947_200_000_000_000
"""2023-07-10T00:00:00Z."""


def segment_table() -> pa.Table:
    """Five segments with a column of every kind a segment table has: one-item property lists
    (some null or empty), a property of two items, plain strings, numbers, times and bytes."""
    table = pa.table({
        "rerun_segment_id": ["ep_a", "ep_b", "ep_c", "ep_d", "ep_e"],
        "rerun_layer_names": [["base"], ["base", "quality"], ["base", "quality"], ["base"], ["quality"]],
        "rerun_size_bytes": pa.array([10, 30, 20, None, 40], pa.uint64()),
        "rerun_last_updated_at": pa.array([datetime(2023, 7, 9), datetime(2023, 7, 10, 12), None,
                                           datetime(2023, 7, 11), datetime(2023, 7, 10)], TIMESTAMP),
        "property:quality:tracking_good": pa.array([None, [True], [False], [], [True]], pa.list_(pa.bool_())),
        "property:episode:scene_id": pa.array([[3], [1], [None], [5], [1]], pa.list_(pa.int64())),
        "property:episode:building": pa.array([["ILIAD"], ["RAIL"], ["ILIAD lab"], None, ["AUTOLab"]]),
        "property:episode:tags": pa.array([["pick", "place"], ["pick"], [], ["wipe"], None]),
        "property:episode:score": pa.array([[0.5], [1.5], [2.5], [None], [-1.0]], pa.list_(pa.float64())),
        "property:RecordingInfo:start_time": pa.array(
            [[JULY_10_NS - 1], [JULY_10_NS], [JULY_10_NS + 1], None, [0]], pa.list_(pa.int64())),
        "property:episode:note": pa.array(["first try", "second", None, "try again", ""]),
        "property:episode:blob": pa.array([b"x", b"y", b"z", b"", None]),
        "property:episode:length": pa.array([timedelta(seconds=s) for s in (7.5, 1, 2, 3, 4)],
                                            pa.duration("ns")),
        "real_time:start": pa.array([datetime(2023, 7, 10, h) for h in (1, 2, 3, 4, 5)], TIMESTAMP),
    })
    at = table.schema.get_field_index("property:RecordingInfo:start_time")
    return table.cast(table.schema.set(at, table.schema.field(at).with_metadata(
        {"rerun:component_type": "rerun.components.Timestamp"})))


TABLE = segment_table()


def ids(table: pa.Table) -> list[str]:
    return table.column("rerun_segment_id").to_pylist()


def where(*texts: str, sort: str | None = None, offset: int = 0, limit: int | None = None) -> list[str]:
    """The ids ``where=`` texts select from ``TABLE``, read and evaluated as the routes do."""
    conditions = tuple(parse_where(TABLE.schema, text) for text in texts)
    key = parse_sort(TABLE.schema, sort) if sort else None
    return ids(select_segments(TABLE, conditions, sort=key, offset=offset, limit=limit).rows)


@pytest.mark.parametrize(("text", "selected"), [
    # booleans, in one-item lists: a null or empty list never matches
    ("tracking_good = true", ["ep_b", "ep_e"]),
    ("tracking_good = FALSE", ["ep_c"]),
    ("tracking_good != true", ["ep_c"]),
    # integers in lists, every comparison; the null item never matches
    ("scene_id = 1", ["ep_b", "ep_e"]),
    ("scene_id != 1", ["ep_a", "ep_d"]),
    ("scene_id < 3", ["ep_b", "ep_e"]),
    ("scene_id <= 3", ["ep_a", "ep_b", "ep_e"]),
    ("scene_id > 3", ["ep_d"]),
    ("scene_id >= 3", ["ep_a", "ep_d"]),
    ("scene_id>=3", ["ep_a", "ep_d"]),
    ("scene_id contains 5", ["ep_d"]),
    # unsigned integers, a plain column
    ("rerun_size_bytes > 15", ["ep_b", "ep_c", "ep_e"]),
    ("rerun_size_bytes = 30", ["ep_b"]),
    # floats
    ("score > 1", ["ep_b", "ep_c"]),
    ("score <= -1", ["ep_e"]),
    ("score = 0.5", ["ep_a"]),
    # strings: quotes optional, ordered, contains is a substring of a string and an item of a list
    ("building = ILIAD", ["ep_a"]),
    ("building = 'ILIAD lab'", ["ep_c"]),
    ('building = "ILIAD lab"', ["ep_c"]),
    ("building = ILIAD lab", ["ep_c"]),
    ("building != ILIAD", ["ep_b", "ep_c", "ep_e"]),
    ("building > ILIAD", ["ep_b", "ep_c"]),
    ("building contains ILIAD", ["ep_a"]),
    ("tags contains pick", ["ep_a", "ep_b"]),
    ("tags = place", ["ep_a"]),
    ("note contains try", ["ep_a", "ep_d"]),
    ("note = ''", ["ep_e"]),
    ("rerun_segment_id = ep_c", ["ep_c"]),
    ("rerun_layer_names contains quality", ["ep_b", "ep_c", "ep_e"]),
    # timestamps as ISO 8601 dates: Arrow's (naive: UTC), and Rerun's int64 nanoseconds
    ("rerun_last_updated_at >= 2023-07-10", ["ep_b", "ep_d", "ep_e"]),
    ("rerun_last_updated_at < 2023-07-10T12:00:00Z", ["ep_a", "ep_e"]),
    ("rerun_last_updated_at = 2023-07-10T14:00:00+02:00", ["ep_b"]),
    ("real_time:start > 2023-07-10T03:00", ["ep_d", "ep_e"]),
    ("start_time >= 2023-07-10", ["ep_b", "ep_c"]),
    ("start_time < 2023-07-10T00:00:00Z", ["ep_a", "ep_e"]),
    (f"start_time = {JULY_10_NS}", ["ep_b"]),
    # durations in seconds
    ("length > 2.5", ["ep_a", "ep_d", "ep_e"]),
    # full names and the end of a name after a ':'
    ("property:quality:tracking_good = true", ["ep_b", "ep_e"]),
    ("quality:tracking_good = true", ["ep_b", "ep_e"]),
    ("RecordingInfo:start_time > 0", ["ep_a", "ep_b", "ep_c"]),
    # the layer form
    ("layer has quality", ["ep_b", "ep_c", "ep_e"]),
    ("Layer  has  'base'", ["ep_a", "ep_b", "ep_c", "ep_d"]),
    ("layer has nothing_yet", []),
])
def test_a_condition_selects_the_segments_it_describes(text: str, selected: list[str]) -> None:
    assert where(text) == selected


def test_every_condition_must_hold() -> None:
    assert where("tracking_good = true", "scene_id = 1", "layer has base") == ["ep_b"]
    assert where() == ids(TABLE)


def test_a_condition_is_read_into_a_typed_value_of_the_full_column() -> None:
    assert parse_where(TABLE.schema, " tracking_good =  true ") == Condition(
        "property:quality:tracking_good", "=", True)
    assert parse_where(TABLE.schema, "start_time >= 2023-07-10") == Condition(
        "property:RecordingInfo:start_time", ">=", JULY_10_NS)
    assert parse_where(TABLE.schema, "layer has quality") == HasLayer("quality")
    assert split_condition("building = a = b") == ("building", "=", "a = b")
    assert split_condition("building=a=b") == ("building", "=", "a=b")


def test_conditions_built_in_code_take_short_names_too() -> None:
    page = select_segments(TABLE, (Condition("tracking_good", "=", True), HasLayer("base")))
    assert (ids(page.rows), page.total) == (["ep_b"], 1)


def test_sort_is_stable_and_puts_nulls_last_both_ways() -> None:
    assert where(sort="rerun_size_bytes") == ["ep_a", "ep_c", "ep_b", "ep_e", "ep_d"]
    assert where(sort="-rerun_size_bytes") == ["ep_e", "ep_b", "ep_c", "ep_a", "ep_d"]
    # a list column by its first item; an empty or null list is a null, as is a null first item
    assert where(sort="scene_id") == ["ep_b", "ep_e", "ep_a", "ep_d", "ep_c"]
    assert where(sort="-scene_id") == ["ep_d", "ep_a", "ep_b", "ep_e", "ep_c"]
    assert where(sort="tags") == ["ep_a", "ep_b", "ep_d", "ep_c", "ep_e"]  # a tie keeps the order
    assert where(sort="-rerun_last_updated_at") == ["ep_d", "ep_b", "ep_e", "ep_a", "ep_c"]
    assert where(sort="-tracking_good") == ["ep_b", "ep_e", "ep_c", "ep_a", "ep_d"]


def test_a_page_is_cut_after_filtering_and_sorting_and_counts_every_match() -> None:
    conditions = (parse_where(TABLE.schema, "layer has base"),)
    page = select_segments(TABLE, conditions, sort=SortKey("rerun_segment_id", descending=True),
                           offset=1, limit=2)
    assert (ids(page.rows), page.total) == (["ep_c", "ep_b"], 4)
    assert page.rows.schema == TABLE.schema
    past_the_end = select_segments(TABLE, conditions, offset=10, limit=2)
    assert (past_the_end.rows.num_rows, past_the_end.total) == (0, 4)
    assert where(offset=3) == ["ep_d", "ep_e"]


def test_an_empty_segment_table_selects_nothing() -> None:
    empty = TABLE.slice(0, 0)
    page = select_segments(empty, (Condition("tracking_good", "=", True), HasLayer("base")),
                           sort=SortKey("scene_id"), limit=100)
    assert (page.rows.num_rows, page.total) == (0, 0)


def test_layer_counts_count_segments_per_layer_name() -> None:
    segments = pa.table({"rerun_segment_id": ["s1", "s2", "s3"],
                         "rerun_layer_names": [["base", "quality"], ["base"], ["quality", "base"]]})
    assert layer_counts(segments).to_pylist() == [{"name": "base", "segments": 3},
                                                  {"name": "quality", "segments": 2}]


AMBIGUOUS = pa.schema([("rerun_segment_id", pa.string()), ("property:episode:start", pa.list_(pa.int64())),
                       ("property:calibration:start", pa.list_(pa.int64())), ("real_time:start", TIMESTAMP)])


def test_a_short_name_of_several_properties_lists_their_full_names() -> None:
    with pytest.raises(SegmentQueryError) as error:
        resolve_column(AMBIGUOUS, "start")
    assert str(error.value) == ("'start' is the short name of several properties (property:episode:start, "
                                "property:calibration:start): write the full name")
    assert resolve_column(AMBIGUOUS, "episode:start").name == "property:episode:start"
    assert resolve_column(AMBIGUOUS, "real_time:start").name == "real_time:start"


@pytest.mark.parametrize(("text", "message"), [
    ("no_such_column = 1", "no column 'no_such_column' (columns: rerun_segment_id, rerun_layer_names, "),
    ("tracking_good is true", "unknown operator 'is' (operators: =, !=, <, <=, >, >=, contains)"),
    ("tracking_good == true", "unknown operator '==' (operators: =, !=, <, <=, >, >=, contains)"),
    ("tracking_good ~ true", "unknown operator '~'"),
    ("tracking_good", "'tracking_good' is not a condition: write COLUMN OP VALUE (e.g. tracking_good = true) "
                      "or layer has NAME"),
    ("", "'' is not a condition"),
    ("tracking_good = yes", "property:quality:tracking_good (list<item: bool>) is boolean: expected true or "
                            "false, got 'yes'"),
    ("tracking_good < true", "property:quality:tracking_good is boolean (list<item: bool>): use = or != "
                             "with true or false"),
    ("scene_id = three", "property:episode:scene_id (list<item: int64>) holds integers: expected an "
                         "integer, got 'three'"),
    ("scene_id = 1.5", "holds integers: expected an integer, got '1.5'"),
    ("rerun_size_bytes > -1", "-1 is not a value of rerun_size_bytes (uint64)"),
    ("score > high", "property:episode:score (list<item: double>) holds numbers: expected a number, "
                     "got 'high'"),
    ("rerun_last_updated_at > yesterday", "rerun_last_updated_at holds timestamps (timestamp[ns]): "
                                          "expected an ISO 8601 date such as 2023-07-10 or "
                                          "2023-07-10T14:40:00Z, got 'yesterday'"),
    ("start_time > july", "expected an ISO 8601 date such as 2023-07-10"),
    ("length > long", "property:episode:length (duration[ns]) holds durations: expected seconds (e.g. 7.5), "
                      "got 'long'"),
    ("scene_id contains", "'scene_id contains' is not a condition"),
    ("rerun_size_bytes contains 3", "contains takes a string column (a substring) or a list column (an "
                                    "item); rerun_size_bytes is uint64: use =, !=, <, <=, > or >="),
    ("blob = x", "property:episode:blob (binary) cannot be compared: filter on another column"),
])
def test_a_bad_condition_says_what_was_wrong_and_what_fits(text: str, message: str) -> None:
    with pytest.raises(SegmentQueryError) as error:
        parse_where(TABLE.schema, text)
    assert message in str(error.value)
    assert isinstance(error.value, ValueError)


def test_an_unknown_column_lists_every_column() -> None:
    with pytest.raises(SegmentQueryError) as error:
        parse_where(TABLE.schema, "nope = 1")
    assert all(name in str(error.value) for name in TABLE.column_names)


@pytest.mark.parametrize(("text", "message"), [
    ("nope", "no column 'nope'"),
    ("-", "expected COLUMN or -COLUMN (descending), got '-'"),
    ("start", "no column 'start'"),
])
def test_a_bad_sort_key_says_why(text: str, message: str) -> None:
    with pytest.raises(SegmentQueryError) as error:
        parse_sort(TABLE.schema, text)
    assert message in str(error.value)


def test_conditions_built_in_code_are_checked_too() -> None:
    with pytest.raises(SegmentQueryError, match="unknown operator 'like'"):
        select_segments(TABLE, (Condition("building", "like", "IL%"),))
    with pytest.raises(SegmentQueryError, match=r"'three' is not a value of property:episode:scene_id"):
        select_segments(TABLE, (Condition("scene_id", "=", "three"),))


@pytest.mark.parametrize(("kind", "text", "value"), [
    (pa.bool_(), "True", True),
    (pa.int8(), "-3", -3),
    (pa.float32(), "1e3", 1000.0),
    (pa.string(), "'quoted'", "quoted"),
    (pa.large_string(), '"a b"', "a b"),
    (pa.timestamp("us", tz="UTC"), "2023-07-10T02:00:00+02:00",
     datetime.fromisoformat("2023-07-10T00:00:00+00:00")),
    (pa.timestamp("ns"), "2023-07-10", datetime(2023, 7, 10)),
    (pa.date32(), "2023-07-10", datetime(2023, 7, 10).date()),
    (pa.duration("ms"), "0.25", timedelta(milliseconds=250)),
])
def test_a_value_is_read_by_the_column_type(kind: pa.DataType, text: str, value: object) -> None:
    assert parse_value(pa.field("c", kind), text) == value
    assert parse_value(pa.field("c", pa.list_(kind)), text) == value
