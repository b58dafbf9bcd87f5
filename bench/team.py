"""``python -m bench.team``: strata for a team, measured in one run.

  stores  The same work on a stack with the embedded SQLite store and on one with a PostgreSQL
          store (Debian's server, started here): read-your-writes (one register([uri]).wait()
          of a DROID-like episode at a time, p50 and p99), SDK batch registrations/s,
          segment_table() at --segments segments x 3 layers, and replay events/s (the whole
          topic folded from offset 0 into a fresh store of the same kind). Target: PostgreSQL
          within 1.5x of SQLite on each.
  s3      --s3-count DROID-like episodes registered from an S3-compatible server (S3Proxy,
          started here) in calls of --s3-batch URLs, next to the same files registered from
          local paths: registrations/s, and the bytes the server sent per recording (its
          /proc/PID/io wchar, HTTP included).

Writes bench/results/<date>-team.{json,md} and prints the table. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NotRequired, TypedDict

from bench import scenarios
from bench.recordings import RecordingPool
from bench.scenarios import LatencyResult, QueryResult, ReplayResult, SdkThroughputResult
from bench.systems import StrataSystem
from stack import Server
from tests.postgres import EmbeddedPostgres
from tests.s3 import EmbeddedS3

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class Stack(StrataSystem):
    """The embedded stack on a store of one kind (``sdk.Server`` without its endpoint, no probe)."""

    def __init__(self, name: str, directory: Path, store: str | None) -> None:
        super().__init__(directory)
        self.name = name
        self.store_location = store

    def make_server(self) -> Server:
        return Server(self.directory, store=self.store_location, protocol_port=None)


class StoreRun(TypedDict):
    latency: LatencyResult
    throughput: SdkThroughputResult
    queries: QueryResult
    replay: ReplayResult


class S3Registrations(TypedDict):
    recordings: int
    seconds: float
    registrations_per_s: float
    server_bytes_per_recording: int


class S3Result(TypedDict):
    local: S3Registrations
    s3: S3Registrations
    recording_bytes_mean: int


class TeamResults(TypedDict):
    date: str
    options: dict[str, object]
    stores: NotRequired[dict[str, StoreRun]]
    """``sqlite`` and ``postgresql``."""
    s3: NotRequired[S3Result]


def run_store(name: str, work: Path, store: str | None, replay_store: str | None, pool: RecordingPool,
              args: argparse.Namespace) -> StoreRun:
    stack = Stack(name, work / name, store)
    stack.start()
    try:
        latency = scenarios.latency(stack, pool, calls=args.latency_calls, warmup=args.warmup)
        latency.pop("samples_ms")
        throughput = scenarios.sdk_throughput(stack, pool, datasets=args.sdk_datasets,
                                              count=args.sdk_count, batch=args.sdk_batch)
        queries = scenarios.queries(stack, pool, sizes=[args.segments], repeats=3)[str(args.segments)]
        stack.server.stop_projector()
        replay = scenarios.replay(stack.server.bootstrap_servers, work / f"{name}-replay",
                                  max_offsets=args.replay_cap, store=replay_store)
    finally:
        stack.close()
    return {"latency": latency, "throughput": throughput, "queries": queries, "replay": replay}


def run_s3(work: Path, pool: RecordingPool, args: argparse.Namespace) -> S3Result:
    uris = pool.episodes(args.s3_count)
    with EmbeddedS3() as s3:
        started = time.perf_counter()
        urls = [s3.put("bench", f"droid/{Path(uri).name}", Path(uri.removeprefix("file://")))
                for uri in uris]
        print(f"  s3: {len(urls):,} episodes uploaded in {time.perf_counter() - started:.1f} s", flush=True)
        stack = Stack("s3", work / "s3", None)
        stack.start()
        try:
            results: dict[str, S3Registrations] = {}
            for kind, batch_uris, config in (("local", uris, None), ("s3", urls, s3.config())):
                dataset = stack.client.create_dataset(f"from-{kind}")
                sent_before = s3.bytes_sent()
                started = time.perf_counter()
                for i in range(0, len(batch_uris), args.s3_batch):
                    dataset.register(batch_uris[i:i + args.s3_batch], object_store_config=config).wait()
                elapsed = time.perf_counter() - started
                rows = dataset.segment_table().to_arrow_table().num_rows
                results[kind] = {"recordings": rows, "seconds": round(elapsed, 2),
                                 "registrations_per_s": round(rows / elapsed, 1),
                                 "server_bytes_per_recording": round((s3.bytes_sent() - sent_before) / rows)}
                print(f"  s3: {kind}: {results[kind]}", flush=True)
            mean = round(statistics.mean(Path(uri.removeprefix("file://")).stat().st_size for uri in uris))
        finally:
            stack.close()
    return {"local": results["local"], "s3": results["s3"], "recording_bytes_mean": mean}


def table(results: TeamResults, header: str) -> str:
    lines = [header, ""]
    if "stores" in results:
        sqlite, pg = results["stores"]["sqlite"], results["stores"]["postgresql"]
        rows: list[tuple[str, str, Callable[[StoreRun], float]]] = [
            ("read-your-writes p50 (ms)", "lower", lambda run: run["latency"]["p50_ms"]),
            ("read-your-writes p99 (ms)", "lower", lambda run: run["latency"]["p99_ms"]),
            ("SDK batch registrations/s", "higher", lambda run: run["throughput"]["events_per_s"]),
            (f"segment_table() at {results['options']['segments']:,} segments (ms)", "lower",
             lambda run: run["queries"]["segment_table_ms"]),
            ("replay events/s", "higher", lambda run: run["replay"]["events_per_s"])]
        lines += ["| metric | SQLite | PostgreSQL | PostgreSQL cost (x SQLite) | target | meets |",
                  "| --- | ---: | ---: | ---: | ---: | --- |"]
        for metric, better, measured in rows:
            a, b = measured(sqlite), measured(pg)
            cost = b / a if better == "lower" else a / b
            lines.append(f"| {metric} | {a:,} | {b:,} | {cost:.2f}x | <= 1.50x | "
                         f"{'yes' if cost <= 1.5 else 'no'} |")
        lines.append("")
    if "s3" in results:
        s3 = results["s3"]
        lines += ["| registering DROID-like episodes | local files | S3 (S3Proxy) |", "| --- | ---: | ---: |",
                  f"| recordings | {s3['local']['recordings']:,} | {s3['s3']['recordings']:,} |",
                  f"| registrations/s | {s3['local']['registrations_per_s']:,} | "
                  f"{s3['s3']['registrations_per_s']:,} |",
                  f"| bytes the server sent per recording | | {s3['s3']['server_bytes_per_recording']:,} |",
                  f"| mean recording size (bytes) | {s3['recording_bytes_mean']:,} | "
                  f"{s3['recording_bytes_mean']:,} |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.team", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="stores,s3", help="stores, s3 or both (default)")
    parser.add_argument("--latency-calls", type=int, default=100, help="measured single registrations")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured single registrations first")
    parser.add_argument("--sdk-datasets", type=int, default=2, help="datasets registered into")
    parser.add_argument("--sdk-count", type=int, default=500, help="episodes per dataset")
    parser.add_argument("--sdk-batch", type=int, default=500, help="URIs per register() call")
    parser.add_argument("--segments", type=int, default=100_000, help="segments for segment_table()")
    parser.add_argument("--replay-cap", type=int, default=20_000, help="maxOffsetsPerTrigger of the replay")
    parser.add_argument("--s3-count", type=int, default=1_000, help="episodes registered from S3")
    parser.add_argument("--s3-batch", type=int, default=100, help="URLs per register() call")
    parser.add_argument("--label", default="team", help="names the results <date>-<label>")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    today = datetime.date.today().isoformat()
    results: TeamResults = {"date": today,
                            "options": {k: v for k, v in vars(args).items() if k != "results_dir"}}
    with tempfile.TemporaryDirectory(prefix="strata-bench-team-") as tmp:
        work = Path(tmp)
        pool = RecordingPool(work / "recordings")
        pool.episodes(max(args.latency_calls + args.warmup, args.sdk_count,
                          args.s3_count if "s3" in only else 0))
        if "stores" in only:
            with EmbeddedPostgres() as pg:
                results["stores"] = {
                    "sqlite": run_store("sqlite", work, None, None, pool, args),
                    "postgresql": run_store("postgresql", work, pg.create_database(), pg.create_database(),
                                            pool, args)}
        if "s3" in only:
            results["s3"] = run_s3(work, pool, args)
    command = " ".join(["python -m bench.team", *(sys.argv[1:] if argv is None else argv)])
    header = (f"strata for a team, {today}, {os.cpu_count()} CPUs (shared machine: compare ratios "
              f"within a run); {command}")
    text = table(results, header)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"{today}-{args.label}"
    stem.with_suffix(".md").write_text(text + "\n")
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    print()
    print(text)
    print(f"results: {stem}.md, {stem}.json")


if __name__ == "__main__":
    main()
