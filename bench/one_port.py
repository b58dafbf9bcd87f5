"""``python -m bench.one_port``: what serving native gRPC and gRPC-web on one port would cost
Rerun's native client. grpcio serves HTTP/2 only, so one port for both needs a front that reads
each connection's first bytes and hands it to grpcio or to the gRPC-web server: a hop for every
native call. This measures that hop's floor, a pass-through TCP proxy on loopback
(``bench.latency_proxy`` with no delay), against the endpoint reached directly, with Rerun's own
client on the same stack of DROID-like episodes:

  one segment   reader(index="real_time") of one segment by filter_segments, to Arrow: p50, p90
  scan          reader(index="real_time") of the whole dataset, to Arrow: the median
  listing       dataset_names(): p50

Prints the table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import sdk
from bench.recordings import RecordingPool


@contextlib.contextmanager
def pass_through(url: str) -> Iterator[str]:
    """``url``'s endpoint behind a TCP proxy on loopback that adds no delay."""
    host_port = url.split("://", 1)[1]
    proxy = subprocess.Popen([sys.executable, "-m", "bench.latency_proxy", "--to", host_port,
                              "--delay-ms", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None
        yield f"rerun+http://127.0.0.1:{proxy.stdout.readline().strip()}"
    finally:
        proxy.kill()
        proxy.wait()


def timed(calls: int, call: Callable[[], object]) -> list[float]:
    call()  # unmeasured: connections and caches
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def measure(url: str, segments: list[str], calls: int) -> dict[str, float]:
    import rerun as rr

    dataset = rr.catalog.CatalogClient(url).get_dataset("droid")
    one = timed(calls, lambda: [dataset.filter_segments([s]).reader(index="real_time").to_arrow_table()
                                for s in segments[:1]])
    scan = timed(3, lambda: dataset.reader(index="real_time").to_arrow_table())
    listing = timed(calls, lambda: rr.catalog.CatalogClient(url).dataset_names())
    return {"one_p50_ms": 1000 * statistics.median(one),
            "one_p90_ms": 1000 * statistics.quantiles(one, n=10)[-1],
            "scan_s": statistics.median(scan), "listing_p50_ms": 1000 * statistics.median(listing)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=50)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3, help="direct and proxied measured in turn")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="strata-one-port-") as scratch:
        uris = RecordingPool(Path(scratch) / "recordings").episodes(args.segments)
        paths = [uri[len("file://"):] for uri in uris]
        with sdk.Server(Path(scratch) / "stack", protocol_port=0, datasets={"droid": paths}) as server, \
                pass_through(server.url()) as proxied:
            segments = server.client().get_dataset("droid").segment_ids()
            rounds: dict[str, list[dict[str, float]]] = {"direct": [], "through a front": []}
            for _ in range(args.rounds):
                rounds["direct"].append(measure(server.url(), segments, args.calls))
                rounds["through a front"].append(measure(proxied, segments, args.calls))
    print(f"{args.segments} DROID-like episodes, Rerun's client, medians of {args.rounds} rounds\n")
    print("| endpoint | one segment p50 ms | p90 ms | scan s | dataset_names() p50 ms |")
    print("|---|---:|---:|---:|---:|")
    for name, measured in rounds.items():
        row = {key: statistics.median(m[key] for m in measured) for key in measured[0]}
        print(f"| {name} | {row['one_p50_ms']:.1f} | {row['one_p90_ms']:.1f} | {row['scan_s']:.2f} | "
              f"{row['listing_p50_ms']:.1f} |")


if __name__ == "__main__":
    main()
