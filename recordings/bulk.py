"""Reading many recordings at once (``read_recordings``): local files in a worker pool's
processes, objects in an object store on threads, the first error stopping the rest."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Sequence

from recordings.files import Recording, read_recording
from recordings.locations import is_object_url
from recordings.objects import ObjectStore
from recordings.workers import WorkerPool

OBJECT_READERS = 16
"""Recordings in object storage read at once by one call: each costs round trips, not CPU."""

Progress = Callable[[int, int], None]
"""Called with (recordings read so far, how many there are to read)."""


def read_recordings(uris: Sequence[str], objects: ObjectStore, workers: WorkerPool, *,
                    blueprint: bool = False, progress: Progress | None = None) -> list[Recording]:
    """What ``read_recording`` reads of each URI (each a blueprint's, with ``blueprint``), in the
    order of ``uris``: local files in ``workers``' processes when there are several, ``s3://``
    ones (read with ``objects``) on threads of this process, their time being the object store's.

    ``progress`` is called in the caller's thread, first with ``(0, total)``, then with
    ``(read so far, total)`` each time more have been read; nothing is printed.

    Raises what ``read_recording`` raises for the first URI, in order, whose read fails; the reads
    not yet started are cancelled then (also on an interrupt).

    Examples:
        >>> read_recordings(uris, objects, pool, progress=lambda done, total: ...)  # doctest: +SKIP
        [Recording(uri='file:///data/ep_1.rrd', recording_id='ep_1', ...), ...]
    """
    read = functools.partial(read_recording, objects=objects, blueprint=blueprint)
    total = len(uris)
    threads = (concurrent.futures.ThreadPoolExecutor(OBJECT_READERS)
               if any(map(is_object_url, uris)) else None)
    futures: list[concurrent.futures.Future[Recording]]
    if threads is not None:
        futures = [threads.submit(read, uri) for uri in uris]
    else:
        spread = workers.spreads(total)
        futures = [workers.submit(uri, read, uri, spread=spread) for uri in uris]
    order = {future: number for number, future in enumerate(futures)}
    try:
        if progress is not None:
            progress(0, total)
        pending = set(futures)
        read_so_far = 0
        while pending:
            finished, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            failed = [order[f] for f in finished if f.exception() is not None]
            if failed:
                first = min(failed)
                for later in futures[first + 1:]:
                    later.cancel()
                for earlier in futures[:first + 1]:
                    earlier.result()  # the error of the first failed URI, in order
            read_so_far += len(finished)
            if progress is not None:
                progress(read_so_far, total)
        return [future.result() for future in futures]
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    finally:
        if threads is not None:
            threads.shutdown()
