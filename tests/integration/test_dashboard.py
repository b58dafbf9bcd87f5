"""The dashboard on the real stack, as a person uses it: Debian's chromium on the live page,
plain HTTP for the JSON and Arrow routes, and what bad requests get."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from datafusion import DataFrame, col, lit
from datafusion import functions as f
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait
from starlette.routing import Mount, Route

import dashboard as dashboard_package
import sdk
from browser import chromium
from dashboard import ARROW_STREAM, Dashboard
from events import CATALOG_TOPIC, Event
from producers import EventProducer
from recordings import read_recording
from sdk.layer_commands import layer_commands
from stack import Server
from stack_tools import produce_raw, wait_until
from stores import dump


def start_dashboard(server: Server, port: int = 0) -> Dashboard:
    return Dashboard(server.store, bootstrap_servers=server.bootstrap_servers,
                     kafka_config=server.kafka_options, port=port, viewer_port=0).start()


@pytest.fixture
def dashboard(server: Server) -> Iterator[Dashboard]:
    with start_dashboard(server) as running:
        yield running


@pytest.fixture(scope="module")
def browser():
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def get(url: str, *, headers: dict | None = None, method: str = "GET") -> tuple[int, str, bytes]:
    status, answer_headers, body = get_with_headers(url, headers=headers, method=method)
    return status, answer_headers["content-type"], body


def get_with_headers(url: str, *, headers: dict | None = None, method: str = "GET"
                     ) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def text_of(browser, selector: str) -> str | None:
    """The text of the first element ``selector`` matches, None if there is none: found and read in
    one step in the page, as an element found first and read later may have been replaced by a
    re-render of its table in between."""
    return browser.execute_script(
        "const found = document.querySelector(arguments[0]); return found ? found.innerText : null;",
        selector)


def wait_for_text(browser, selector: str, timeout_secs: float = 30) -> str:
    """``text_of`` once there is such an element; fails the test after ``timeout_secs``, a generous
    bound: how soon a change shows is ``bench.live``'s to measure, not a test's to assert."""
    return WebDriverWait(browser, timeout_secs, poll_frequency=0.05).until(lambda b: text_of(b, selector))


def open_live(browser, url: str) -> None:
    browser.get(url)
    WebDriverWait(browser, 30).until(lambda b: text_of(b, "#status") == "live")


def feed_cursors(browser) -> list[str]:
    return [li.get_attribute("data-cursor") for li in browser.find_elements(By.CSS_SELECTOR, "#feed li")]


def test_a_registered_segment_appears_on_the_page(dashboard: Dashboard, browser, dataset, make_rrd) -> None:
    open_live(browser, f"{dashboard.url}/datasets/{dataset.name}")
    dataset.register(make_rrd("live_0", properties={"meta": {"robot": "franka"}})).wait()
    row = wait_for_text(browser, '#segments tr[data-segment="live_0"]')
    assert "base" in row and "franka" in row  # its layer and its property
    wait_for_text(browser, '#feed li[data-kind="layer_added"][data-segment="live_0"]')
    counts = f'#datasets tr[data-dataset="{dataset.name}"]'
    WebDriverWait(browser, 30).until(  # one segment, one layer
        lambda b: (text_of(b, counts) or "").split()[1:3] == ["1", "1"])


def test_a_segment_page_shows_its_insides_and_a_new_layer_appears_on_it(
        dashboard: Dashboard, browser, dataset, tmp_path) -> None:
    from stack.droid import write_episode

    write_episode(tmp_path / "base.rrd", "episode_8", 8, steps=30)
    dataset.register([(tmp_path / "base.rrd").as_uri()]).wait()
    open_live(browser, f"{dashboard.url}/datasets/{dataset.name}")
    link = wait_for_text(browser, '#segments tr[data-segment="episode_8"] a')
    assert link == "episode_8"
    browser.execute_script(  # found and clicked in one step: a re-render may replace the row
        "document.querySelector(arguments[0]).click()", '#segments tr[data-segment="episode_8"] a')
    WebDriverWait(browser, 30).until(lambda b: b.current_url.endswith("/segments/episode_8"))
    WebDriverWait(browser, 30).until(lambda b: text_of(b, "#status") == "live")
    assert "EncodedImage:blob" in wait_for_text(browser, '#entities li[data-entity$="/image"]')
    start = wait_for_text(browser, '#properties tr[data-property="RecordingInfo:start_time"]')
    assert "\t20" in start and "+00:00" in start  # a date, not a 19-digit integer
    assert "real_time" in wait_for_text(browser, '#timelines tr[data-timeline="real_time"]')

    write_episode(tmp_path / "quality.rrd", "episode_8", 8, steps=10)
    dataset.register([(tmp_path / "quality.rrd").as_uri()], layer_name="quality").wait()
    assert "quality.rrd" in wait_for_text(browser, '#layers tr[data-layer="quality"]')
    browser.get(f"{dashboard.url}/datasets/{dataset.name}/segments/no_such_segment")
    assert "has no segment 'no_such_segment'" in wait_for_text(browser, "main .reason")


PIXELS_OF_SHOWN_FRAME = """
const image = document.getElementById("frame");
const canvas = document.createElement("canvas");
canvas.width = image.naturalWidth;
canvas.height = image.naturalHeight;
const context = canvas.getContext("2d");
context.drawImage(image, 0, 0);
return Array.from(context.getImageData(0, 0, canvas.width, canvas.height).data);
"""
"""The decoded RGBA pixels of the frame the segment page shows, at the image's own size."""


