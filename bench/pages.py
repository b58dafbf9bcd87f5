"""``python -m bench.pages``: how soon the dashboard shows what is inside the catalog, in Debian's
chromium, timed by the pages themselves (``performance`` marks and measures).

  first plot   --segments DROID-like episodes (``stack.droid``: 120 steps at 15 Hz, 3 cameras,
               8 series) registered through the embedded stack; each one's segment page opened
               fresh, from navigation to the first plot drawn (mark ``plot-drawn``): p50, p90.
               Target: p50 < 500 ms.
  frame        on the segment page of one episode with --frame-size JPEG frames, --scrubs
               frames asked for by moving the scrubber to random positions, one at a time, from
               the scrubber's input to the frame decoded and shown (measure ``frame-shown``; the
               first one reads the camera's frames from the file): p50, p90. Target: p50 < 150 ms.
  first rows   a dataset of --dataset-segments segments (the layer of one DROID-like episode,
               registered under that many segment ids, folded into a store in process: the page
               only reads it), its dataset page opened fresh, from navigation to its first rows of
               segments shown (mark ``segments-shown``), --runs times: p50. Target: < 1 s.

Writes bench/results/<date>-pages.{json,md} and prints the table; ``--screenshot`` saves the
segment page. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from bench import report, scenarios
from bench.scenarios import Percentiles
from bench.systems import layer_event, layer_templates, schema_event
from dashboard import Dashboard
from events import CATALOG_TOPIC, CreateDataset, Event, encode
from projector import LogRecord, fold
from projector.stores.sqlite import SqliteStore
from spark_streaming.folding import paused_gc
from stack import Server
from stack.droid import write_episode

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

MARK = "const m = performance.getEntriesByName(arguments[0]); return m.length ? m[0].startTime : null;"
LAST_FRAME = """
const shown = performance.getEntriesByName("frame-shown");
const image = document.getElementById("frame");
return image.dataset.frame === String(arguments[0]) && shown.length > arguments[1]
  ? shown[shown.length - 1].duration : null;
"""
SCRUB = """
const scrubber = document.getElementById("scrubber");
scrubber.value = arguments[0];
scrubber.dispatchEvent(new Event("input"));
"""


def _wait(browser: WebDriver, script: str, *args: object, timeout_secs: float = 60) -> float:
    """The value of ``script`` once it is not null."""
    deadline = time.monotonic() + timeout_secs
    while (value := browser.execute_script(script, *args)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not get there in {timeout_secs} s: {script.strip()[:80]}")
        time.sleep(0.01)
    return float(value)


def first_plots(browser: WebDriver, url: str, names: list[str]) -> Percentiles:
    times = []
    for name in names:
        browser.get(f"{url}/segments/{name}")
        times.append(_wait(browser, MARK, "plot-drawn"))
    return scenarios.percentiles(times)


def frames(browser: WebDriver, page: str, count: int, scrubs: int) -> Percentiles:
    browser.get(page)
    _wait(browser, LAST_FRAME, 0, 0)  # the first frame, shown on load
    rng = random.Random(7)
    times = []
    for done in range(1, scrubs + 1):
        number = rng.randrange(1, count)
        browser.execute_script(SCRUB, number)
        times.append(_wait(browser, LAST_FRAME, number, done))
    return scenarios.percentiles(times)


def large_dataset(path: Path, episode: Path, segments: int) -> str:
    """A store holding a dataset of ``segments`` segments, each the layer of ``episode``, folded in
    process as the projector folds them; the dataset's name."""
    definitions, templates = layer_templates({"base": episode.as_uri()})
    dataset_id = uuid.uuid4()
    records = [encode(Event(dataset_id, CreateDataset("large"))),
               *(encode(schema_event(dataset_id, d)) for d in definitions),
               *(encode(layer_event(dataset_id, templates["base"], i, episode.as_uri()))
                 for i in range(segments))]
    store = SqliteStore(path)
    try:
        with paused_gc():
            for start in range(0, len(records), 5_000):
                decoded = [LogRecord.from_kafka(CATALOG_TOPIC, 0, offset, value)
                           for offset, value in enumerate(records[start:start + 5_000], start)]
                offsets = store.next_offsets()
                store.commit(fold(store.batch_view(decoded), decoded), expected_offsets=offsets)
    finally:
        store.close()
    return "large"


