"""The dashboard's pieces that need no stack: cursors from query parameters, the rate chart's
buckets, property values written for a person, the parts the routes read, and routes over a
store made by the fold."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from dashboard import ARROW_STREAM, Dashboard
from dashboard.app import BadParameter, create_app, parse_cursor
from dashboard.feed import BUCKET_SECS, WINDOW_SECS, FeedHub
from dashboard.recording_reads import RecordingReads
from dashboard.segment import display, opening_timeline
from dashboard.segment_tables import SegmentTables
from dashboard.store_reads import StoreNotOpenError, StoreReads
from events import CreateDataset, Event
from projector import Change, ChangeKind, LogPosition, ProjectionReader, apply_batch, open_store
from projector.stores.sqlite import SqliteStore
from recordings import read_recording
from sdk.errors import NotFoundError, ObjectStoreError, RecordingChangedError
from sdk.layer_commands import layer_commands

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

    def now_or_at(store: ProjectionReader, dataset_id: uuid.UUID, point: str | None) -> ProjectionReader:
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


def test_the_store_is_read_only_between_open_and_close(tmp_path: Path) -> None:
    robots = uuid.uuid4()
    fold_store(tmp_path / "store.db", [create(robots, "robots")])
    reads = StoreReads(str(tmp_path / "store.db"))

    async def name_of_robots() -> str | None:
        dataset = await reads.run(lambda store: store.dataset(robots))
        return None if dataset is None else dataset.name

    with pytest.raises(StoreNotOpenError, match=r"store .*store\.db is not open yet: the app opens it"):
        asyncio.run(name_of_robots())

    async def open_then_read() -> str | None:
        await reads.open()
        return await name_of_robots()

    assert asyncio.run(open_then_read()) == "robots"
    reads.close()
    with pytest.raises(StoreNotOpenError, match=r"store .*store\.db is closed"):
        asyncio.run(name_of_robots())
    with pytest.raises(StoreNotOpenError, match="does not reopen"):
        asyncio.run(reads.open())


def asgi_get(app: Starlette, path: str) -> tuple[int, bytes]:
    """One GET of ``path`` from ``app``, called as the ASGI server calls it, without running its
    lifespan: its status and body."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": [(b"host", b"test")], "server": ("test", 80),
             "client": ("test", 1)}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_a_route_read_before_the_app_started_is_a_503_saying_so(tmp_path: Path) -> None:
    fold_store(tmp_path / "store.db", [create(uuid.uuid4(), "robots")])
    app = create_app(str(tmp_path / "store.db"))
    for path in ("/api/datasets", "/api/datasets/robots/segments", "/datasets/robots"):
        status, body = asgi_get(app, path)
        assert status == 503, path
        assert "is not open yet: the app opens it as it starts" in json.loads(body)["error"]


def test_the_feed_hub_hands_each_page_of_the_feed_to_every_subscriber(tmp_path: Path) -> None:
    robots = uuid.uuid4()
    fold_store(tmp_path / "store.db", [create(robots, "robots"), register(robots, "ep1")])
    def store() -> ProjectionReader:
        return open_store(tmp_path / "store.db", read_only=True)

    FeedHub(store).stop()  # never started: nothing to stop
    hub = FeedHub(store)

    async def follow() -> list[list[Change] | None]:
        queues = [hub.subscribe(), hub.subscribe()]
        hub.start(asyncio.get_running_loop())
        with pytest.raises(RuntimeError, match="followed already"):
            hub.start(asyncio.get_running_loop())
        try:
            return [await asyncio.wait_for(queue.get(), 30) for queue in queues]
        finally:
            await asyncio.to_thread(hub.stop)

    pages = asyncio.run(follow())
    shown = [(ChangeKind.DATASET_CREATED, ""), (ChangeKind.LAYER_ADDED, "ep1"),
             (ChangeKind.SEGMENT_ADDED, "ep1")]
    assert [[(c.kind, c.segment_id) for c in page or [] if c.entry_id == robots] for page in pages] == [
        shown, shown]
    assert hub.error is None


def test_a_feed_hub_that_cannot_open_its_store_says_why(tmp_path: Path) -> None:
    hub = FeedHub(lambda: open_store(tmp_path / "missing" / "store.db", read_only=True))

    async def follow() -> None:
        hub.start(asyncio.get_running_loop())
        await asyncio.to_thread(hub.stop)

    asyncio.run(follow())
    assert hub.error is not None and hub.error.startswith("opening the store to read the change feed failed")


# -- the segment page, on a recording whose series are not on its first timeline ---------------

def write_joints_recording(path: Path, recording_id: str) -> None:
    """A recording that is not DROID-like: the scalar series ``/joints`` (60 rows of 3 values)
    sent with ``send_columns`` on a ``step`` timeline only, and camera images logged with
    ``rec.log``, which puts them on ``log_time``: the segment's first timeline is ``log_time``."""
    import numpy as np
    import rerun as rr

    with rr.RecordingStream("strata-test", recording_id=recording_id) as rec:
        rec.save(path)
        rec.send_columns("/joints", indexes=[rr.TimeColumn("step", sequence=np.arange(60))],
                         columns=rr.Scalars.columns(scalars=np.linspace(0, 1, 180).reshape(60, 3)))
        for i in range(4):
            rec.log("/camera/image", rr.Image(np.full((8, 8, 3), 40 * i, dtype=np.uint8)))