@pytest.mark.store_agnostic  # what is plotted is read from the recording's file
def test_a_segment_page_plots_the_reader_s_values_and_shows_the_recorded_frames(
        dashboard: Dashboard, browser, dataset, tmp_path) -> None:
    import io

    import numpy as np
    from PIL import Image

    from stack.droid import write_episode

    write_episode(tmp_path / "episode.rrd", "episode_9", 9, steps=25)
    dataset.register([(tmp_path / "episode.rrd").as_uri()]).wait()
    open_live(browser, f"{dashboard.url}/datasets/{dataset.name}/segments/episode_9")
    entity = "/action/cartesian_position"
    browser.execute_script("""
        for (const box of document.querySelectorAll("#series-entities input"))
          if (box.checked !== (box.value === arguments[0])) box.click();""", entity)
    drawn = WebDriverWait(browser, 30).until(lambda b: b.execute_script(
        "return plot && plot.series.length === 7 && plot.series[1].label.startsWith(arguments[0])"
        " ? plot.data : null", entity))
    times, values = reader_series(dataset, "episode_9", entity)
    assert drawn[0] == [t / 1e9 for t in times]  # the x axis in seconds
    assert [list(point) for point in zip(*drawn[1:], strict=True)] == values  # six series, every point

    camera = "/cameras/exterior_2_left/image"
    browser.execute_script("""
        const select = document.getElementById("camera");
        select.value = arguments[0];
        select.dispatchEvent(new Event("change"));""", camera)
    WebDriverWait(browser, 30).until(lambda b: b.execute_script(
        "return document.getElementById('scrubber').max") == "24")
    browser.execute_script("""
        const scrubber = document.getElementById("scrubber");
        scrubber.value = 11;
        scrubber.dispatchEvent(new Event("input"));""")
    WebDriverWait(browser, 30).until(
        lambda b: b.find_element(By.ID, "frame").get_attribute("data-frame") == "11")
    assert "frame 12 of 25" in text_of(browser, "#frame-time")
    recorded = reader_frames(dataset, "episode_9", camera)[11]
    expected = np.asarray(Image.open(io.BytesIO(recorded)).convert("RGBA"))
    shown = np.array(browser.execute_script(PIXELS_OF_SHOWN_FRAME), dtype=np.uint8).reshape(expected.shape)
    assert np.array_equal(shown, expected)

    over = browser.find_element(By.CSS_SELECTOR, "#plot .u-over")  # a click on the plot: that time's frame
    left = browser.execute_script("return plot.valToPos(frameX[17], 'x') + 2")
    offset = left - over.size["width"] / 2  # from the element's centre
    ActionChains(browser).move_to_element_with_offset(over, offset, 0).click().perform()
    WebDriverWait(browser, 30).until(
        lambda b: b.find_element(By.ID, "frame").get_attribute("data-frame") == "17")
    assert browser.find_element(By.ID, "scrubber").get_attribute("value") == "17"


def write_joints_recording(path: Path, recording_id: str) -> list[list[float]]:
    """A recording that is not DROID-like, as the issue's report made it: the scalar series
    ``/joints`` (60 rows of 3 values) sent with ``send_columns`` on a ``step`` timeline only, and
    camera images logged with ``rec.log``, which puts them on ``log_time``, the segment's first
    timeline. The series' values, row by row."""
    import numpy as np
    import rerun as rr

    values = np.linspace(-1, 1, 180).reshape(60, 3) ** 3
    with rr.RecordingStream("strata-test", recording_id=recording_id) as rec:
        rec.save(path)
        rec.send_columns("/joints", indexes=[rr.TimeColumn("step", sequence=np.arange(60))],
                         columns=rr.Scalars.columns(scalars=values))
        for i in range(4):
            rec.log("/camera/image", rr.Image(np.full((16, 16, 3), 60 * i, dtype=np.uint8)))
    return values.tolist()


COLOURED_PIXELS_OF_PLOT = """
const canvas = document.querySelector("#plot canvas");
if (!canvas) return 0;
const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
let coloured = 0;
for (let i = 0; i < data.length; i += 4) {
  const [r, g, b, a] = [data[i], data[i + 1], data[i + 2], data[i + 3]];
  if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) coloured++;
}
return coloured;
"""
"""How many pixels of the plot's canvas are drawn in colour: the series' lines (the axes, their
labels and the grid are grey)."""


@pytest.mark.store_agnostic  # what is plotted is read from the recording's file
def test_a_segment_page_plots_a_series_that_is_not_on_the_segment_s_first_timeline(
        dashboard: Dashboard, browser, dataset, tmp_path) -> None:
    values = write_joints_recording(tmp_path / "joints.rrd", "joints_0")
    dataset.register([(tmp_path / "joints.rrd").as_uri()]).wait()
    open_live(browser, f"{dashboard.url}/datasets/{dataset.name}/segments/joints_0")
    assert wait_for_text(browser, '#timelines tbody tr:first-child').startswith("log_time")
    drawn = WebDriverWait(browser, 30).until(lambda b: b.execute_script("return plot && plot.data"))
    assert browser.find_element(By.ID, "series-index").get_attribute("value") == "step"
    assert drawn[0] == list(range(60))
    assert [list(point) for point in zip(*drawn[1:], strict=True)] == values
    assert browser.execute_script(COLOURED_PIXELS_OF_PLOT) > 500  # the three lines, drawn
    assert text_of(browser, "#series-note") == ""  # hidden: nothing to explain

    Select(browser.find_element(By.ID, "series-index")).select_by_value("log_time")
    note = wait_for_text(browser, "#series-note")  # no blank plot: why there is none
    assert note == "/joints has no data on timeline log_time; its timelines: step"
    assert browser.execute_script("return plot") is None
    assert browser.execute_script(COLOURED_PIXELS_OF_PLOT) == 0
    click(browser, '#series-note button[data-timeline="step"]')  # the timeline it offers
    WebDriverWait(browser, 30).until(lambda b: b.execute_script("return plot !== null"))
    assert browser.find_element(By.ID, "series-index").get_attribute("value") == "step"
    WebDriverWait(browser, 30).until(lambda b: b.execute_script(COLOURED_PIXELS_OF_PLOT) > 500)
    assert not browser.find_element(By.ID, "series-note").is_displayed()


