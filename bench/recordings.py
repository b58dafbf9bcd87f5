"""The ``.rrd`` recordings both systems register: DROID-like episodes (``stack.droid``), and for
the catalog-size scenarios small files, one per (segment, layer), with distinct recording ids
shared across a segment's layers, as in Rerun's layers model."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

LAYERS = ("base", "tracking_error", "quality")
CHUNK = 500
EPISODE_CHUNK = 50

Chunk = TypeVar("Chunk")


def segment_id(index: int) -> str:
    return f"bench_segment_{index:07d}"


def episode_id(index: int) -> str:
    return f"episode_{index:05d}"


def _write_episodes(args: tuple[str, int, int]) -> int:
    from stack.droid import write_episode

    directory, start, stop = args
    for index in range(start, stop):
        path = Path(directory) / f"{episode_id(index)}.rrd"
        if not path.exists():
            write_episode(path, episode_id(index), index)
    return stop - start


def _write_chunk(args: tuple[str, str, int, int]) -> int:
    import rerun as rr

    directory, layer, start, stop = args
    for index in range(start, stop):
        path = Path(directory) / layer / f"{segment_id(index)}.rrd"
        if path.exists():  # written by an earlier run into the same directory
            continue
        rec = rr.RecordingStream("strata-bench", recording_id=segment_id(index))
        rec.save(path)
        rec.log(f"{layer}/points", rr.Points3D([[index, index, index]]))
        rec.flush()
        del rec
    return stop - start


class RecordingPool:
    """Files under ``directory/<layer>/`` and episodes under ``directory/droid/``, written on
    demand in parallel and then reused.

    >>> pool = RecordingPool(Path("/tmp/recordings"))
    >>> uris = pool.uris("base", 1000)  # doctest: +SKIP
    """

    def __init__(self, directory: Path, *, workers: int = 2) -> None:
        self.directory = Path(directory)
        self.workers = workers
        self._written = dict.fromkeys(LAYERS, 0)

    @property
    def episode_dir(self) -> Path:
        return self.directory / "droid"

    def episodes(self, count: int) -> list[str]:
        """``file://`` URIs of DROID-like episodes ``0 .. count``, written if needed (each is
        about 0.7 MB: 3 cameras of 120 JPEG frames, 8 series, 4 properties)."""
        paths = [self.episode_dir / f"{episode_id(i)}.rrd" for i in range(count)]
        missing = [i for i, path in enumerate(paths) if not path.exists()]
        if missing:
            self._write(_write_episodes, [(str(self.episode_dir), lo, min(lo + EPISODE_CHUNK, count))
                                          for lo in range(missing[0], count, EPISODE_CHUNK)],
                        "DROID-like episodes", missing[0], count, every=500)
        return [path.as_uri() for path in paths]

    def path(self, layer: str, index: int) -> Path:
        return self.directory / layer / f"{segment_id(index)}.rrd"

    def ensure(self, layer: str, count: int) -> None:
        """Write the first ``count`` files of ``layer`` if not written yet, printing progress."""
        start = self._written[layer]
        if count <= start:
            return
        (self.directory / layer).mkdir(parents=True, exist_ok=True)
        self._write(_write_chunk, [(str(self.directory), layer, lo, min(lo + CHUNK, count))
                                   for lo in range(start, count, CHUNK)], f".rrd files for layer {layer}",
                    start, count)
        self._written[layer] = count

    def _write(self, write: Callable[[Chunk], int], chunks: list[Chunk], what: str, start: int, count: int, *,
               every: int = 10_000) -> None:
        began = time.perf_counter()
        done = start
        # A fresh process per chunk: the recording streams of a process keep threads of their own.
        with multiprocessing.get_context("spawn").Pool(self.workers, maxtasksperchild=1) as workers:
            for written in workers.imap_unordered(write, chunks):
                done += written
                if done == count or done % every < written:
                    print(f"  {what}: {done:,}/{count:,} ({time.perf_counter() - began:.0f} s)", flush=True)

    def uris(self, layer: str, count: int, *, start: int = 0) -> list[str]:
        """``file://`` URIs of files ``start .. start + count`` of ``layer``, written if needed."""
        self.ensure(layer, start + count)
        return [self.path(layer, i).as_uri() for i in range(start, start + count)]
