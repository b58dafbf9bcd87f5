"""``python -m bench.live``: how soon the catalog's watchers see a change, and what watching costs
the projector, measured in one run on the embedded stack.

  latency     --registrations DROID-like episodes registered one at a time; from
              ``register().wait()`` returning to the change appearing (a) in ``client.changes()``
              (a second client, as a watcher elsewhere would be), (b) on the changelog topic (a
              plain confluent-kafka consumer), (c) in the dashboard page's DOM in Debian's chromium
              (a MutationObserver stamps the feed entry): p50 and p99. Negative: seen before
              ``wait()`` returned. Targets: (a) and (b) p50 <= 50 ms, (c) p50 <= 250 ms.
  throughput  --events registrations of the same episode's layer replayed from offset 0 by the
              real projector (``bench.probe``) with the changelog relay, and with
              ``--no-changelog``, alternating, --runs each; and the fold and commit of the same
              records into a fresh SQLite store with their feed entries, and with the feed
              emptied before the commit (CPU time). Target: within 10%.

Writes bench/results/<date>-live.{json,md} and prints the table. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

import sdk
from bench import procs, report, scenarios
from bench.recordings import RecordingPool
from bench.scenarios import Percentiles
from bench.systems import layer_event, layer_templates, schema_event
from changelog import CHANGES_TOPIC
from dashboard import Dashboard
from events import CATALOG_TOPIC, CreateDataset, Event, encode
from projector import ChangeKind, LogRecord, fold
from projector.stores.sqlite import SqliteStore
from spark_streaming.folding import paused_gc
from stack import Server

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

# Stamps the first time each segment's layer_added entry enters the page's feed (epoch ms).
OBSERVE_FEED = """
window.seen = {};
new MutationObserver((mutations) => {
  const now = Date.now();
  for (const m of mutations) for (const node of m.addedNodes)
    if (node.dataset && node.dataset.kind === "layer_added") window.seen[node.dataset.segment] ??= now;
}).observe(document.getElementById("feed"), {childList: true});
"""


class Watcher(threading.Thread):
    """Stamps (``time.time()``) the first sight of each segment's new layer."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.seen: dict[str, float] = {}
        self.stopping = threading.Event()


class FeedWatcher(Watcher):
    def __init__(self, client: sdk.CatalogClient, dataset_name: str) -> None:
        super().__init__("feed-watcher")
        self.client, self.dataset_name = client, dataset_name

    def run(self) -> None:
        while not self.stopping.is_set():
            for change in self.client.changes(dataset=self.dataset_name, timeout_secs=1.0):
                if change.kind is ChangeKind.LAYER_ADDED:
                    self.seen.setdefault(change.segment_id, time.time())


class TopicWatcher(Watcher):
    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__("changelog-watcher")
        self.consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"bench-{uuid.uuid4()}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 5})
        self.consumer.assign([TopicPartition(CHANGES_TOPIC, 0, OFFSET_END)])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                message = self.consumer.poll(0.2)
                if message is None or message.error() is not None or message.value() is None:
                    continue
                raw_key = message.key()
                if raw_key is None:  # every changelog record has a key: not one of them
                    continue
                key = json.loads(raw_key)
                if key[0] == "layer":
                    self.seen.setdefault(key[2], time.time())
        finally:
            self.consumer.close()


class SeenAfterWait(Percentiles):
    missed: int
    """Registrations the watcher never saw."""


def latency(server: Server, pool: RecordingPool, *, registrations: int, warmup: int,
            screenshot: Path | None = None) -> dict[str, SeenAfterWait]:
    from tests.browser import chromium

    client = server.client()
    dataset = client.create_dataset("live")
    uris = pool.episodes(registrations + warmup)
    watchers = [FeedWatcher(server.client(), dataset.name), TopicWatcher(server.bootstrap_servers)]
    for watcher in watchers:
        watcher.start()
    returned: dict[str, float] = {}
    with Dashboard(server.store, bootstrap_servers=server.bootstrap_servers, port=0) as dashboard:
        browser = chromium()
        try:
            browser.get(f"{dashboard.url}/datasets/{dataset.name}")
            procs.wait_until(lambda: browser.find_element("id", "status").text == "live",
                                       timeout_secs=60, what="the page's event stream")
            browser.execute_script(OBSERVE_FEED)
            time.sleep(1.0)  # the watchers are at the end of the feed and of the topic
            for i, uri in enumerate(uris):
                dataset.register([uri]).wait()
                if i >= warmup:
                    returned[Path(uri).stem] = time.time()
                if (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{len(uris)} registrations", flush=True)
            time.sleep(2.0)
            stamped = browser.execute_script("return window.seen")
            if screenshot is not None:
                _screenshot(server, browser, screenshot)
            page: dict[str, float] = {segment: ms / 1000 for segment, ms in stamped.items()}
        finally:
            browser.quit()
    for watcher in watchers:
        watcher.stopping.set()
        watcher.join(10)
    result: dict[str, SeenAfterWait] = {}
    for name, seen in (("a_client_changes", watchers[0].seen), ("b_changelog_topic", watchers[1].seen),
                       ("c_page_dom", page)):
        delays = [(seen[s] - t) * 1000 for s, t in returned.items() if s in seen]
        result[name] = {**scenarios.percentiles(delays), "missed": len(returned) - len(delays)}
        print(f"  {name}: {result[name]}", flush=True)
    return result


def _screenshot(server: Server, browser: WebDriver, path: Path) -> None:
    """The page after the registrations and one record a foreign producer got wrong."""
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    producer.produce(CATALOG_TOPIC, b"{\"segment\": \"episode_x\"}  (JSON, not a strata event)")
    producer.flush(30)
    time.sleep(3.0)
    browser.execute_script("window.scrollTo(0, 0)")
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(path))
    print(f"  screenshot: {path}", flush=True)


