"""Rerun's training loaders (``rerun.experimental.dataloader``) over DROID-like episodes, through
Rerun's client on Rerun's OSS server and on strata's endpoint of Rerun's catalog protocol, in one
run: the stack's endpoint with direct URLs, one through FetchChunks only beside the same stack, and
one alone on the same store once the broker and the projector are stopped (an endpoint on a host
of its own). Prints a table; nothing is asserted.

    python -m bench.loaders --segments 100 --workers 2 --epochs 2

Each epoch is a ``RerunIterableDataset`` on ``real_time`` at 15 Hz (the measured joints, the
commanded joints over a 30-step window, the wrist camera's JPEG decoded) read to its end through
a PyTorch ``DataLoader`` of ``--workers`` spawned processes: samples per second, and the seconds
until the first sample (the workers' start and first fetch). The first epoch on each server is
not measured. It needs rerun-sdk's ``dataloader`` extra (torch, torchvision, av, pillow), which
``scripts/test-deps.sh`` installs into ``.cache/dataloader``. Compare the ratios to Rerun's
server within one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sdk
from bench.protocol import endpoint_process, fetch_chunks_endpoint
from bench.recordings import RecordingPool

EXTRA = Path(__file__).resolve().parents[1] / ".cache" / "dataloader"
RATE_HZ = 15.0
WINDOW_STEPS = 30


def _use_extra() -> None:
    """Put the loaders' extra on ``sys.path`` (and so on the spawned workers' path)."""
    if not (EXTRA / ".installed").is_file():
        raise SystemExit(f"Rerun's loaders' extra (torch) is not in {EXTRA}: run 'bash scripts/test-deps.sh'")
    if str(EXTRA) not in sys.path:
        sys.path.append(str(EXTRA))


def epochs(client: Any, args: argparse.Namespace) -> dict[str, float]:
    """On ``client`` (Rerun's, of either server, holding the dataset ``droid``): samples per
    epoch, the median samples/s and seconds to the first sample of ``args.epochs`` epochs after
    an unmeasured one."""
    import warnings

    from rerun.experimental.dataloader import (
        DataSource,
        Field,
        FixedRateSampling,
        ImageDecoder,
        NumericDecoder,
        RerunIterableDataset,
    )
    from torch.utils.data import DataLoader

    fields = {
        "state": Field("/observation/joint_positions:Scalars:scalars", decode=NumericDecoder()),
        "action": Field("/action/joint_positions:Scalars:scalars", decode=NumericDecoder(),
                        window=(0.0, (WINDOW_STEPS - 1) / RATE_HZ)),
        "image": Field("/cameras/wrist_left/image:EncodedImage:blob", decode=ImageDecoder()),
    }
    with warnings.catch_warnings():  # of the default start method: the DataLoader below spawns
        warnings.filterwarnings("ignore", "The default multiprocessing start method", RuntimeWarning)
        data = RerunIterableDataset(DataSource(dataset=client.get_dataset("droid")), "real_time", fields,
                                    timeline_sampling=FixedRateSampling(rate_hz=RATE_HZ))
    loader = DataLoader(data, batch_size=None, num_workers=args.workers, multiprocessing_context="spawn",
                        persistent_workers=False)
    rates, firsts, samples = [], [], 0
    for epoch in range(args.epochs + 1):
        data.set_epoch(epoch)
        started = time.perf_counter()
        first = None
        samples = 0
        for _ in loader:
            samples += 1
            if first is None:
                first = time.perf_counter() - started
        seconds = time.perf_counter() - started
        if epoch:
            rates.append(samples / seconds)
            firsts.append(first or seconds)
        print(f"  epoch {epoch}: {samples} samples in {seconds:.2f} s", flush=True)
    return {"samples": samples, "samples_per_s": statistics.median(rates),
            "first_sample_s": statistics.median(firsts)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loaders", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=100, help="DROID-like episodes (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes (default 2)")
    parser.add_argument("--epochs", type=int, default=2, help="measured epochs per server (default 2)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the episodes and the stack's state go (default: a temporary directory)")
    args = parser.parse_args(argv)
    _use_extra()
    import rerun as rr

    with tempfile.TemporaryDirectory(prefix="strata-loaders-bench-") as scratch:
        work = args.work_dir or Path(scratch)
        uris = RecordingPool(work / "recordings").episodes(args.segments)
        paths = [uri[len("file://"):] for uri in uris]
        results: dict[str, dict[str, float]] = {}
        print(f"{args.segments} DROID-like episodes, RerunIterableDataset, {args.workers} workers",
              flush=True)
        theirs = rr.server.Server(datasets={"droid": paths})
        try:
            print("Rerun's server", flush=True)
            results["Rerun's server"] = epochs(theirs.client(), args)
        finally:
            theirs.shutdown()
        with sdk.Server(work / "stack", protocol_port=0, datasets={"droid": paths}) as server:
            print("strata's endpoint, direct URLs", flush=True)
            results["strata, direct URLs"] = epochs(rr.catalog.CatalogClient(server.url()), args)
            with fetch_chunks_endpoint(server, work / "fetch-chunks-endpoint.log") as url:
                print("strata's endpoint, FetchChunks", flush=True)
                results["strata, FetchChunks"] = epochs(rr.catalog.CatalogClient(url), args)
            store = server.store
        # An endpoint on a host of its own, as training machines would read a PostgreSQL catalog:
        # here the same store with the broker and the projector stopped.
        with endpoint_process(store, work / "endpoint-alone.log") as url:
            print("strata's endpoint alone (no broker, no projector beside it), direct URLs", flush=True)
            results["strata alone, direct URLs"] = epochs(rr.catalog.CatalogClient(url), args)
    rerun = results["Rerun's server"]
    print("\n| server | samples per epoch | samples/s | vs Rerun's | first sample s |")
    print("|---|---:|---:|---:|---:|")
    for name, result in results.items():
        print(f"| {name} | {result['samples']:,.0f} | {result['samples_per_s']:,.0f} | "
              f"{result['samples_per_s'] / rerun['samples_per_s']:.2f}x | {result['first_sample_s']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
