"""``python -m bench``: strata's embedded stack vs Rerun's OSS catalog server on the same .rrd files.

Scenarios (--only, comma-separated; default all):
  startup     Server start on a new directory until the first registration is visible; idle RSS
              of the stack; Server(...) on the catalog it holds until the first answered read
  latency     read-your-writes: one register([uri]).wait() of a DROID-like episode at a time
              (p50, p90, p99, max)
  throughput  DROID-like episodes through the SDK, several datasets, in calls of many files;
              strata also: registrations of such episodes through the producers API
              (producers.EventProducer) until segment_table() shows them all, and their size
  queries     segment_table() and manifest() .to_arrow_table() at several sizes, 3 layers each
  replay      strata only: rebuild the projection of the whole topic (what the scenarios before
              it produced) from offset 0 in a fresh
              store with the real projector in a subprocess; events/s and peak RSS (/proc); and
              Spark's Kafka source alone reading the same topic (replay's ceiling)
  reads       reader(index="real_time") over datasets of DROID-like episodes, to Arrow (rows/s),
              and one segment by a rerun_segment_id filter (p50, p99); strata also: the same
              read on Spark local[*] (to_spark(...).count()) over more segments
  workers     strata only: a reader() scan and a register() call with clients of 0 (in process),
              1 and 2 worker processes: rows/s, registrations/s, peak RSS of client and workers
  tables      a 10-column table: append in calls of many rows, single-row upserts, and
              reader() of the whole table to Arrow (rows/s; per call p50, p99)
  history     strata only, in process, no Spark or Kafka: segment_table() and manifest() now and
              as of a point in the middle of many layer replacements, and the store's size with and
              without its history
  rebuild     strata only, a broker of its own: strata replay of a long log of DROID-like
              registrations and replacements from offset 0, against strata replay --from-snapshot
              from a snapshot near its end; seconds and peak RSS of each command
  stages      strata only, in process, no Spark or Kafka: CPU time per event of the projector's
              Python stages (decode, records, batch_view, fold, commit) on DROID-like register events,
              and the floors of Avro decoding and SQLite inserts alone

The DROID-like episodes (stack.droid, about 0.7 MB each) are written once per run, in parallel.
--scale small finishes in a few minutes; --scale full uses the sizes of the targets. Every size
can be overridden. Writes bench/results/<date>-<scale>.{json,md,png} and prints the table.
Nothing is asserted: the targets are reported next to the numbers.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ParamSpec, TypeVar

from bench import profile, rebuild, report, scenarios
from bench.recordings import LAYERS, RecordingPool
from bench.report import NOT_APPLICABLE, Row, RunResults, StrataResults, SystemResults
from bench.systems import RerunSystem, StrataSystem, System
from spark_streaming.options import MAX_OFFSETS_PER_TRIGGER

SCENARIOS = ("startup", "latency", "throughput", "queries", "reads", "workers", "tables", "replay",
             "stages", "history", "rebuild")
SCALES = {
    "small": {"latency_calls": 50, "warmup": 5, "sdk_datasets": 2, "sdk_count": 250, "sdk_batch": 250,
              "producer_count": 10_000, "query_sizes": "500,2000", "rerun_max_segments": 2_000,
              "query_repeats": 3, "replay_caps": "20000,5000",
              "stage_events": 30_000, "stage_batch": 10_000, "read_sizes": "20", "read_calls": 20,
              "spark_segments": 100, "scaling_segments": 50, "scaling_files": 250, "table_rows": 100_000,
              "table_batch": 10_000, "table_upserts": 200, "history_segments": 10_000,
              "history_replacements": 30_000, "rebuild_events": 50_000, "rebuild_snapshot_at": 49_500,
              "rebuild_segments": 5_000},
    "full": {"latency_calls": 300, "warmup": 20, "sdk_datasets": 8, "sdk_count": 1_000, "sdk_batch": 1_000,
             "producer_count": 200_000, "query_sizes": "1000,10000,100000",
             "rerun_max_segments": 100_000, "query_repeats": 3, "replay_caps": "20000,50000",
             "stage_events": 300_000, "stage_batch": 100_000, "read_sizes": "20,200", "read_calls": 50,
             "spark_segments": 1_000, "scaling_segments": 200, "scaling_files": 1_000,
             "table_rows": 1_000_000, "table_batch": 10_000, "table_upserts": 1_000,
             "history_segments": 100_000, "history_replacements": 300_000,
             "rebuild_events": 1_000_000, "rebuild_snapshot_at": 990_000, "rebuild_segments": 100_000},
}
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small",
                        help="preset sizes (default small); the options below override them")
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help=f"scenarios to run, comma-separated (default: {','.join(SCENARIOS)})")
    parser.add_argument("--systems", default="strata,rerun", help="strata, rerun or both (default)")
    parser.add_argument("--latency-calls", type=int, help="measured single registrations (full: 300)")
    parser.add_argument("--warmup", type=int, help="unmeasured single registrations first (full: 20)")
    parser.add_argument("--sdk-datasets", type=int, help="datasets registered into through the SDK (full: 8)")
    parser.add_argument("--sdk-count", type=int,
                        help="DROID-like episodes registered into each of them (full: 1000)")
    parser.add_argument("--sdk-batch", type=int, help="URIs per register() call (full: 1000)")
    parser.add_argument("--producer-count", type=int,
                        help="events sent through producers.EventProducer (full: 200000)")
    parser.add_argument("--query-sizes", help="segment counts, comma-separated (full: 1000,10000,100000)")
    parser.add_argument("--rerun-max-segments", type=int,
                        help="largest query size registered into rerun (3 .rrd files per segment); "
                             "larger sizes are reported as not measured (full: 100000)")
    parser.add_argument("--query-repeats", type=int, help="runs per query, the median is reported")
    parser.add_argument("--replay-caps", help="maxOffsetsPerTrigger values to replay with, comma-separated; "
                                              "0 for no limit (full: 20000,50000)")
    parser.add_argument("--stage-events", type=int,
                        help="register events for the stages scenario (full: 300000)")
    parser.add_argument("--stage-batch", type=int,
                        help="events per batch in the stages scenario (full: 100000)")
    parser.add_argument("--read-sizes", help="DROID-like segments per dataset read, comma-separated "
                                             "(full: 20,200)")
    parser.add_argument("--read-calls", type=int, help="one-segment reads measured per size (full: 50)")
    parser.add_argument("--scaling-segments", type=int,
                        help="DROID-like segments scanned per worker count (full: 200)")
    parser.add_argument("--scaling-files", type=int,
                        help="DROID-like files registered in one call per worker count (full: 1000)")
    parser.add_argument("--spark-segments", type=int,
                        help="DROID-like segments read with to_spark on Spark local[*] (full: 1000)")
    parser.add_argument("--table-rows", type=int, help="rows appended to the table (full: 1000000)")
    parser.add_argument("--table-batch", type=int, help="rows per append() call (full: 10000)")
    parser.add_argument("--table-upserts", type=int, help="single-row upsert() calls (full: 10000)")
    parser.add_argument("--history-segments", type=int,
                        help="DROID-like segments of 3 layers in the history scenario (full: 100000)")
    parser.add_argument("--history-replacements", type=int,
                        help="layer replacements after them in the history scenario (full: 300000)")
    parser.add_argument("--rebuild-events", type=int,
                        help="events in the rebuild scenario's log (full: 1000000)")
    parser.add_argument("--rebuild-snapshot-at", type=int,
                        help="the offset of the snapshot the rebuild starts from (full: 990000)")
    parser.add_argument("--rebuild-segments", type=int,
                        help="segments of 3 layers in that log, replaced at random after (full: 100000)")
    parser.add_argument("--label", help="names the results <date>-<label> (default: the scale); "
                                         "use one when overriding sizes")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR,
                        help=f"where to write the results (default {RESULTS_DIR})")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the temporary directory for recordings and stacks")
    args = parser.parse_args(argv)
    args.label = args.label or args.scale
    for key, value in SCALES[args.scale].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    args.query_sizes = [int(x) for x in args.query_sizes.split(",")]
    args.replay_caps = [int(x) for x in args.replay_caps.split(",")]
    args.read_sizes = [int(x) for x in args.read_sizes.split(",")]
    return args


def prepare_recordings(pool: RecordingPool, args: argparse.Namespace) -> None:
    """Write every .rrd file the run needs before any system starts, so timings exclude it."""
    episodes = 1
    if "latency" in args.only:
        episodes = max(episodes, args.latency_calls + args.warmup)
    if "throughput" in args.only:
        episodes = max(episodes, args.sdk_count)
    if "reads" in args.only:
        episodes = max(episodes, *args.read_sizes, args.spark_segments)
    if "workers" in args.only:
        episodes = max(episodes, args.scaling_segments, args.scaling_files)
    layered = 1
    if "queries" in args.only and "rerun" in args.systems:
        layered = max([s for s in args.query_sizes if s <= args.rerun_max_segments], default=1)
    print(f"writing .rrd recordings: {episodes:,} DROID-like episodes, {layered:,} small files per layer",
          flush=True)
    pool.episodes(episodes)
    for layer in LAYERS:
        pool.ensure(layer, layered)


Params = ParamSpec("Params")
Result = TypeVar("Result")


def timed(timings: dict[str, float], name: str, function: Callable[Params, Result], *args: Params.args,
          **kwargs: Params.kwargs) -> Result:
    print(f"== {name}", flush=True)
    started = time.perf_counter()
    try:
        return function(*args, **kwargs)
    finally:
        timings[name] = round(time.perf_counter() - started, 1)
        print(f"== {name}: {timings[name]} s", flush=True)


def failed(system: str, exc: Exception) -> str:
    traceback.print_exc()
    print(f"== {system} stopped early: {exc}", flush=True)
    return f"{type(exc).__name__}: {exc}"


def run_common(args: argparse.Namespace, system: System, pool: RecordingPool, timings: dict[str, float],
               results: StrataResults, *, query_sizes: list[int]) -> None:
    """The scenarios both systems run, in order, into ``results``; strata also events through the
    producers API."""
    name = system.name
    results["startup"] = timed(timings, f"{name} startup", scenarios.startup, system, pool)
    if "latency" in args.only:
        results["latency"] = timed(timings, f"{name} latency", scenarios.latency, system, pool,
                                   calls=args.latency_calls, warmup=args.warmup)
    if "throughput" in args.only:
        results["sdk_throughput"] = timed(timings, f"{name} sdk throughput", scenarios.sdk_throughput,
                                          system, pool, datasets=args.sdk_datasets, count=args.sdk_count,
                                          batch=args.sdk_batch)
        if isinstance(system, StrataSystem):
            results["producer_throughput"] = timed(timings, f"{name} producer throughput",
                                                   scenarios.producer_throughput, system, pool,
                                                   count=args.producer_count)
    if "queries" in args.only:
        results["queries"] = timed(timings, f"{name} queries", scenarios.queries, system, pool,
                                   sizes=query_sizes, repeats=args.query_repeats)
    if "reads" in args.only:
        results["reads"] = timed(timings, f"{name} reads", scenarios.reads, system, pool,
                                 sizes=args.read_sizes, calls=args.read_calls)
    if "tables" in args.only:
        results["tables"] = timed(timings, f"{name} tables", scenarios.tables, system, rows=args.table_rows,
                                  batch=args.table_batch, upserts=args.table_upserts)


def run_strata(args: argparse.Namespace, pool: RecordingPool, work: Path, timings: dict[str, float]
               ) -> StrataResults:
    system = StrataSystem(work / "strata")
    results: StrataResults = {}
    try:
        if "stages" in args.only:  # first, while nothing else runs
            results["stages"] = timed(timings, "strata stages", scenarios.stages, pool, work / "stages",
                                      events=args.stage_events, batch=args.stage_batch)
        if "history" in args.only:
            results["history"] = timed(timings, "strata history", scenarios.history, pool, work / "history",
                                       segments=args.history_segments, replacements=args.history_replacements)
        if "rebuild" in args.only:
            results["rebuild"] = timed(timings, "strata rebuild", rebuild.rebuild, pool, work / "rebuild",
                                       events=args.rebuild_events, snapshot_at=args.rebuild_snapshot_at,
                                       segments=args.rebuild_segments)
        run_common(args, system, pool, timings, results, query_sizes=args.query_sizes)
        if "workers" in args.only:
            results["workers"] = timed(timings, "strata workers", scenarios.worker_scaling, system, pool,
                                       segments=args.scaling_segments, files=args.scaling_files)
        if "reads" in args.only:
            results["spark_read"] = timed(timings, "strata spark read", scenarios.spark_read, system,
                                          pool, segments=args.spark_segments)
        system.server.stop_projector()  # Spark completes its event log as it stops
        live = profile.progress_batches(system.event_log_dir)
        if "latency" in args.only:
            results["latency_profile"] = profile.summarize_progress(profile.small_batches(live))
        results["live_profile"] = profile.summarize_progress(live)
        results["live_log_profile"] = profile.summarize_log(system.server.projector_log)
        if "replay" in args.only:
            results["replay"] = []
            for cap in args.replay_caps:
                directory = work / f"replay-{cap or 'uncapped'}"
                outcome = timed(timings, f"strata replay (maxOffsetsPerTrigger {cap})", scenarios.replay,
                                system.server.bootstrap_servers, directory, max_offsets=cap)
                outcome["profile"] = profile.summarize_progress(
                    profile.progress_batches(Path(outcome["event_log_dir"])))
                outcome["log_profile"] = profile.summarize_log(directory / "projector.log")
                results["replay"].append(outcome)
            if results["replay"][0]["events"]:  # an empty topic has nothing to read
                results["kafka_read"] = timed(timings, "strata kafka read", scenarios.kafka_read,
                                              system.server.bootstrap_servers,
                                              batch=args.replay_caps[0] or MAX_OFFSETS_PER_TRIGGER)
    except Exception as exc:  # keep what was measured; the table shows the rest as missing
        results["error"] = failed("strata", exc)
    finally:
        system.close()
    return results


def run_rerun(args: argparse.Namespace, pool: RecordingPool, timings: dict[str, float]) -> SystemResults:
    system = RerunSystem()
    results: StrataResults = {}
    try:
        sizes = [s for s in args.query_sizes if s <= args.rerun_max_segments]
        run_common(args, system, pool, timings, results, query_sizes=sizes)
    except Exception as exc:
        results["error"] = failed("rerun", exc)
    finally:
        system.close()
    return results


def rows_for(args: argparse.Namespace, strata: StrataResults, rerun: SystemResults) -> list[Row]:
    """The comparison table; a missing number stays missing, with the reason in the note."""
    rows: list[Row] = []
    both = bool(rerun)

    def pick(results: Mapping[str, object], *keys: str) -> float | str | None:
        """The number at ``keys`` in ``results``; None if it is not there."""
        value: object = results
        for key in keys:
            if not isinstance(value, Mapping) or key not in value:
                return None
            value = value[key]
        return value if isinstance(value, int | float | str) else None

    def other(*keys: str) -> float | str | None:
        return pick(rerun, *keys) if both else None

    if "startup" in strata or "startup" in rerun:
        rows += [Row("startup", "start() (s)", "lower", pick(strata, "startup", "start_s"),
                     other("startup", "start_s")),
                 Row("startup", "new directory: until first registration visible (s)", "lower",
                     pick(strata, "startup", "first_registration_visible_s"),
                     other("startup", "first_registration_visible_s"), 5),
                 Row("startup", "existing catalog: Server(...) until first answered read (s)", "lower",
                     pick(strata, "startup", "first_read_s"), other("startup", "first_read_s"), 2,
                     note="strata: with Rerun's endpoint, read by rerun-sdk's client; rerun: its "
                          "in-memory server, which keeps nothing"),
                 Row("startup", "idle RSS (MiB)", "lower", pick(strata, "startup", "idle_rss_mib", "total"),
                     other("startup", "idle_rss_mib", "total"),
                     note="strata: broker + projector process trees; rerun: its server process")]
    if "latency" in args.only:
        for key, target in (("p50_ms", 60), ("p90_ms", None), ("p99_ms", 150), ("max_ms", None)):
            rows.append(Row("read-your-writes", f"register([uri]).wait() {key[:-3]} (ms)", "lower",
                            pick(strata, "latency", key), other("latency", key), target,
                            note=f"{pick(strata, 'latency', 'calls')} calls after warm-up"))
    if "throughput" in args.only:
        pipeline = strata.get("producer_throughput")
        rows.append(Row("throughput", f"SDK, {args.sdk_datasets} datasets x {args.sdk_count:,} DROID-like "
                        f"recordings in calls of {args.sdk_batch:,} (recordings/s)", "higher",
                        pick(strata, "sdk_throughput", "events_per_s"),
                        other("sdk_throughput", "events_per_s"),
                        note="until segment_table() shows all; strata on its default worker pool; "
                             "target: 1.5x rerun's"))
        rows.append(Row("throughput", f"producers API, {args.producer_count:,} events (events/s)", "higher",
                        pick(strata, "producer_throughput", "events_per_s"), NOT_APPLICABLE, 20_000,
                        note="until segment_table() shows all; rerun has no producers API"))
        rows.append(Row("throughput", "producers API: until projected, before segment_table() (events/s)",
                        "higher", pick(strata, "producer_throughput", "projected_events_per_s"),
                        NOT_APPLICABLE))
        rows.append(Row("throughput", "bytes on the topic per registration (DROID-like episode)", "lower",
                        pick(strata, "producer_throughput", "registration_bytes"), NOT_APPLICABLE, 1_000,
                        note="each schema defined once, first: "
                             f"{pipeline['schema_bytes'] if pipeline else None} bytes"))
        cpu = pipeline.get("cpu_us_per_event", {}) if pipeline else {}
        for part, used in cpu.items():
            rows.append(Row("throughput", f"producers API: CPU of the {part} (µs an event)", "lower", used,
                            NOT_APPLICABLE, note="from the first send until visible and in the changelog; "
                            f"all parts: {sum(cpu.values()):.0f} µs an event on {os.cpu_count()} CPUs"))
    if "queries" in args.only:
        for size in args.query_sizes:
            too_big = size > args.rerun_max_segments
            note = (f"rerun not measured: above --rerun-max-segments {args.rerun_max_segments:,}"
                    if too_big else "")
            targets = (("segment_table_ms", 300 if size == 100_000 else None), ("manifest_ms", None))
            for query, target in targets:
                metric = f"{query.removesuffix('_ms')}() at {size:,} segments x 3 layers (ms)"
                rows.append(Row("queries", metric, "lower", pick(strata, "queries", str(size), query),
                                None if too_big else other("queries", str(size), query), target, note))
    if "reads" in args.only:
        for size in args.read_sizes:
            rows.append(Row("reads", f"reader(index='real_time'), {size} DROID-like segments, to Arrow "
                            "(rows/s)", "higher", pick(strata, "reads", str(size), "rows_per_s"),
                            other("reads", str(size), "rows_per_s"),
                            note="median of 3 scans, strata on its default worker pool; target: 1.5x "
                                 "rerun's"))
            for key in ("p50_ms", "p99_ms"):
                rows.append(Row("reads", f"one segment of {size} by rerun_segment_id filter, "
                                f"{key[:-3]} (ms)", "lower",
                                pick(strata, "reads", str(size), "one_segment", key),
                                other("reads", str(size), "one_segment", key),
                                note="target: p50 at most rerun's" if key == "p50_ms" else ""))
    if "workers" in strata:
        scaling = strata["workers"]
        for size, measured in scaling.items():
            who = "in the client's process" if size == "0" else f"{size} worker process{'es' * (size != '1')}"
            rows.append(Row("workers", f"reader(index='real_time'), {measured['rows'] // 120:,} DROID-like "
                            f"segments, {who} (rows/s)", "higher", measured["rows_per_s"], NOT_APPLICABLE))
            rows.append(Row("workers", f"register() of {measured['files']:,} DROID-like files in one call, "
                            f"{who}, until wait() (files/s)", "higher", measured["registrations_per_s"],
                            NOT_APPLICABLE, note=f"files read in {measured['register_read_s']} s"))
            rows.append(Row("workers", f"peak RSS during the scan, {who}: client / workers (MiB)", "lower",
                            measured["caller_peak_rss_mib"], NOT_APPLICABLE,
                            note=f"workers: {measured['workers_peak_rss_mib']} MiB in all"))
        if "1" in scaling and "2" in scaling:
            one, two = scaling["1"], scaling["2"]
            for what, ratio in (("scan rows/s", two["rows_per_s"] / one["rows_per_s"]),
                                ("registrations/s", two["registrations_per_s"] / one["registrations_per_s"])):
                rows.append(Row("workers", f"2 workers / 1 worker, {what} (x)", "higher", round(ratio, 2),
                                NOT_APPLICABLE, 1.7))
    if "tables" in args.only:
        size = f"{args.table_rows:,} rows x 10 columns"
        rows.append(Row("tables", f"append, {size} in calls of {args.table_batch:,}, then one read "
                        "seeing them all (rows/s)", "higher",
                        pick(strata, "tables", "append_rows_per_s"), other("tables", "append_rows_per_s"),
                        note="end to end: strata's calls return at the Kafka ack, the read waits for the "
                             "projection; target: at least rerun's"))
        for key in ("p50_ms", "p99_ms"):
            rows.append(Row("tables", f"append call, {key[:-3]} (ms)", "lower",
                            pick(strata, "tables", "append_call", key), other("tables", "append_call", key)))
        rows.append(Row("tables", f"{args.table_upserts:,} single-row upsert calls, then one read seeing "
                        "them all (rows/s)", "higher",
                        pick(strata, "tables", "upsert_rows_per_s"), other("tables", "upsert_rows_per_s"),
                        note="every other one replaces a row; target: 10x rerun's"))
        for key in ("p50_ms", "p99_ms"):
            rows.append(Row("tables", f"upsert call, {key[:-3]} (ms)", "lower",
                            pick(strata, "tables", "upsert_call", key), other("tables", "upsert_call", key)))
        rows.append(Row("tables", "reader() of the whole table to Arrow (rows/s)", "higher",
                        pick(strata, "tables", "read_rows_per_s"), other("tables", "read_rows_per_s"),
                        note="median of 3; target: at least rerun's"))
        for key in ("p50_ms", "p99_ms"):
            rows.append(Row("tables", f"one-row append then reader().count(), {key[:-3]} (ms)", "lower",
                            pick(strata, "tables", "write_then_read", key),
                            other("tables", "write_then_read", key), note="reported, no target"))
    if "spark_read" in strata:
        spark = strata["spark_read"]
        rows.append(Row("reads", f"Spark path: to_spark('real_time').count(), {spark['segments']:,} "
                        "DROID-like segments, local[*] (rows/s)", "higher", spark["rows_per_s"],
                        NOT_APPLICABLE, note=f"{spark['segments_per_s']:,} segments/s; rerun has no "
                                             "Spark path"))
    for outcome in strata.get("replay", []):
        cap = outcome["max_offsets_per_trigger"] or "no limit"
        rows.append(Row("replay", f"{outcome['events']:,} events from offset 0, maxOffsetsPerTrigger {cap} "
                        "(events/s)", "higher", outcome["events_per_s"], NOT_APPLICABLE, 30_000,
                        note=f"after a {outcome['startup_s']} s projector start; "
                             f"{outcome['events_per_s_with_startup']:,.0f}/s including it"))
        rows.append(Row("replay", f"peak RSS, maxOffsetsPerTrigger {cap} (MiB)", "lower",
                        outcome["peak_rss_mib"], NOT_APPLICABLE, 1_536, note="projector process tree"))
    if "kafka_read" in strata:
        kafka = strata["kafka_read"]
        note = (f"{kafka['events']:,} events of {kafka['mean_record_bytes']:,} bytes on average, batches of "
                f"{kafka['batch']:,}: replay's ceiling without any Python work")
        rows.append(Row("replay", "Spark's Kafka source alone, counted in the JVM (events/s)", "higher",
                        kafka["count_events_per_s"], NOT_APPLICABLE, note=note))
        rows.append(Row("replay", "Spark's Kafka source alone, handed to Python as Arrow (events/s)",
                        "higher", kafka["arrow_events_per_s"], NOT_APPLICABLE, note=note))
        rows.append(Row("replay", "Spark's Kafka source, decoded into the fold's records (events/s)",
                        "higher", kafka["codec_records_events_per_s"], NOT_APPLICABLE,
                        note="as the projector decodes, by the codec (fastavro); nothing folded"))
    if "stages" in strata:
        stages = strata["stages"]
        note = f"{stages['events']:,} events in batches of {stages['batch']:,}"
        for stage in scenarios.STAGES:
            rows.append(Row("projector stages", f"{stage} (CPU us per event)", "lower",
                            stages["us_per_event"][stage], NOT_APPLICABLE, note=note))
        rows.append(Row("projector stages", "decode + records + fold + commit, no Spark (events/s)", "higher",
                        stages["events_per_s"], NOT_APPLICABLE, note="what replay could reach on one core"))
        driver = sum(us for stage, us in stages["us_per_event"].items() if stage != "decode")
        rows.append(Row("projector stages", "the driver's share: records + fold + commit (events/s)",
                        "higher", round(1e6 / driver, 1), NOT_APPLICABLE,
                        note="what replay could reach with the tasks decoding on another core"))
        spec = stages["per_record_fold_us_per_event"]
        rows.append(Row("projector stages", "the same, folded one record at a time (events/s)", "higher",
                        stages["per_record_fold_events_per_s"], NOT_APPLICABLE,
                        note=f"the fold's specification, into a store of its own: fold {spec['fold']} us, "
                             f"commit {spec['commit']} us per event"))
        floors = stages["floor_us_per_event"]
        rows.append(Row("projector stages", "floor: fastavro reading the Avro body alone (CPU us per event)",
                        "lower", floors["avro_body"], NOT_APPLICABLE, note="no model objects, no checks"))
        rows.append(Row("projector stages",
                        "floor: SQLite inserts of a layer, segment, outcome (CPU us per event)", "lower",
                        floors["sqlite_rows"], NOT_APPLICABLE,
                        note="one executemany per table and batch, the store's tables and indexes"))
    if "history" in strata:
        kept = strata["history"]
        note = (f"{kept['segments']:,} segments x 3 layers, then {kept['replacements']:,} replacements; "
                "in process, SQLite")
        for read in ("segment_table", "manifest"):
            now, then, before = (timings[f"{read}_ms"] for timings in
                                 (kept["now"], kept["as_of_middle"], kept["without_history"]))
            rows.append(Row("history", f"{read}() now (ms)", "lower", now, NOT_APPLICABLE, note=note))
            rows.append(Row("history", f"{read}() as of the middle of the replacements (ms)", "lower", then,
                            NOT_APPLICABLE, note=f"{kept['as_of_middle'][f'{read}_rows']:,} rows"))
            rows.append(Row("history", f"{read}() as of / now", "lower", round(then / now, 2), NOT_APPLICABLE,
                            target=2))
            rows.append(Row("history", f"{read}() now / the same store without history", "lower",
                            round(now / before, 2), NOT_APPLICABLE, target=1.1))
        rows.append(Row("history", "store size with history / without (MB: "
                        f"{kept['store_mb']:,} / {kept['store_without_history_mb']:,})", "lower",
                        round(kept["store_mb"] / kept["store_without_history_mb"], 2), NOT_APPLICABLE,
                        target=2))
        rows.append(Row("history", "fold and commit, in process (events/s)", "higher",
                        kept["fold_commit_events_per_s"], NOT_APPLICABLE, note=f"{kept['events']:,} events"))
    if "rebuild" in strata:
        rebuilt = strata["rebuild"]
        note = (f"{rebuilt['events']:,} events ({rebuilt['segments']:,} segments x 3 layers, then "
                "replacements); strata replay, Spark startup included")
        rows.append(Row("rebuild", "rebuild from offset 0 (s)", "lower", rebuilt["from_0_s"], NOT_APPLICABLE,
                        note=note))
        rows.append(Row("rebuild", f"rebuild from a snapshot at {rebuilt['snapshot_at']:,} (s)", "lower",
                        rebuilt["from_snapshot_s"], NOT_APPLICABLE, target=60,
                        note=f"snapshot of {rebuilt['snapshot_mb']:,} MB; the stores equal row by row: "
                             f"{'yes' if rebuilt['stores_equal'] else 'NO'}"))
        rows.append(Row("rebuild", "from offset 0 / from the snapshot", "higher", rebuilt["speedup"],
                        NOT_APPLICABLE, target=10))
        for origin, peak_rss in (("from 0", rebuilt["from_0_peak_rss_mib"]),
                                 ("from snapshot", rebuilt["from_snapshot_peak_rss_mib"])):
            rows.append(Row("rebuild", f"peak RSS, {origin} (MiB)", "lower", peak_rss, NOT_APPLICABLE,
                            note="the strata replay process tree"))
        rows.append(Row("rebuild", "strata snapshot of that store (s)", "lower", rebuilt["snapshot_write_s"],
                        NOT_APPLICABLE))
    if both is False:
        for row in rows:
            if row.rerun is None:
                row.rerun = NOT_APPLICABLE
    return rows


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    today = datetime.date.today().isoformat()
    timings: dict[str, float] = {}
    results: RunResults = {
        "date": today, "scale": args.scale, "strata": {}, "rerun": {}, "timings_s": timings,
        "options": {k: v for k, v in vars(args).items() if k not in ("results_dir", "work_dir")},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()}}
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="strata-bench-", dir=args.work_dir) as tmp:
        work = Path(tmp)
        pool = RecordingPool(work / "recordings")
        timed(timings, "recordings", prepare_recordings, pool, args)
        if "strata" in args.systems:
            results["strata"] = run_strata(args, pool, work, timings)
        if "rerun" in args.systems:
            results["rerun"] = run_rerun(args, pool, timings)
    rows = rows_for(args, results["strata"], results["rerun"])
    header = (f"strata vs rerun {__import__('rerun').__version__}, {args.label}, {today}, "
              f"{os.cpu_count()} CPUs (shared machine: compare ratios within a run)")
    paths = report.write(results, rows, args.results_dir, f"{today}-{args.label}", header)
    print()
    print(report.markdown(rows, header))
    print_profile(results["strata"])
    for system, measured in (("strata", results["strata"]), ("rerun", results["rerun"])):
        if measured.get("error"):
            print(f"{system} stopped early, its later scenarios are missing: {measured['error']}")
    for kind, path in paths.items():
        print(f"{kind}: {path}")


def print_profile(strata: StrataResults) -> None:
    """Where strata's micro-batches spend their time, from Spark's progress and the projector log."""
    for title, summary in (
            ("live projector, 1-2 record batches (read-your-writes)", strata.get("latency_profile")),
            ("live projector, all batches", strata.get("live_profile"))):
        if summary:
            print(f"profile, {title}: {summary}")
    if strata.get("live_log_profile"):
        print(f"profile, live projector log: {strata['live_log_profile']}")
    for outcome in strata.get("replay", []):
        print(f"profile, replay maxOffsetsPerTrigger {outcome['max_offsets_per_trigger']}: "
              f"{outcome['profile']}; log: {outcome['log_profile']}")
