"""Rerun's own client reading DROID-like episodes from Rerun's OSS server and from strata's
endpoint of Rerun's catalog protocol, with direct URLs and through ``FetchChunks`` only; strata's
SDK on the same stack for reference. Prints a table; nothing is asserted.

    python -m bench.protocol_reads --segments 100 --repeats 3

Each read is ``reader(index="real_time")`` materialised to Arrow: a whole dataset (the median of
``--repeats`` scans, after one unmeasured) and one segment by ``filter_segments`` (the median of
``--calls`` reads). Compare the ratios to Rerun's server within one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

import sdk
from bench.recordings import RecordingPool
from protocol.endpoint import url_of
from stack import processes


@contextmanager
def fetch_chunks_endpoint(server: sdk.Server, log: Path) -> Iterator[str]:
    """An endpoint of ``server``'s catalog that serves no direct URLs, in a process of its own
    (its errors in ``log``)."""
    process = processes.start(
        [sys.executable, "-m", "protocol", "--store", server.store, "--bootstrap-servers",
         server.bootstrap_servers, "--port", "0", "--no-direct-urls"], log, stdout_pipe=True)
    try:
        line = processes.read_line(process, 60)
        url = None if line is None else url_of(line)
        if url is None:
            raise RuntimeError(f"the endpoint without direct URLs did not start; see {log}")
        yield url
    finally:
        processes.stop(process)


def measure(name: str, dataset: Any, *, repeats: int, calls: int) -> dict[str, float]:
    """Seconds per whole scan (median), rows, and milliseconds per one-segment read (median)."""
    def scan() -> pa.Table:
        return pa.table(dataset.reader(index="real_time"))

    table = scan()  # unmeasured: connections, schemas, caches
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        table = scan()
        times.append(time.perf_counter() - started)
    segment_ids = sorted(set(table.column("rerun_segment_id").to_pylist()))

    def one(segment_id: str) -> pa.Table:
        return pa.table(dataset.filter_segments([segment_id]).reader(index="real_time"))

    latencies = []
    for number in range(calls):
        started = time.perf_counter()
        one(segment_ids[(number * 7) % len(segment_ids)])
        latencies.append((time.perf_counter() - started) * 1000)
    result = {"rows": table.num_rows, "scan_s": statistics.median(times),
              "one_segment_ms": statistics.median(latencies)}
    print(f"  {name}: {table.num_rows:,} rows in {result['scan_s']:.2f} s, one segment "
          f"{result['one_segment_ms']:.0f} ms", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.protocol_reads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=100, help="DROID-like episodes (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="measured whole scans per reader (default 3)")
    parser.add_argument("--calls", type=int, default=10, help="one-segment reads per reader (default 10)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the episodes and the stack's state go (default: a temporary directory)")
    args = parser.parse_args(argv)
    import rerun as rr

    with tempfile.TemporaryDirectory(prefix="strata-protocol-bench-") as scratch:
        work = args.work_dir or Path(scratch)
        paths = [uri[len("file://"):] for uri in RecordingPool(work / "recordings").episodes(args.segments)]
        results: dict[str, dict[str, float]] = {}
        print(f"{args.segments} DROID-like episodes; reader(index='real_time') with Rerun's client",
              flush=True)
        theirs = rr.server.Server(datasets={"droid": paths})
        try:
            client = theirs.client()
            results["Rerun's server"] = measure("Rerun's server", client.get_dataset("droid"),
                                                repeats=args.repeats, calls=args.calls)
        finally:
            theirs.shutdown()
        with sdk.Server(work / "stack", protocol_port=0, datasets={"droid": paths}) as server:
            direct = rr.catalog.CatalogClient(server.url())
            results["strata, direct URLs"] = measure("strata, direct URLs", direct.get_dataset("droid"),
                                                     repeats=args.repeats, calls=args.calls)
            with fetch_chunks_endpoint(server, work / "fetch-chunks-endpoint.log") as url:
                proxied = rr.catalog.CatalogClient(url)
                results["strata, FetchChunks"] = measure("strata, FetchChunks", proxied.get_dataset("droid"),
                                                         repeats=args.repeats, calls=args.calls)
            ours = server.client()
            results["strata's SDK"] = measure("strata's SDK", ours.get_dataset("droid"),
                                              repeats=args.repeats, calls=args.calls)
    rerun = results["Rerun's server"]
    print("\n| reader | rows | scan s | vs Rerun's | one segment ms | vs Rerun's |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        scan, one = result["scan_s"], result["one_segment_ms"]
        print(f"| {name} | {result['rows']:,} | {scan:.2f} | {scan / rerun['scan_s']:.2f}x | {one:.0f} "
              f"| {one / rerun['one_segment_ms']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