@pytest.mark.store_agnostic  # the viewer reads the recording's files
def test_a_segment_opens_in_rerun_s_web_viewer_from_its_page(dashboard: Dashboard, browser, dataset,
                                                             make_rrd) -> None:
    dataset.register(make_rrd("viewed")).wait()
    dataset.register(make_rrd("viewed", name="viewed_extra"), layer_name="extra").wait()
    open_live(browser, f"{dashboard.url}/datasets/{dataset.name}/segments/viewed")
    link = WebDriverWait(browser, 30).until(lambda b: b.execute_script(
        "const a = document.getElementById('viewer'); return a.hidden ? null : a.href"))
    recording = f"{dashboard.url}/api/datasets/{dataset.name}/segments/viewed/recording.rrd"
    assert link == f"http://127.0.0.1:{dashboard.viewer_port}/?url={urllib.parse.quote(recording, safe='')}"
    browser.get(link)
    fetched = WebDriverWait(browser, 120, poll_frequency=0.5).until(lambda b: b.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter((e) => e.name === arguments[0] && e.responseEnd).map((e) => e.responseStatus)", recording))
    assert fetched == [200]  # the viewer, at the .rrd version of the recordings, read the merged layers


@pytest.mark.store_agnostic  # the browser's connections, not the store
def test_a_page_left_closes_its_event_stream(dashboard: Dashboard, browser, dataset, make_rrd) -> None:
    """A browser holds six connections per host: a stream kept open by a page left behind (in the
    back-forward cache) would make the seventh page opened wait for a free connection."""
    dataset.register(make_rrd("left")).wait()
    pages = [f"/datasets/{dataset.name}/segments/left", f"/datasets/{dataset.name}", "/"]
    for path in pages * 3:
        open_live(browser, f"{dashboard.url}{path}")
        wait_until(lambda: dashboard.open_streams == 1, 10, "the streams of the pages left to close")


def test_a_malformed_record_shows_with_its_reason(server: Server, client: sdk.CatalogClient,
                                                  dashboard: Dashboard, browser) -> None:
    open_live(browser, dashboard.url)
    garbage = produce_raw(server.bootstrap_servers, b"\x00 not an event")
    client._internal.wait([garbage], 60)
    row = wait_for_text(browser, f'#rejections tr[data-offset="{garbage.offset}"]')
    assert "not an Avro single-object encoded event (missing C3 01 header)" in row
    assert browser.find_elements(
        By.CSS_SELECTOR, f'#feed li[data-kind="rejected"][data-cursor="{garbage.offset}.0"]')


def test_the_page_catches_up_after_the_dashboard_restarts(server: Server, browser, dataset,
                                                          make_rrd) -> None:
    first = start_dashboard(server)
    url, port = first.url, first.port
    try:
        open_live(browser, f"{url}/datasets/{dataset.name}")
        dataset.register(make_rrd("before")).wait()
        WebDriverWait(browser, 5).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, '#feed li[data-segment="before"]'))
    finally:
        first.stop()
    WebDriverWait(browser, 10).until(lambda b: text_of(b, "#status") == "reconnecting")
    dataset.register([make_rrd("while_down_0"), make_rrd("while_down_1")]).wait()
    with start_dashboard(server, port):
        WebDriverWait(browser, 20).until(
            lambda b: len(b.find_elements(By.CSS_SELECTOR, '#segments tr[data-segment^="while_down"]')) == 2)
        wait_until(lambda: len(browser.find_elements(
            By.CSS_SELECTOR, '#feed li[data-segment^="while_down"][data-kind="layer_added"]')) == 2, 10,
            "the changes made while the dashboard was down in the page's feed")
        cursors = feed_cursors(browser)
        assert len(cursors) == len(set(cursors)), "a change shown twice"
        assert set(client_changes(server, dataset)) <= set(cursors), "a change missed"


def client_changes(server: Server, dataset) -> list[str]:
    """The cursors of the dataset's changes, as the SDK reads them."""
    client = server.client()
    return [f"{c.position.offset}.{c.seq}" for c in client.changes(0, dataset=dataset.name, timeout_secs=0)]


def test_a_dataset_page_at_a_tag_shows_the_segments_of_then(dashboard: Dashboard, browser, dataset,
                                                            make_rrd) -> None:
    dataset.register([make_rrd("kept"), make_rrd("dropped")]).wait()
    tag = dataset.create_tag("v1")
    dataset.unregister(segments_to_drop=["dropped"]).wait()
    dataset.register([make_rrd("new")]).wait()
    page = f"{dashboard.url}/datasets/{dataset.name}"
    for point in ("v1", str(tag.offset)):
        status, _, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/segments?as_of={point}")
        assert status == 200 and [r["rerun_segment_id"] for r in json.loads(body)] == ["kept", "dropped"]
    status, _, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/tags")
    assert status == 200 and [(t["name"], t["offset"]) for t in json.loads(body)] == [("v1", tag.offset)]
    status, _, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/segments?as_of=v2")
    message = "as_of: 'v2' is neither a log offset nor a tag of the dataset (its tags: v1)"
    assert status == 400 and message in body.decode()

    open_live(browser, page)
    link = wait_for_text(browser, '#tags a[href$="?as_of=v1"]')
    assert link == "v1" and text_of(browser, '#segments tr[data-segment="new"]') is not None
    open_live(browser, f"{page}?as_of=v1")
    title = wait_for_text(browser, "#segments-title")  # the page's style shows it in capitals
    assert title.lower() == f"segments of {dataset.name} as of v1".lower()
    wait_for_page(browser, ["kept", "dropped"])  # read in one step: the table may re-render meanwhile


QUERIES = {"series": "?entity=/action/joint_positions", "frames": "?entity=/cameras/wrist_left/image",
           "frame": "?entity=/cameras/wrist_left/image&n=0",
           "search": "?column=/language_instruction:TextDocument:text&q=marker",
           "nearest": "?column=/cameras/wrist_left/embedding:embedding&index=real_time"
                      "&at=1689001000000000000"}
