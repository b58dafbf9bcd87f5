"""``python -m bench.spark_facts``: a registration's files read by a Spark session's tasks
(``recordings.read_recordings_on_spark``, what ``register(..., spark=...)`` does from
``commands.registration.SPARK_MIN_FILES`` files) against the client's worker processes
(``recordings.read_recordings``), on the same DROID-like episodes, for each --counts.

  session      SparkSession start on --master (once)
  first job    the first read on it: Python workers started, modules imported
  spark        a warm session's read of N files, best of --runs
  workers      --workers worker processes' read of the same files, best of --runs

Prints the table and writes bench/results/<date>-spark-facts.{json,md}. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import tempfile
import time
from pathlib import Path

from recordings import ObjectStoreConfig, WorkerPool, object_store, read_recordings, read_recordings_on_spark
from spark_streaming.job import build_session
from stack.droid import write_episode

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DISTINCT = 50
"""Episodes written; the others are copies of them under other names."""


def episodes(directory: Path, count: int) -> list[str]:
    """``count`` DROID-like episode files (``DISTINCT`` written, the rest copies)."""
    uris = []
    for index in range(count):
        path = directory / f"episode_{index:05d}.rrd"
        if index < DISTINCT:
            write_episode(path, f"episode_{index:05d}", index)
        else:
            shutil.copy(directory / f"episode_{index % DISTINCT:05d}.rrd", path)
        uris.append(path.as_uri())
    return uris


def best(runs: int, call: object) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[200, 1000, 5000])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    objects = object_store(ObjectStoreConfig.resolve(None))
    with tempfile.TemporaryDirectory() as directory:
        uris = episodes(Path(directory), max(args.counts))
        started = time.perf_counter()
        spark = build_session(args.master, app_name="strata-bench-spark-facts")
        session = time.perf_counter() - started
        started = time.perf_counter()
        read_recordings_on_spark(spark, uris[:DISTINCT], objects)
        first = time.perf_counter() - started
        pool = WorkerPool(args.workers)
        read_recordings(uris[:DISTINCT], objects, pool)  # workers started
        rows = []
        for count in args.counts:
            chosen = uris[:count]
            on_spark = best(args.runs, lambda chosen=chosen: read_recordings_on_spark(spark, chosen, objects))
            on_workers = best(args.runs, lambda chosen=chosen: read_recordings(chosen, objects, pool))
            rows.append({"files": count, "spark_s": round(on_spark, 3), "workers_s": round(on_workers, 3),
                         "spark_ms_per_file": round(1000 * on_spark / count, 3),
                         "workers_ms_per_file": round(1000 * on_workers / count, 3)})
        pool.close()
        spark.stop()
    result = {"master": args.master, "workers": args.workers, "session_s": round(session, 2),
              "first_job_s": round(first, 2), "rows": rows}
    lines = [f"Spark session on {args.master}: {session:.1f} s; its first read: {first:.1f} s", "",
             "| files | Spark, warm (s) | ms/file | workers (s) | ms/file |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['files']:,} | {r['spark_s']} | {r['spark_ms_per_file']} | {r['workers_s']} | "
              f"{r['workers_ms_per_file']} |" for r in rows]
    print("\n".join(lines))
    stem = RESULTS_DIR / f"{datetime.date.today().isoformat()}-spark-facts"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