def first_rows(browser: WebDriver, url: str, runs: int) -> Percentiles:
    times = []
    for _ in range(runs):
        browser.get(url)
        times.append(_wait(browser, MARK, "segments-shown"))
    return scenarios.percentiles(times)


class PagesResults(TypedDict):
    date: str
    args: dict[str, str]
    first_plot: Percentiles
    frame: Percentiles
    first_rows: Percentiles


def table(results: PagesResults) -> str:
    lines = ["| metric | p50 ms | p90 ms | max ms | target p50 |", "|---|---:|---:|---:|---|"]
    given = results["args"]
    for r, label, target in (
            (results["first_plot"], f"segment page to first plot drawn ({given['segments']} segments)",
             "< 500"),
            (results["frame"],
             f"scrubber to frame shown ({given['scrubs']} frames of {given['frame_size']})", "< 150"),
            (results["first_rows"],
             f"dataset page of {int(given['dataset_segments']):,} segments to first rows", "< 1,000")):
        lines.append(f"| {label} | {r['p50_ms']} | {r['p90_ms']} | {r['max_ms']} | {target} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=50)
    parser.add_argument("--scrubs", type=int, default=50)
    parser.add_argument("--frame-size", default="640x360", help="camera frames of the scrubbed episode, WxH")
    parser.add_argument("--dataset-segments", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5, help="openings of the large dataset's page")
    parser.add_argument("--screenshot", type=Path, default=None,
                        help="save a screenshot of a segment page to this .png")
    args = parser.parse_args(argv)
    from tests.browser import chromium

    width, height = (int(n) for n in args.frame_size.split("x"))
    with tempfile.TemporaryDirectory(prefix="strata-bench-pages-") as tmp:
        work = Path(tmp)
        print(f"writing {args.segments} DROID-like episodes and one with {args.frame_size} frames ...",
              flush=True)
        names = [f"episode_{i:03d}" for i in range(args.segments)]
        for i, name in enumerate(names):
            write_episode(work / f"{name}.rrd", name, i)
        write_episode(work / "scrubbed.rrd", "scrubbed", 1, image_size=(width, height))
        browser = chromium()
        try:
            with Server(work / "stack", protocol_port=None) as server:
                dataset = server.client().create_dataset("pages")
                dataset.register([(work / f"{name}.rrd").as_uri() for name in [*names, "scrubbed"]]).wait()
                with Dashboard(server.store, bootstrap_servers=server.bootstrap_servers, port=0,
                               viewer_port=0) as dashboard:
                    url = f"{dashboard.url}/datasets/pages"
                    print("first plot ...", flush=True)
                    first_plot = first_plots(browser, url, names)
                    print(f"  {first_plot}\nframe ...", flush=True)
                    frame = frames(browser, f"{url}/segments/scrubbed", 120, args.scrubs)
                    print(f"  {frame}", flush=True)
                    if args.screenshot is not None:
                        browser.get(f"{url}/segments/{names[0]}")
                        _wait(browser, MARK, "plot-drawn")
                        _wait(browser, LAST_FRAME, 0, 0)
                        args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                        browser.save_screenshot(str(args.screenshot))
                    browser.get("about:blank")  # its event stream closed before the dashboard stops
            print(f"folding a dataset of {args.dataset_segments:,} segments ...", flush=True)
            name = large_dataset(work / "large.db", work / f"{names[0]}.rrd", args.dataset_segments)
            with Dashboard(str(work / "large.db"), port=0) as dashboard:
                rows = first_rows(browser, f"{dashboard.url}/datasets/{name}", args.runs)
                print(f"  {rows}", flush=True)
                browser.get("about:blank")
        finally:
            browser.quit()
    results: PagesResults = {"date": datetime.date.today().isoformat(),
                             "args": {k: str(v) for k, v in vars(args).items()},
                             "first_plot": first_plot, "frame": frame, "first_rows": rows}
    report.save("pages", results, table(results))


if __name__ == "__main__":
    main()