"""What the routes that read inside a recording or search need to be asked, by their last part."""


def test_no_route_writes(server: Server, dashboard: Dashboard, dataset, tmp_path) -> None:
    from stack.droid import write_embeddings, write_episode

    write_episode(tmp_path / "episode.rrd", "read_only", 1, steps=3)
    write_embeddings(tmp_path / "embeddings.rrd", "read_only", 1, steps=3, dimension=8)
    dataset.register([(tmp_path / "episode.rrd").as_uri()]).wait()
    dataset.register([(tmp_path / "embeddings.rrd").as_uri()], layer_name="embeddings").wait()
    dataset.create_fts_index(column="/language_instruction:TextDocument:text", time_index="real_time")
    dataset.create_vector_index(column="/cameras/wrist_left/embedding:embedding", time_index="real_time")
    before = dump(server.store)
    app_routes = [route for route in dashboard.app.routes if isinstance(route, Route)]
    assert {m for route in app_routes for m in route.methods} <= {"GET", "HEAD"}
    urls = [route.path.replace("{name}", dataset.name).replace("{segment_id}", "read_only")
            + QUERIES.get(route.path.rsplit("/", 1)[-1].removesuffix(".arrow"), "") for route in app_routes]
    static = Path(dashboard_package.__file__).parent / "static"
    urls += [f"{mount.path}/{file.relative_to(static)}" for mount in dashboard.app.routes
             if isinstance(mount, Mount) for file in static.rglob("*") if file.is_file()]
    for path in urls:
        if path == "/events":
            continue  # a stream: read below
        status, _, _ = get(f"{dashboard.url}{path}")
        assert status == 200, path
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert get(f"{dashboard.url}{path}", method=method)[0] == 405, (method, path)
    with urllib.request.urlopen(f"{dashboard.url}/events?since=0", timeout=10) as stream:
        assert stream.readline().startswith(b"id: ")  # the first change
    assert dump(server.store) == before


def test_json_and_arrow_routes_read_what_the_sdk_reads(dashboard: Dashboard, dataset, make_rrd) -> None:
    dataset.register([make_rrd("arrow_0", properties={"meta": {"robot": "franka"}}),
                      make_rrd("arrow_1")]).wait()
    status, kind, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/segments.arrow")
    assert (status, kind) == (200, ARROW_STREAM)
    over_http = pa.ipc.open_stream(body).read_all()
    assert over_http.equals(pa.table(dataset.segment_table()))
    # ... so a notebook elsewhere reads the catalog into DataFusion.
    import datafusion

    ctx = datafusion.SessionContext()
    ctx.register_record_batches("segments", [over_http.to_batches()])
    assert ctx.sql("select count(*) as n from segments").to_pylist() == [{"n": 2}]
    status, kind, body = get(f"{dashboard.url}/api/datasets")
    assert (status, kind) == (200, "application/json")
    [row] = [d for d in json.loads(body) if d["name"] == dataset.name]
    assert (row["id"], row["segments"], row["layers"]) == (str(dataset.id), 2, 2)
    body = get(f"{dashboard.url}/api/changes.arrow?dataset={dataset.name}")[2]
    changes = pa.ipc.open_stream(body).read_all()
    assert changes.column("kind").to_pylist() == ["dataset_created", "layer_added", "segment_added",
                                                  "layer_added", "segment_added"]


def test_stats_report_the_lag_and_the_rates(server: Server, dashboard: Dashboard, dataset, make_rrd) -> None:
    dataset.register([make_rrd(f"rate_{i}") for i in range(3)]).wait()
    time.sleep(1.1)  # the stats are measured at most once a second
    stats = json.loads(get(f"{dashboard.url}/api/stats")[2])
    store_offset = server.client()._internal.wait_for_store().next_offsets()[(CATALOG_TOPIC, 0)]
    assert stats["store_offset"] == store_offset == stats["log_end_offset"]
    assert (stats["lag_records"], stats["lag_seconds"], stats["kafka_error"]) == (0, 0.0, None)
    assert sum(b["registrations_per_sec"] for b in stats["series"]) * 5 >= 3


def test_a_segment_route_shows_its_layers_properties_timelines_and_entities(
        dashboard: Dashboard, dataset, tmp_path) -> None:
    from stack.droid import write_episode

    write_episode(tmp_path / "episode.rrd", "episode_7", 7, steps=30)
    dataset.register([(tmp_path / "episode.rrd").as_uri()]).wait()
    status, kind, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/segments/episode_7")
    assert (status, kind) == (200, "application/json")
    page = json.loads(body)
    [row] = pa.table(dataset.segment_table()).to_pylist()
    assert [(x["name"], x["storage_url"], x["size_bytes"]) for x in page["layers"]] == [
        ("base", (tmp_path / "episode.rrd").as_uri(), row["rerun_size_bytes"])]
    shown = {p["name"]: p for p in page["properties"]}
    assert {f"property:{name}" for name in shown} == {c for c in row if c.startswith("property:")}
    start = shown["RecordingInfo:start_time"]
    assert start["value"] == row["property:RecordingInfo:start_time"] and start["text"].startswith("20")
    assert start["text"].endswith("+00:00")  # a date, not a 19-digit integer
    [timeline] = page["timelines"]
    assert (timeline["name"], timeline["kind"]) == ("real_time", "timestamp")
    assert timeline["start"] == row["real_time:start"].isoformat() + "+00:00"
    entities = {e["path"]: e["components"] for e in page["entities"]}
    assert "/observation/joint_positions" in entities or "/action/joint_positions" in entities
    image = next(c for path, cs in entities.items() for c in cs if c["component"] == "EncodedImage:blob")
    assert image["archetype"] == "rerun.archetypes.EncodedImage" and image["layer"] == "base"
    status, _, body = get(f"{dashboard.url}/api/datasets/{dataset.name}/segments/no_such_segment")
    assert status == 404 and f"dataset {dataset.name!r} has no segment 'no_such_segment'" in body.decode()


