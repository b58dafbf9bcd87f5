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

With ``--table-segments N``, it measures ``segment_table()`` of one dataset of N small
recordings instead (one file per segment, registered on each server in calls of 10,000),
through Rerun's client on both servers and through strata's SDK: the first read after the
registrations, and the median of ``--repeats`` more. A server that fails to register them is
reported, and the others measured.

    python -m bench.protocol --table-segments 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
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
def endpoint_process(store: str, log: Path, *, bootstrap_servers: str | None = None,
                     direct_urls: bool = True) -> Iterator[str]:
    """strata's endpoint of the catalog in ``store``, in a process of its own (its errors in
    ``log``): read-only without ``bootstrap_servers``; without ``direct_urls``, chunks only
    through ``FetchChunks``."""
    command = [sys.executable, "-m", "protocol", "--store", store, "--port", "0"]
    if bootstrap_servers is not None:
        command += ["--bootstrap-servers", bootstrap_servers]
    if not direct_urls:
        command.append("--no-direct-urls")
    process = processes.start(command, log, stdout_pipe=True)
    try:
        line = processes.read_line(process, 60)
        url = None if line is None else url_of(line)
        if url is None:
            raise RuntimeError(f"the endpoint did not start; see {log}")
        yield url
    finally:
        processes.stop(process)


def fetch_chunks_endpoint(server: sdk.Server, log: Path) -> contextlib.AbstractContextManager[str]:
    """An endpoint of ``server``'s catalog that serves no direct URLs, in a process of its own
    (its errors in ``log``)."""
    return endpoint_process(server.store, log, bootstrap_servers=server.bootstrap_servers, direct_urls=False)


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


TABLE_BATCH = 10_000


def _first_and_median_ms(read: Any, repeats: int) -> tuple[float, float, int]:
    """The milliseconds of the first call of ``read`` (strata's reads then keep what they read
    until the next commit), the median of ``repeats`` calls after it, and the rows the last gave."""
    started = time.perf_counter()
    rows = read().num_rows
    first = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        rows = read().num_rows
        times.append((time.perf_counter() - started) * 1000)
    return first, statistics.median(times), rows


def table_at_scale(count: int, work: Path, repeats: int) -> int:
    """``segment_table()`` of ``count`` segments on both servers (see the module's docstring)."""
    import rerun as rr

    pool = RecordingPool(work / "recordings")
    pool.ensure("base", count)
    uris = [pool.path("base", i).as_uri() for i in range(count)]
    results: dict[str, tuple[float, float, int]] = {}
    name = f"table_{uuid.uuid4().hex[:8]}"  # a work directory's stack may hold earlier runs'
    print(f"segment_table() of {count:,} segments", flush=True)
    theirs = rr.server.Server()
    try:
        dataset = theirs.client().create_dataset(name)
        started = time.perf_counter()
        for first in range(0, count, TABLE_BATCH):
            dataset.register(uris[first:first + TABLE_BATCH]).wait()
        print(f"  Rerun's server: registered in {time.perf_counter() - started:.0f} s", flush=True)
        results["Rerun's client on Rerun's server"] = _first_and_median_ms(
            lambda: dataset.segment_table().to_arrow_table(), repeats)
    except Exception as exc:  # noqa: BLE001 - a server that cannot hold the dataset is a result
        print(f"  Rerun's server: failed, {str(exc).splitlines()[0]}", flush=True)
    finally:
        theirs.shutdown()
    with sdk.Server(work / "table-stack", protocol_port=0) as server:
        ours = server.client()
        dataset = ours.create_dataset(name)
        started = time.perf_counter()
        batches = [uris[first:first + TABLE_BATCH] for first in range(0, count, TABLE_BATCH)]
        operations = [dataset.register(batch) for batch in batches]
        for operation in operations:  # all sent, then waited for
            operation.wait(timeout_secs=3600)
        print(f"  strata: registered in {time.perf_counter() - started:.0f} s", flush=True)
        through = rr.catalog.CatalogClient(server.url()).get_dataset(name)
        results["Rerun's client on strata's endpoint"] = _first_and_median_ms(
            lambda: through.segment_table().to_arrow_table(), repeats)
        results["strata's SDK"] = _first_and_median_ms(lambda: pa.table(dataset.segment_table()), repeats)
    rerun = results.get("Rerun's client on Rerun's server")
    print("\n| client and server | rows | first segment_table() ms | vs Rerun's | again, median ms "
          "| vs Rerun's |\n|---|---:|---:|---:|---:|---:|")
    for name, (first_ms, again_ms, rows) in results.items():
        first_ratio, again_ratio = ("n/a", "n/a") if rerun is None else (
            f"{first_ms / rerun[0]:.2f}x", f"{again_ms / rerun[1]:.2f}x")
        print(f"| {name} | {rows:,} | {first_ms:.0f} | {first_ratio} | {again_ms:.0f} | {again_ratio} |")
    return 0


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
    parser.add_argument("--table-segments", type=int, default=0, metavar="N",
                        help="measure only segment_table() of a dataset of N small recordings")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the episodes and the stack's state go (default: a temporary directory)")
    args = parser.parse_args(argv)
    import rerun as rr

    with tempfile.TemporaryDirectory(prefix="strata-protocol-bench-") as scratch:
        work = args.work_dir or Path(scratch)
        if args.table_segments:
            return table_at_scale(args.table_segments, work, args.repeats)
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
