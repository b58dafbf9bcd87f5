"""Rerun's own client on DROID-like episodes, against Rerun's OSS server and against strata's
endpoint of Rerun's catalog protocol, with direct URLs and through ``FetchChunks`` only; strata's
SDK on the same stack for reference. Prints a table; nothing is asserted.

    python -m bench.protocol --segments 100 --repeats 3 --register-datasets 2

Each read is ``reader(index="real_time")`` materialised to Arrow: a whole dataset (the median of
``--repeats`` scans, after one unmeasured) and one segment by ``filter_segments`` (the median of
``--calls`` reads). Registration puts the episodes into ``--register-datasets`` new datasets in
calls of ``--register-batch``, each call waited for (registrations/s), and then reads the last
one's ``segment_table()`` to Arrow (the median of ``--repeats``). Compare the ratios to Rerun's
server within one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
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


def measure(name: str, client: Any, uris: list[str], args: argparse.Namespace) -> dict[str, float]:
    """On ``client`` (of either server, holding the dataset ``droid``): seconds per whole scan
    (median), rows, milliseconds per one-segment read (median), registrations per second and
    seconds per ``segment_table()`` (median)."""
    dataset, repeats, calls = client.get_dataset("droid"), args.repeats, args.calls
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
    started = time.perf_counter()
    tag = uuid.uuid4().hex[:8]  # both strata endpoints serve one catalog
    for number in range(args.register_datasets):
        registered = client.create_dataset(f"registered_{tag}_{number}")
        for first in range(0, len(uris), args.register_batch):
            registered.register(uris[first:first + args.register_batch]).wait()
    per_s = args.register_datasets * len(uris) / (time.perf_counter() - started)
    tables = []
    for _ in range(repeats):
        started = time.perf_counter()
        pa.table(registered.segment_table())
        tables.append(time.perf_counter() - started)
    result = {"rows": table.num_rows, "scan_s": statistics.median(times),
              "one_segment_ms": statistics.median(latencies), "registrations_per_s": per_s,
              "segment_table_ms": statistics.median(tables) * 1000}
    print(f"  {name}: {table.num_rows:,} rows in {result['scan_s']:.2f} s, one segment "
          f"{result['one_segment_ms']:.0f} ms, {per_s:.0f} registrations/s, segment_table() "
          f"{result['segment_table_ms']:.0f} ms", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.protocol", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=100, help="DROID-like episodes (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="measured whole scans per reader (default 3)")
    parser.add_argument("--calls", type=int, default=10, help="one-segment reads per reader (default 10)")
    parser.add_argument("--register-datasets", type=int, default=2,
                        help="datasets the episodes are registered into (default 2)")
    parser.add_argument("--register-batch", type=int, default=100,
                        help="episodes per register() call (default 100)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the episodes and the stack's state go (default: a temporary directory)")
    args = parser.parse_args(argv)
    import rerun as rr

    with tempfile.TemporaryDirectory(prefix="strata-protocol-bench-") as scratch:
        work = args.work_dir or Path(scratch)
        uris = RecordingPool(work / "recordings").episodes(args.segments)
        paths = [uri[len("file://"):] for uri in uris]
        results: dict[str, dict[str, float]] = {}
        print(f"{args.segments} DROID-like episodes, with Rerun's client", flush=True)
        theirs = rr.server.Server(datasets={"droid": paths})
        try:
            results["Rerun's server"] = measure("Rerun's server", theirs.client(), uris, args)
        finally:
            theirs.shutdown()
        with sdk.Server(work / "stack", protocol_port=0, datasets={"droid": paths}) as server:
            results["strata, direct URLs"] = measure(
                "strata, direct URLs", rr.catalog.CatalogClient(server.url()), uris, args)
            with fetch_chunks_endpoint(server, work / "fetch-chunks-endpoint.log") as url:
                results["strata, FetchChunks"] = measure(
                    "strata, FetchChunks", rr.catalog.CatalogClient(url), uris, args)
            results["strata's SDK"] = measure("strata's SDK", server.client(), uris, args)
    rerun = results["Rerun's server"]
    print("\n| client and server | rows | scan s | vs Rerun's | one segment ms | vs Rerun's "
          "| registrations/s | vs Rerun's | segment_table() ms | vs Rerun's |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        columns = [f"{result['rows']:,}"]
        for key, shown in (("scan_s", "{:.2f}"), ("one_segment_ms", "{:.0f}"),
                           ("registrations_per_s", "{:.0f}"), ("segment_table_ms", "{:.0f}")):
            columns += [shown.format(result[key]), f"{result[key] / rerun[key]:.2f}x"]
        print(f"| {name} | {' | '.join(columns)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