def reader_series(dataset, segment: str, entity: str) -> tuple[list[int], list[list[float] | None]]:
    """``reader()``'s index values (ns) and values of ``entity``'s scalars in ``segment``."""
    table = pa.table(dataset.filter_segments(segment).filter_contents(entity).reader(index="real_time"))
    return (table.column("real_time").cast(pa.int64()).to_pylist(),
            table.column(f"{entity}:Scalars:scalars").to_pylist())


def reader_frames(dataset, segment: str, entity: str) -> list[bytes]:
    """``reader()``'s encoded frames of the image ``entity`` in ``segment``, in time order."""
    table = pa.table(dataset.filter_segments(segment).filter_contents(entity).reader(index="real_time"))
    blobs = table.column(f"{entity}:EncodedImage:blob").to_pylist()
    return [bytes(blob[0]) for blob in blobs if blob]


@pytest.mark.store_agnostic  # read from the recording's files
def test_a_segment_s_series_frames_and_recording_are_read_as_the_reader_reads_them(
        dashboard: Dashboard, dataset, tmp_path, make_rrd) -> None:
    from rerun.chunk import RrdReader

    from stack.droid import write_episode

    write_episode(tmp_path / "episode.rrd", "episode_5", 5, steps=20)
    dataset.register([(tmp_path / "episode.rrd").as_uri()]).wait()
    base = f"{dashboard.url}/api/datasets/{dataset.name}/segments/episode_5"
    page = json.loads(get(base)[2])
    assert "/action/joint_positions" in page["series"] and "/cameras/wrist_left/image" in page["cameras"]
    assert "/cameras/wrist_left/image" not in page["series"]

    status, kind, body = get(f"{base}/series.arrow?index=real_time&entity=/action/joint_positions"
                             "&entity=/observation/gripper_position")
    assert (status, kind) == (200, ARROW_STREAM)
    table = pa.ipc.open_stream(body).read_all()
    times, joints = reader_series(dataset, "episode_5", "/action/joint_positions")
    assert table.column("real_time").cast(pa.int64()).to_pylist() == times and len(times) == 20
    assert table.column("/action/joint_positions:Scalars:scalars").to_pylist() == joints
    assert (table.column("/observation/gripper_position:Scalars:scalars").to_pylist()
            == reader_series(dataset, "episode_5", "/observation/gripper_position")[1])
    as_json = json.loads(get(f"{base}/series?entity=/action/joint_positions")[2])  # index: the first
    assert [row["/action/joint_positions:Scalars:scalars"] for row in as_json] == joints

    camera = "/cameras/wrist_left/image"
    listed = json.loads(get(f"{base}/frames?index=real_time&entity={camera}")[2])
    expected = reader_frames(dataset, "episode_5", camera)
    assert listed["count"] == len(expected) == 20 and listed["times"][0].endswith("+00:00")
    status, kind, frame = get(f"{base}/frame?index=real_time&entity={camera}&n=7")
    assert (status, kind, frame) == (200, "image/jpeg", expected[7])
    between = (times[7] + times[8]) // 2  # the frame shown at a time is the last one before it
    assert get(f"{base}/frame?index=real_time&entity={camera}&at={between}")[2] == expected[7]

    status, _, merged = get(f"{base}/recording.rrd")
    assert status == 200 and merged == (tmp_path / "episode.rrd").read_bytes()  # one layer: its file
    dataset.register(make_rrd("episode_5", name="extra"), layer_name="extra").wait()
    status, _, merged = get(f"{base}/recording.rrd")
    (tmp_path / "merged.rrd").write_bytes(merged)
    schema = RrdReader(tmp_path / "merged.rrd").store().schema()
    entities = {c.entity_path for c in schema.component_columns()}
    assert {"/points", camera, "/action/joint_positions"} <= entities  # both layers, one recording


@pytest.mark.store_agnostic  # read from the recording's file
def test_asking_a_segment_for_what_it_does_not_have_is_a_400_saying_why(dashboard: Dashboard, dataset,
                                                                        tmp_path) -> None:
    from stack.droid import write_episode

    write_episode(tmp_path / "episode.rrd", "episode_6", 6, steps=5)
    gone, grown = tmp_path / "gone.rrd", tmp_path / "grown.rrd"
    write_episode(gone, "gone", 2, steps=3)
    write_episode(grown, "grown", 3, steps=3)
    dataset.register([(tmp_path / "episode.rrd").as_uri(), gone.as_uri(), grown.as_uri()]).wait()
    gone.unlink()
    with grown.open("ab") as file:
        file.write(b"more")
    base = f"{dashboard.url}/api/datasets/{dataset.name}/segments"
    for path, status, message in [
        ("episode_6/frame?entity=/action/joint_positions&n=0", 400,
         "entity '/action/joint_positions' is not an image (frames come from entities with an "
         "EncodedImage blob): its components are Scalars:scalars"),
        ("episode_6/frames?entity=/cameras/wrist_left/image&index=step", 400,
         "segment 'episode_6' has no timeline 'step' (its timelines: 'real_time')"),
        ("episode_6/series?entity=/no/such/entity", 400,
         "segment 'episode_6' has no entity '/no/such/entity'"),
        ("episode_6/series?entity=/cameras/wrist_left/image", 400,
         "entity '/cameras/wrist_left/image' is not a series of scalars"),
        ("episode_6/series", 400, "name at least one entity"),
        ("episode_6/frame?entity=/cameras/wrist_left/image&n=5", 400, "n: entity '/cameras/wrist_left/image' "
         "has frames 0 to 4, got 5"),
        ("episode_6/frame?entity=/cameras/wrist_left/image&at=soon", 400, "at: expected an integer"),
        ("episode_6/frame?n=0", 400, "entity: required"),
        ("nobody/frame?entity=/cameras/wrist_left/image&n=0", 404,
         f"dataset {dataset.name!r} has no segment 'nobody'"),
        ("gone/series?entity=/action/joint_positions", 404,
         f'segment "gone", layer "base": the recording at {gone.as_uri()} no longer exists'),
        ("grown/frames?entity=/cameras/wrist_left/image", 409,
         f'segment "grown", layer "base": the recording at {grown.as_uri()} has'),
    ]:
        got, _, body = get(f"{base}/{path}")
        assert got == status and message in json.loads(body)["error"], (path, body)
