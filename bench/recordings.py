"""The ``.rrd`` recordings both systems register: one file per (segment, layer), with distinct
recording ids shared across a segment's layers, as in Rerun's layers model."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

LAYERS = ("base", "tracking_error", "quality")
CHUNK = 500


def segment_id(index: int) -> str:
    return f"bench_segment_{index:07d}"


def _write_chunk(args: tuple[str, str, int, int]) -> int:
    import rerun as rr

    directory, layer, start, stop = args
    for index in range(start, stop):
        rec = rr.RecordingStream("strata-bench", recording_id=segment_id(index))
        rec.save(Path(directory) / layer / f"{segment_id(index)}.rrd")
        rec.log(f"{layer}/points", rr.Points3D([[index, index, index]]))
        rec.flush()
        del rec
    return stop - start


class RecordingPool:
    """Files under ``directory/<layer>/``, written on demand in parallel and then reused.

    >>> pool = RecordingPool(Path("/tmp/recordings"))
    >>> uris = pool.uris("base", 1000)  # doctest: +SKIP
    """

    def __init__(self, directory: Path, *, workers: int = 2) -> None:
        self.directory = Path(directory)
        self.workers = workers
        self._written = dict.fromkeys(LAYERS, 0)

    def path(self, layer: str, index: int) -> Path:
        return self.directory / layer / f"{segment_id(index)}.rrd"

    def ensure(self, layer: str, count: int) -> None:
        """Write the first ``count`` files of ``layer`` if not written yet, printing progress."""
        start = self._written[layer]
        if count <= start:
            return
        (self.directory / layer).mkdir(parents=True, exist_ok=True)
        chunks = [(str(self.directory), layer, lo, min(lo + CHUNK, count))
                  for lo in range(start, count, CHUNK)]
        began = time.perf_counter()
        done = start
        with multiprocessing.get_context("spawn").Pool(self.workers) as workers:
            for written in workers.imap_unordered(_write_chunk, chunks):
                done += written
                if done == count or done % 10_000 < CHUNK:
                    print(f"  .rrd files for layer {layer}: {done:,}/{count:,} "
                          f"({time.perf_counter() - began:.0f} s)", flush=True)
        self._written[layer] = count

    def uris(self, layer: str, count: int, *, start: int = 0) -> list[str]:
        """``file://`` URIs of files ``start .. start + count`` of ``layer``, written if needed."""
        self.ensure(layer, start + count)
        return [self.path(layer, i).as_uri() for i in range(start, start + count)]
