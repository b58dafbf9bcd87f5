"""The rebuild scenario: ``strata replay`` of a long log from offset 0 against ``strata replay
--from-snapshot`` from a snapshot taken near its end, each the real command in a subprocess
against a broker of its own (nothing else folds meanwhile), with the peak RSS of its process tree."""

from __future__ import annotations

import dataclasses
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from bench import procs
from bench.recordings import RecordingPool
from bench.scenarios import HISTORY_LAYERS
from bench.systems import layer_event, layer_templates, schema_event
from events import CreateDataset, Event, OnDuplicate
from producers import EventProducer, ensure_topics
from projector.stores.sql_schema import TABLES
from projector.stores.sqlite import SqliteStore
from stack.broker import EmbeddedBroker

SEND_EVENTS = 10_000


def log_events(pool: RecordingPool, *, events: int, segments: int) -> Iterator[Event]:
    """``events`` events of one dataset: its creation and schemas, ``segments`` DROID-like
    segments of 3 layers, then re-registrations of random layers (``on_duplicate="replace"``)."""
    definitions, templates = layer_templates({"base": pool.episodes(1)[0]})
    dataset_id = uuid.uuid4()
    head = [Event(dataset_id, CreateDataset("rebuild")), *(schema_event(dataset_id, d) for d in definitions)]
    yield from head
    draw = random.Random(0)
    for n in range(events - len(head)):
        added = n < segments * len(HISTORY_LAYERS)
        i = n // len(HISTORY_LAYERS) if added else draw.randrange(segments)
        layer = HISTORY_LAYERS[n % len(HISTORY_LAYERS)]
        template = dataclasses.replace(templates["base"], layer_name=layer,
                                       on_duplicate=OnDuplicate.ERROR if added else OnDuplicate.REPLACE)
        yield layer_event(dataset_id, template, i, f"file:///rebuild/{i}/{layer}-v{n}.rrd")


def _produce(producer: EventProducer, events: Iterator[Event], count: int) -> None:
    chunk: list[Event] = []
    for sent, event in enumerate(events, 1):
        chunk.append(event)
        if len(chunk) == SEND_EVENTS or sent == count:
            producer.send(chunk)
            chunk = []
        if sent == count:
            return


def _strata(directory: Path, name: str, *args: str) -> tuple[float, int, str]:
    """One ``strata`` command: its seconds, the peak RSS of its process tree, its output."""
    with open(directory / f"{name}.log", "w+") as log:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "stack.cli", *args], stdout=log,
                                   stderr=subprocess.STDOUT)
        with procs.PeakRss([process.pid]) as peak:
            code = process.wait()
        seconds = time.perf_counter() - started
        log.seek(0)
        output = log.read()
    if code != 0:
        raise RuntimeError(f"strata {' '.join(args)} exited with {code}: {output[-2000:]}")
    return seconds, peak.peak_bytes, output


def _projection(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """The store's projection, row by row: its tables but ``batches`` (where batches ended) and
    the feed's commit times (when, not what)."""
    store = SqliteStore(path, read_only=True)
    try:
        rows = {table: store.rows(table) for table in TABLES}
    finally:
        store.close()
    del rows["batches"]
    rows["feed"] = [row[:-1] for row in rows["feed"]]
    return rows


class RebuildResult(TypedDict):
    events: int
    segments: int
    snapshot_at: int
    prefix_replay_s: float
    snapshot_write_s: float
    snapshot_mb: float
    from_0_s: float
    from_0_peak_rss_mib: float
    from_snapshot_s: float
    from_snapshot_peak_rss_mib: float
    speedup: float
    stores_equal: bool


def rebuild(pool: RecordingPool, directory: Path, *, events: int, snapshot_at: int, segments: int
            ) -> RebuildResult:
    """A log of ``events`` DROID-like registrations and replacements (``log_events``). A snapshot
    is written of a store rebuilt from its first ``snapshot_at`` records (``strata replay``, then
    ``strata snapshot``); then the whole log is rebuilt from offset 0 and from that snapshot, and
    the two stores compared row by row."""
    directory.mkdir(parents=True)
    broker = EmbeddedBroker(directory / "kafka")
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        ensure_topics(bootstrap)
        stream = log_events(pool, events=events, segments=segments)
        producer = EventProducer(bootstrap)
        try:
            started = time.perf_counter()
            _produce(producer, stream, snapshot_at)
            print(f"  rebuild: {snapshot_at:,} events produced in {time.perf_counter() - started:.0f} s",
                  flush=True)
            kafka = ("--bootstrap-servers", bootstrap)
            prefix_s, _, _ = _strata(directory, "replay-prefix", "replay", *kafka, "--into",
                                     str(directory / "prefix"))
            print(f"  rebuild: the first {snapshot_at:,} rebuilt in {prefix_s:.0f} s", flush=True)
            snapshot_s, _, output = _strata(directory, "snapshot", "snapshot", "--store",
                                            str(directory / "prefix" / "store.db"),
                                            "--to", str(directory / "snapshots"))
            print(f"  rebuild: snapshot written in {snapshot_s:.1f} s: {output.strip()}", flush=True)
            _produce(producer, stream, events - snapshot_at)
        finally:
            producer.close()
        whole_s, whole_rss, _ = _strata(directory, "replay-whole", "replay", *kafka, "--into",
                                        str(directory / "whole"))
        print(f"  rebuild: {events:,} events from offset 0 in {whole_s:.1f} s", flush=True)
        from_s, from_rss, output = _strata(directory, "replay-from-snapshot", "replay", *kafka, "--into",
                                           str(directory / "from-snapshot"), "--from-snapshot",
                                           str(directory / "snapshots"))
        print(f"  rebuild: from the snapshot in {from_s:.1f} s", flush=True)
    finally:
        broker.stop()
    whole, restored = (_projection(directory / name / "store.db") for name in ("whole", "from-snapshot"))
    equal = whole == restored
    snapshot_mb = sum(p.stat().st_size for p in (directory / "snapshots").rglob("*") if p.is_file()) / 2**20
    result: RebuildResult = {
        "events": events, "segments": segments, "snapshot_at": snapshot_at,
        "prefix_replay_s": round(prefix_s, 1), "snapshot_write_s": round(snapshot_s, 1),
        "snapshot_mb": round(snapshot_mb, 1),
        "from_0_s": round(whole_s, 1), "from_0_peak_rss_mib": procs.mib(whole_rss),
        "from_snapshot_s": round(from_s, 1), "from_snapshot_peak_rss_mib": procs.mib(from_rss),
        "speedup": round(whole_s / from_s, 1), "stores_equal": equal}
    print(f"  strata: {result}", flush=True)
    return result