def segments_query(**params: str | list[str]) -> str:
    """``/api/datasets/{episodes}/segments?...``: the path of the ``episodes`` dataset's segments."""
    return f"/api/datasets/{{episodes}}/segments?{urllib.parse.urlencode(params, doseq=True)}"


@pytest.mark.store_agnostic  # the routes' argument checks
@pytest.mark.parametrize(("path", "headers", "status", "message"), [
    ("/api/datasets/no-such-dataset/segments", {}, 404, "no dataset named 'no-such-dataset'"),
    (segments_query(where="nope = 1"), {}, 400,
     "where: no column 'nope' (columns: rerun_segment_id, rerun_layer_names, "),
    (segments_query(where="success is true"), {}, 400,
     "where: unknown operator 'is' (operators: =, !=, <, <=, >, >=, contains)"),
    (segments_query(where="success"), {}, 400,
     "where: 'success' is not a condition: write COLUMN OP VALUE (e.g. tracking_good = true) or layer "
     "has NAME"),
    (segments_query(where="success = maybe"), {}, 400,
     "where: property:episode:success (list<item: bool>) is boolean: expected true or false, got 'maybe'"),
    (segments_query(where="scene_id >= three"), {}, 400,
     "where: property:episode:scene_id (list<item: int64>) holds integers: expected an integer, got 'three'"),
    (segments_query(where="start_time > last week"), {}, 400,
     "where: property:RecordingInfo:start_time holds timestamps (list<item: int64>): expected an ISO "
     "8601 date"),
    (segments_query(where="success > true"), {}, 400,
     "where: property:episode:success is boolean (list<item: bool>): use = or != with true or false"),
    (segments_query(where="rerun_size_bytes contains 3"), {}, 400,
     "where: contains takes a string column (a substring) or a list column (an item); rerun_size_bytes is"),
    (segments_query(where="building = ILIAD"), {}, 400,
     "where: 'building' is the short name of several properties (property:episode:building, "
     "property:quality:building): write the full name"),
    (segments_query(where=["success = true", "scene_id = 1 or 2"]), {}, 400,
     "where: property:episode:scene_id (list<item: int64>) holds integers: expected an integer, got "
     "'1 or 2'"),
    (segments_query(sort="nope"), {}, 400, "sort: no column 'nope'"),
    (segments_query(sort="-"), {}, 400, "sort: expected COLUMN or -COLUMN (descending), got '-'"),
    (segments_query(offset="-1"), {}, 400, "offset: the first row is 0, got -1"),
    (segments_query(offset="first"), {}, 400, "offset: expected an integer, got 'first'"),
    (segments_query(limit="0"), {}, 400, "limit: must be between 1 and 10000"),
    (segments_query(limit="all"), {}, 400, "limit: expected an integer, got 'all'"),
    ("/api/datasets/{episodes}/segments.arrow?where=nope%3D1", {}, 400, "where: no column 'nope'"),
    ("/api/datasets/{episodes}/segments?page=2", {}, 400,
     "page: unknown query parameter (this route takes: as_of, where, layer, sort, offset, limit)"),
    ("/datasets/no-such-dataset", {}, 404, "no dataset named &#x27;no-such-dataset&#x27;"),
    ("/datasets/{episodes}/segments/nobody", {}, 404, "has no segment &#x27;nobody&#x27;"),
    ("/datasets/{episodes}/segments/episode_1?as_of=v9", {}, 400,
     "as_of: &#x27;v9&#x27; is neither a log offset nor a tag of the dataset"),
    ("/api/changes?since=yesterday", {}, 400, "since: expected OFFSET or OFFSET.SEQ"),
    ("/api/changes?since=-3", {}, 400, "since: a log offset is >= 0"),
    ("/api/changes?limit=lots", {}, 400, "limit: expected an integer"),
    ("/api/changes?limit=0", {}, 400, "limit: must be between 1 and 10000"),
    ("/api/changes?dataset=no-such-dataset", {}, 404, "no dataset named 'no-such-dataset'"),
    ("/api/datasets?sort=name", {}, 400, "sort: unknown query parameter"),
    ("/events", {"Last-Event-ID": "abc"}, 400, "Last-Event-ID: expected OFFSET or OFFSET.SEQ"),
    ("/events?dataset=no-such-dataset", {}, 404, "no dataset named 'no-such-dataset'"),
])
def test_bad_requests_get_a_status_and_a_message(dashboard: Dashboard, path: str, headers: dict,
                                                 status: int, message: str,
                                                 request: pytest.FixtureRequest) -> None:
    if "{episodes}" in path:
        path = path.replace("{episodes}", request.getfixturevalue("episodes").name)
    got, _, body = get(f"{dashboard.url}{path}", headers=headers)
    assert got == status
    assert message in body.decode()


@pytest.mark.store_agnostic  # the event streams' bookkeeping
def test_closed_event_streams_cost_nothing(dashboard: Dashboard) -> None:
    streams = [urllib.request.urlopen(f"{dashboard.url}/events", timeout=10) for _ in range(50)]
    for stream in streams:
        assert stream.readline().startswith(b"event: stats")
    assert dashboard.open_streams == 50
    for stream in streams:
        stream.close()
    wait_until(lambda: dashboard.open_streams == 0, 10, "the closed streams to be dropped")