def _records(pool: RecordingPool, events: int) -> list[bytes]:
    definitions, templates = layer_templates({"base": pool.episodes(1)[0]})
    dataset_id = uuid.uuid4()
    return [encode(Event(dataset_id, CreateDataset("throughput"))),
            *(encode(schema_event(dataset_id, d)) for d in definitions),
            *(encode(layer_event(dataset_id, templates["base"], i, f"file:///throughput/{i}.rrd"))
              for i in range(events))]


def _fold_and_commit(records: list[bytes], path: Path, *, feed: bool, batch: int = 1000) -> float:
    """CPU seconds to fold and commit ``records`` into a fresh store, in batches of ``batch``."""
    store = SqliteStore(path)
    try:
        with paused_gc():
            began = time.process_time()
            for start in range(0, len(records), batch):
                decoded = [LogRecord.from_kafka(CATALOG_TOPIC, 0, offset, value)
                           for offset, value in enumerate(records[start:start + batch], start)]
                offsets = store.next_offsets()
                changes = fold(store.batch_view(decoded), decoded)
                if not feed:
                    changes = dataclasses.replace(changes, feed=[])
                store.commit(changes, expected_offsets=offsets)
            return time.process_time() - began
    finally:
        store.close()


class LiveThroughput(TypedDict):
    records: int
    runs: int
    replay_events_per_s: dict[str, list[float]]
    """``with_relay`` and ``no_changelog``, a number per run."""
    commit_records_per_s: dict[str, list[float]]
    """``with_feed`` and ``feed_emptied``, a number per run."""
    medians: dict[str, float]
    """Of each of those four."""
    relay_ratio: float
    feed_ratio: float


class LiveResults(TypedDict):
    date: str
    args: dict[str, str]
    latency: dict[str, SeenAfterWait]
    throughput: LiveThroughput


def throughput(server: Server, pool: RecordingPool, work: Path, *, events: int, runs: int) -> LiveThroughput:
    records = _records(pool, events)
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "linger.ms": 20})
    for value in records:
        producer.produce(CATALOG_TOPIC, value)
        producer.poll(0)
    producer.flush(120)
    replays: dict[str, list[float]] = {"with_relay": [], "no_changelog": []}
    commits: dict[str, list[float]] = {"with_feed": [], "feed_emptied": []}
    for run in range(runs):
        for mode, args in (("with_relay", ()), ("no_changelog", ("--no-changelog",))):
            replayed = scenarios.replay(server.bootstrap_servers, work / f"replay-{mode}-{run}",
                                        max_offsets=0, projector_args=args)
            replays[mode].append(replayed["events_per_s"])
        for mode, feed in (("with_feed", True), ("feed_emptied", False)):
            seconds = _fold_and_commit(records, work / f"commit-{mode}-{run}.db", feed=feed)
            commits[mode].append(round(len(records) / seconds, 1))
            print(f"  fold+commit {mode}: {commits[mode][-1]:,.0f} records/s (CPU)", flush=True)
    medians = {mode: statistics.median(values) for mode, values in {**replays, **commits}.items()}
    return {"records": len(records), "runs": runs, "replay_events_per_s": replays,
            "commit_records_per_s": commits, "medians": medians,
            "relay_ratio": round(medians["with_relay"] / medians["no_changelog"], 3),
            "feed_ratio": round(medians["with_feed"] / medians["feed_emptied"], 3)}


def table(results: LiveResults) -> str:
    lines = ["| latency from wait() | p50 ms | p99 ms | max ms | missed | target p50 |",
             "|---|---|---|---|---|---|"]
    for name, target in (("a_client_changes", 50), ("b_changelog_topic", 50), ("c_page_dom", 250)):
        r = results["latency"][name]
        lines.append(f"| {name} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} | {r['missed']} "
                     f"| <= {target} |")
    t = results["throughput"]
    m = t["medians"]
    lines += ["", "| projector throughput (median of runs) | with | without | ratio | target |",
              "|---|---|---|---|---|",
              f"| replay events/s, changelog relay vs --no-changelog | {m['with_relay']:,.0f} | "
              f"{m['no_changelog']:,.0f} | {t['relay_ratio']} | >= 0.9 |",
              f"| fold+commit records/s (CPU), feed vs feed emptied | {m['with_feed']:,.0f} | "
              f"{m['feed_emptied']:,.0f} | {t['feed_ratio']} | >= 0.9 |"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--registrations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--screenshot", type=Path, default=None,
                        help="save a screenshot of the page after the latency run to this .png")
    parser.add_argument("--recordings", type=Path, default=Path(".cache/bench-recordings"),
                        help="where the DROID-like episodes are written once and reused")
    args = parser.parse_args(argv)
    pool = RecordingPool(args.recordings.absolute())
    with tempfile.TemporaryDirectory(prefix="strata-bench-live-") as tmp:
        work = Path(tmp)
        with Server(work / "stack", protocol_port=None) as server:
            print("latency:", flush=True)
            seen = latency(server, pool, registrations=args.registrations, warmup=args.warmup,
                           screenshot=args.screenshot)
            print("throughput:", flush=True)
            results: LiveResults = {
                "date": datetime.date.today().isoformat(), "args": {k: str(v) for k, v in vars(args).items()},
                "latency": seen,
                "throughput": throughput(server, pool, work, events=args.events, runs=args.runs)}
    report.save("live", results, table(results))


if __name__ == "__main__":
    main()