def store_with(path: Path, dataset: str, recordings: list[Path]) -> Path:
    """A store made by the fold from the log a client would write: ``dataset`` created, then each
    recording registered as its ``base`` layer (its schemas defined first)."""
    dataset_id = uuid.uuid4()
    events: list[Event] = [Event(dataset_id, CreateDataset(dataset))]
    for recording in recordings:
        command, definitions = layer_commands(read_recording(recording.as_uri()), "base")
        events += [Event(dataset_id, c) for c in [*definitions, command]]
    fold_store(path, events)
    return path


@pytest.fixture(scope="module")
def joints_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """The dashboard of a store holding dataset ``robots``, whose segment ``joints_0`` is the
    recording of ``write_joints_recording``."""
    directory = tmp_path_factory.mktemp("joints")
    write_joints_recording(directory / "joints_0.rrd", "joints_0")
    store = store_with(directory / "store.db", "robots", [directory / "joints_0.rrd"])
    with Dashboard(str(store), port=0) as running:
        yield running


def get(url: str) -> tuple[int, str, bytes]:
    """The status, content type and body of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_a_segment_page_opens_on_a_timeline_its_series_have_data_on(joints_dashboard: Dashboard) -> None:
    base = f"{joints_dashboard.url}/api/datasets/robots/segments/joints_0"
    status, _, body = get(base)
    assert status == 200
    page = json.loads(body)
    assert [t["name"] for t in page["timelines"]] == ["log_time", "step"]  # as in the report
    assert page["series"] == ["/joints"]
    assert page["entity_timelines"]["/joints"] == ["step"]
    assert page["entity_timelines"]["/camera/image"] == ["log_time"]
    assert page["index"] == "step"
    status, kind, body = get(f"{base}/series.arrow?index={page['index']}&entity=/joints")
    assert (status, kind) == (200, ARROW_STREAM)
    series = pa.ipc.open_stream(body).read_all()
    values = series.column("/joints:Scalars:scalars").to_pylist()
    assert len(values) == 60 and {len(v) for v in values} == {3}
    # On the segment's first timeline the series has nothing to draw: the page says so and
    # offers the series' timelines (entity_timelines) rather than a blank plot.
    status, _, body = get(f"{base}/series.arrow?index=log_time&entity=/joints")
    assert status == 200 and pa.ipc.open_stream(body).read_all().num_rows == 0


@pytest.mark.parametrize(("path", "status", "message", "back"), [
    ("/datasets/robots/segments/nobody", 404, "dataset &#x27;robots&#x27; has no segment &#x27;nobody&#x27;",
     'href="/datasets/robots"'),
    ("/datasets/nothing/segments/joints_0", 404, "no dataset named &#x27;nothing&#x27;", 'href="/"'),
    ("/datasets/nothing", 404, "no dataset named &#x27;nothing&#x27;", 'href="/"'),
    ("/datasets/robots/segments/joints_0?as_of=v9", 400,
     "as_of: &#x27;v9&#x27; is neither a log offset nor a tag of the dataset", 'href="/datasets/robots"'),
    ("/datasets/robots?as_of=v9", 400, "as_of: &#x27;v9&#x27; is neither a log offset nor a tag",
     'href="/datasets/robots"'),
    ("/datasets/robots/segments/joints_0?as_of=0", 404,  # before it was registered
     "dataset &#x27;robots&#x27; has no segment &#x27;joints_0&#x27;", 'href="/datasets/robots"'),
])
def test_a_page_of_what_does_not_exist_answers_its_status(joints_dashboard: Dashboard, path: str,
                                                          status: int, message: str, back: str) -> None:
    got, kind, body = get(f"{joints_dashboard.url}{path}")
    assert (got, kind) == (status, "text/html; charset=utf-8")
    text = body.decode()
    assert f'<main><section class="wide"><p class="reason">{message}' in text and back in text


@pytest.mark.parametrize("path", ["/", "/datasets/robots", "/datasets/robots?as_of={end}",
                                  "/datasets/robots/segments/joints_0",
                                  "/datasets/robots/segments/joints_0?as_of={end}"])
def test_the_pages_of_what_exists_answer_200(joints_dashboard: Dashboard, path: str) -> None:
    end = json.loads(get(f"{joints_dashboard.url}/api/stats")[2])["store_offset"]  # as of now
    status, kind, body = get(f"{joints_dashboard.url}{path.format(end=end)}")
    assert (status, kind) == (200, "text/html; charset=utf-8") and b"<script" in body


@pytest.mark.parametrize(("series", "cameras", "entity_timelines", "opens_on"), [
    (["/joints"], [], {"/joints": ["step"]}, "step"),
    (["/joints", "/arm"], ["/cam"], {"/joints": ["frame", "step"], "/arm": ["log_time"],
                                     "/cam": ["log_time"]}, "step"),  # the segment's order
    (["/joints"], ["/cam"], {"/joints": [], "/cam": ["frame"]}, "frame"),  # static series: the camera's
    ([], ["/cam"], {"/cam": ["frame"]}, "frame"),
    (["/joints"], [], None, "log_time"),  # unknown: the segment's first
    ([], [], {}, "log_time"),
])
def test_a_segment_page_opens_on_the_first_timeline_its_first_series_has_data_on(
        series: list[str], cameras: list[str], entity_timelines: dict[str, list[str]] | None,
        opens_on: str) -> None:
    assert opening_timeline(["log_time", "step", "frame"], series, cameras, entity_timelines) == opens_on
    assert opening_timeline([], series, cameras, entity_timelines) is None