def test_a_reconnecting_stream_resumes_after_its_last_event_id(
        client: sdk.CatalogClient, dashboard: Dashboard, dataset, make_rrd) -> None:
    dataset.register([make_rrd("resume_0"), make_rrd("resume_1")]).wait()
    changes = list(client.changes(0, dataset=dataset.name, timeout_secs=0))
    last_seen = changes[1]
    last_id = f"{last_seen.position.offset}.{last_seen.seq}"
    request = urllib.request.Request(f"{dashboard.url}/events?since=0&dataset={dataset.name}",
                                     headers={"Last-Event-ID": last_id})
    ids = []
    with urllib.request.urlopen(request, timeout=10) as stream:
        for line in stream:
            if line.startswith(b"event: stats"):
                break  # sent once the stream has caught up
            if line.startswith(b"id: "):
                ids.append(line[4:].decode().strip())
    assert ids == [f"{c.position.offset}.{c.seq}" for c in changes[2:]]


# -- search, sort and pages of the segment table ------------------------------------------------

@pytest.fixture(scope="module")
def episodes(client: sdk.CatalogClient, tmp_path_factory: pytest.TempPathFactory) -> sdk.DatasetEntry:
    """Six DROID-like episodes in a dataset of their own, their properties differing (``success``
    false for 0 and 3, ``scene_id`` 0 to 5, their start times), three (1, 2, 4) with a ``quality``
    layer whose properties are ``tracking_good`` (false for 2) and a ``building`` (so ``building``
    names two properties)."""
    import rerun as rr

    from stack.droid import write_episode

    directory = tmp_path_factory.mktemp("episodes")
    dataset = client.create_dataset(f"episodes-{os.urandom(4).hex()}")
    for i in range(6):
        write_episode(directory / f"episode_{i}.rrd", f"episode_{i}", i, steps=5)
    dataset.register([(directory / f"episode_{i}.rrd").as_uri() for i in range(6)]).wait()
    for i in (1, 2, 4):
        with rr.RecordingStream("strata-test", recording_id=f"episode_{i}") as rec:
            rec.save(directory / f"quality_{i}.rrd")
            rec.log("tracking_error", rr.Scalars([0.01 * i]))
            rec.send_property("quality", rr.AnyValues(tracking_good=i != 2, building="lab"))
    dataset.register([(directory / f"quality_{i}.rrd").as_uri() for i in (1, 2, 4)],
                     layer_name="quality").wait()
    return dataset


def ids_of(frame: DataFrame) -> list[str]:
    return frame.select(col("rerun_segment_id")).to_arrow_table().column(0).to_pylist()


def first(column: str):
    """The first item of a list column, as a DataFusion expression (the properties are one-item lists)."""
    return f.array_element(col(column), lit(1))


def page_ids(browser) -> list[str]:
    return browser.execute_script(
        'return [...document.querySelectorAll("#segments tbody tr")].map((tr) => tr.dataset.segment);')


def wait_for_page(browser, expected: list[str], timeout_secs: float = 30) -> None:
    WebDriverWait(browser, timeout_secs, poll_frequency=0.05).until(lambda b: page_ids(b) == expected)


def click(browser, selector: str) -> None:
    """A click on the element ``selector`` finds, found and clicked in one step (a live refresh
    may replace the table's headers between two steps)."""
    browser.execute_script("document.querySelector(arguments[0]).click();", selector)


def filter_on_page(browser, text: str) -> None:
    box = browser.find_element(By.ID, "where")
    box.clear()
    box.send_keys(text, Keys.ENTER)


def test_a_filter_typed_on_the_page_selects_what_segment_table_selects(
        dashboard: Dashboard, browser, episodes: sdk.DatasetEntry) -> None:
    table = episodes.segment_table()
    everything = ids_of(table)
    open_live(browser, f"{dashboard.url}/datasets/{episodes.name}")
    wait_for_page(browser, everything)

    successful = ids_of(table.filter(f.array_has(col("property:episode:success"), lit(True)),
                                     first("property:episode:scene_id") >= lit(2)))
    assert 0 < len(successful) < len(everything)  # the filter leaves some segments out
    filter_on_page(browser, "success = true and scene_id >= 2")
    wait_for_page(browser, successful)
    assert text_of(browser, "#range") == f"rows 1\u2013{len(successful)} of {len(successful)}"
    assert urllib.parse.parse_qs(urllib.parse.urlparse(browser.current_url).query)["where"] == [
        "success = true", "scene_id >= 2"]

    with_quality = ids_of(table.filter(f.array_has(col("property:episode:success"), lit(True)),
                                       first("property:episode:scene_id") >= lit(2),
                                       f.array_has(col("rerun_layer_names"), lit("quality"))))
    assert 0 < len(with_quality) < len(successful)
    WebDriverWait(browser, 30).until(
        lambda b: b.find_elements(By.CSS_SELECTOR, '#layer option[value="quality"]'))
    Select(browser.find_element(By.ID, "layer")).select_by_value("quality")
    wait_for_page(browser, with_quality)

    tracking_good = ids_of(table.filter(f.array_has(col("property:quality:tracking_good"), lit(True))))
    assert 0 < len(tracking_good) < len(everything)
    Select(browser.find_element(By.ID, "layer")).select_by_value("")
    filter_on_page(browser, "tracking_good = true")
    wait_for_page(browser, tracking_good)

    browser.back()  # the URL holds the view: back to the previous filter
    wait_for_page(browser, successful)
    assert browser.find_element(By.ID, "where").get_attribute("value") == "success = true and scene_id >= 2"

    filter_on_page(browser, "")
    wait_for_page(browser, everything)
    header = 'th[data-column="property:episode:scene_id"]'
    for arrow, ascending in (("\u25B2", True), ("\u25BC", False)):  # click, and again: descending
        click(browser, header)
        WebDriverWait(browser, 30).until(lambda b, arrow=arrow: (text_of(b, header) or "").endswith(arrow))
        wait_for_page(browser, ids_of(table.sort(
            first("property:episode:scene_id").sort(ascending=ascending, nulls_first=False))))
    assert browser.current_url.endswith("?sort=-property%3Aepisode%3Ascene_id")

    filter_on_page(browser, "success = maybe")  # a filter that does not fit: its message, no table
    problem = wait_for_text(browser, "#segments-problem")
    assert problem == ("where: property:episode:success (list<item: bool>) is boolean: expected true or "
                       "false, got 'maybe'")
    assert not browser.find_element(By.ID, "segments").is_displayed()


