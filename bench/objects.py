"""``python -m bench.objects``: recordings registered from an S3-compatible server (S3Proxy, started
here) reached through a proxy on loopback that delays every byte (``bench.latency_proxy``), as a
remote object store would: many objects read at once against one at a time.

  one at a time    read_recording() of --sample objects in turn, the rate a loop over them gets
  register_prefix  DatasetEntry.register_prefix() over all --objects under one prefix, through an
                   embedded stack (sdk.Server without its endpoint), waited for: files/s

The objects are small recordings with a property each, so that each costs the requests a
DROID-like episode does (its size, its head and footer, its property chunk) without writing
gigabytes. Writes bench/results/<date>-objects.{json,md} and prints the table. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from events.names import RECORDING_SUFFIXES
from recordings import read_recording
from recordings.objects import ObjectStoreConfig, object_store
from stack import Server
from tests.s3 import EmbeddedS3

RESULTS_DIR = Path(__file__).resolve().parent / "results"
BUCKET = "bench"
PREFIX = "episodes"
TARGET_RATIO = 5.0


def _write(args: tuple[str, int, int]) -> None:
    import rerun as rr

    directory, start, stop = args
    for index in range(start, stop):
        recording_id = f"object_{index:06d}"
        rec = rr.RecordingStream("strata-bench", recording_id=recording_id)
        rec.save(Path(directory) / f"{recording_id}.rrd")
        rec.log("points", rr.Points3D([[index, index, index]]))
        rec.send_property("episode", rr.AnyValues(task="pick up the cup", index=index))
        rec.flush()
        del rec


def write_objects(s3: EmbeddedS3, count: int) -> None:
    """``count`` recordings under ``s3://bench/episodes/``, written into S3Proxy's directory."""
    s3.create_bucket(BUCKET)
    directory = s3.buckets / BUCKET / PREFIX
    directory.mkdir(parents=True)
    chunks = [(str(directory), lo, min(lo + 250, count)) for lo in range(0, count, 250)]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_write, chunks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.objects", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=300, help="objects read one at a time")
    parser.add_argument("--delay-ms", type=float, default=10.0,
                        help="one-way delay of the proxy in each direction (default 10: 20 ms round trips)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)

    results: dict[str, object] = {"objects": args.objects, "sample": args.sample,
                                  "round_trip_ms": 2 * args.delay_ms}
    with tempfile.TemporaryDirectory(prefix="strata-bench-objects-") as work, EmbeddedS3() as s3:
        started = time.perf_counter()
        write_objects(s3, args.objects)
        took = time.perf_counter() - started
        print(f"  {args.objects:,} recordings in the object store after {took:.0f} s", flush=True)
        proxy = subprocess.Popen([sys.executable, "-m", "bench.latency_proxy", "--to", f"{s3.host}:{s3.port}",
                                  "--delay-ms", str(args.delay_ms)], stdout=subprocess.PIPE, text=True)
        try:
            assert proxy.stdout is not None  # stdout=PIPE
            config = s3.config(endpoint_url=f"http://127.0.0.1:{int(proxy.stdout.readline())}")
            objects = object_store(ObjectStoreConfig.resolve(config))
            prefix = f"s3://{BUCKET}/{PREFIX}/"
            started = time.perf_counter()
            urls = objects.list(prefix, RECORDING_SUFFIXES)
            results["list_s"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            for url in urls[:args.sample]:
                read_recording(url, objects)
            one = args.sample / (time.perf_counter() - started)
            results["one_at_a_time_files_per_s"] = round(one, 1)
            print(f"  one at a time: {one:,.1f} files/s", flush=True)
            with Server(Path(work) / "stack", protocol_port=None) as server:
                dataset = server.client().create_dataset("objects")
                started = time.perf_counter()
                dataset.register_prefix(prefix, object_store_config=config).wait(timeout_secs=1800)
                took = time.perf_counter() - started
                rows = dataset.segment_table().to_arrow_table().num_rows
            results["register_prefix_s"] = round(took, 2)
            results["register_prefix_files_per_s"] = round(rows / took, 1)
            results["registered"] = rows
            print(f"  register_prefix: {rows:,} files in {took:.1f} s", flush=True)
        finally:
            proxy.kill()
            proxy.wait()
    ratio = results["register_prefix_files_per_s"] / results["one_at_a_time_files_per_s"]  # type: ignore[operator]
    text = "\n".join([
        f"strata, objects through a {2 * args.delay_ms:g} ms round-trip proxy, {datetime.date.today()}",
        "",
        "| measure | files/s | x one at a time | target |",
        "| --- | ---: | ---: | ---: |",
        f"| read_recording() one at a time ({args.sample} objects) "
        f"| {results['one_at_a_time_files_per_s']:,} | 1.00x | |",
        f"| register_prefix() of {args.objects:,} objects, waited "
        f"| {results['register_prefix_files_per_s']:,} | {ratio:.2f}x | >= {TARGET_RATIO:g}x |",
        "",
        f"Listing the prefix took {results['list_s']} s.",
    ])
    print(text)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    stem = args.results_dir / f"{datetime.date.today()}-objects"
    stem.with_suffix(".md").write_text(text + "\n")
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
