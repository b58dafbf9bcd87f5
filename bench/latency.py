"""Read-your-writes latency: one ``register([uri]).wait()`` at a time on the embedded stack.

    .venv/bin/python -m bench.latency --calls 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sdk import Server


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def make_recordings(directory: Path, count: int) -> list[str]:
    import rerun as rr

    uris = []
    for i in range(count):
        path = directory / f"bench_{i}.rrd"
        rec = rr.RecordingStream("strata-bench", recording_id=f"bench_{i:05d}")
        rec.save(path)
        rec.log("points", rr.Points3D([[i, i, i]]))
        rec.flush()
        del rec
        uris.append(path.as_uri())
    return uris


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50, help="measured calls (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured calls first (default 5)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="strata-bench-") as tmp:
        uris = make_recordings(Path(tmp), args.calls + args.warmup)
        with Server(Path(tmp) / "stack") as server:
            dataset = server.client().create_dataset("bench")
            latencies = []
            for i, uri in enumerate(uris):
                started = time.perf_counter()
                dataset.register([uri]).wait()
                if i >= args.warmup:
                    latencies.append(time.perf_counter() - started)
    ms = [x * 1000 for x in latencies]
    print(f"register([uri]).wait() over {len(ms)} calls: median {statistics.median(ms):.0f} ms, "
          f"p90 {percentile(ms, 0.9):.0f} ms, p99 {percentile(ms, 0.99):.0f} ms, "
          f"max {max(ms):.0f} ms")


if __name__ == "__main__":
    main()