@pytest.mark.parametrize("route", ["segments", "segments.arrow"])
def test_the_segment_routes_filter_sort_and_page_as_segment_table_does(
        dashboard: Dashboard, episodes: sdk.DatasetEntry, route: str) -> None:
    table = episodes.segment_table()
    starts = sorted(pa.table(table)["property:RecordingInfo:start_time"].to_pylist())
    middle = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=(starts[2][0] + starts[3][0]) // 2000)
    cases = [  # query parameters, and the same selection on segment_table(): offset and limit apart
        ({"where": ["success = true", "scene_id >= 1"], "layer": "quality", "sort": "-real_time:start"},
         table.filter(f.array_has(col("property:episode:success"), lit(True)),
                      first("property:episode:scene_id") >= lit(1),
                      f.array_has(col("rerun_layer_names"), lit("quality")))
         .sort(col("real_time:start").sort(ascending=False, nulls_first=False)), 1, 1),
        ({"where": ["scene_id != 3", "episode:building contains ILIAD"], "sort": "scene_id"},
         table.filter(first("property:episode:scene_id") != lit(3),
                      f.array_has(col("property:episode:building"), lit("ILIAD")))
         .sort(first("property:episode:scene_id").sort(ascending=True, nulls_first=False)), 0, None),
        ({"where": f"start_time > {middle.isoformat()}", "sort": "-start_time"},
         table.filter(first("property:RecordingInfo:start_time") > lit(
             (middle - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000))
         .sort(first("property:RecordingInfo:start_time").sort(ascending=False, nulls_first=False)), 0, 2),
        ({"where": "tracking_good = false"},
         table.filter(f.array_has(col("property:quality:tracking_good"), lit(False))), 0, None),
    ]
    for params, selected, offset, limit in cases:
        expected = pa.table(selected if limit is None else selected.limit(limit, offset=offset))
        total = selected.count()
        assert 0 < total < table.count() and expected.num_rows, params  # selects some, not all
        page = {} if limit is None else {"offset": offset, "limit": limit}
        query = urllib.parse.urlencode({**params, **page}, doseq=True)
        url = f"{dashboard.url}/api/datasets/{episodes.name}/{route}?{query}"
        status, headers, body = get_with_headers(url)
        assert status == 200, body
        assert headers["X-Total-Count"] == str(total), params
        if route.endswith(".arrow"):
            assert pa.ipc.open_stream(body).read_all().equals(expected), params
        else:
            rows = json.loads(body)
            assert [r["rerun_segment_id"] for r in rows] == expected["rerun_segment_id"].to_pylist()


def register_many(server: Server, dataset: sdk.DatasetEntry, uri: str, count: int) -> list[str]:
    """``count`` segments, each one layer registering the recording at ``uri``: its events made
    as the SDK makes them for that file (its schemas defined once, first), then sent straight to
    the broker as a pipeline would (``producers.EventProducer``), through the Spark projector
    like any other registration, without writing ``count`` files. Their ids, in order."""
    template, definitions = layer_commands(read_recording(uri), "base")
    ids = [f"many_{i:05d}" for i in range(count)]
    events = [Event(dataset.id, definition) for definition in definitions]
    events += [Event(dataset.id, dataclasses.replace(template, segment_id=segment_id)) for segment_id in ids]
    with EventProducer(server.bootstrap_servers) as producer:
        positions = producer.send(events)
    server.client()._internal.wait([positions[-1]], 600)
    return ids


@pytest.fixture
def own_server(tmp_path, new_store) -> Iterator[Server]:
    """A stack of this test's own: its log is not the shared stack's, which every replay test
    replays whole."""
    with Server(tmp_path / "stack", store=new_store(), protocol_port=None) as running:
        yield running


def test_a_dataset_of_10000_segments_is_shown_100_rows_a_page(own_server: Server, browser, make_rrd) -> None:
    server = own_server
    dataset = server.client().create_dataset("many")
    with start_dashboard(server) as dashboard:
        uri = make_rrd("many", properties={"meta": {"robot": "franka"}})
        ids = register_many(server, dataset, uri, 10_000)
        assert pa.table(dataset.segment_table()).num_rows == 10_000
        open_live(browser, f"{dashboard.url}/datasets/{dataset.name}")
        wait_for_page(browser, ids[:100])
        assert text_of(browser, "#range") == "rows 1\u2013100 of 10,000"
        browser.find_element(By.ID, "next").click()
        wait_for_page(browser, ids[100:200])
        assert text_of(browser, "#range") == "rows 101\u2013200 of 10,000"
        assert browser.current_url.endswith("?offset=100")
        browser.back()
        wait_for_page(browser, ids[:100])
        asked = browser.execute_script(  # every segment request the page made, live refreshes included
            'return performance.getEntriesByType("resource").map((e) => e.name)'
            '.filter((url) => new URL(url).pathname.endsWith("/segments"));')
        assert asked and all(urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["limit"] == ["100"]
                             for url in asked), asked
        status, headers, body = get_with_headers(
            f"{dashboard.url}/api/datasets/{dataset.name}/segments?offset=9950&limit=100&sort=-rerun_segment_id")
        assert status == 200 and headers["X-Total-Count"] == "10000"
        assert [r["rerun_segment_id"] for r in json.loads(body)] == ids[49::-1]
