"""``python -m bench.transport``: how a segment's Arrow IPC file best crosses from a client's
worker process to the client, measured with a real worker of ``recordings.workers``.

Two ways, for replies of several sizes (a DROID-like segment read with ``real_time`` is about
1 MB): through the socket the worker and the client share (the reply pickled as ``bytes``), and
through a file in shared memory that the client maps without copying (what a pool does with an
Arrow buffer of at least ``INLINE_BYTES``). Prints, per size and way, the median time per reply
and the client's CPU time per reply: on a machine whose cores are all reading, the client's CPU
is what the workers lose.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pyarrow as pa

from recordings import INLINE_BYTES, WorkerPool


def as_buffer(size: int) -> pa.Buffer:
    """``size`` bytes as an Arrow buffer: crosses through shared memory."""
    return pa.py_buffer(bytes(size))


def as_bytes(size: int) -> bytes:
    """``size`` bytes as ``bytes``: cross through the socket."""
    return bytes(size)


def measure(pool: WorkerPool, function: Callable[[int], object], size: int, repeats: int
            ) -> tuple[float, float]:
    """Median wall and mean client CPU per reply, in ms, the reply read once by the client."""
    walls = []
    cpu = time.process_time()
    for _ in range(repeats):
        started = time.perf_counter()
        reply = pool.submit("transport", function, size).result()
        memoryview(reply)[-1]  # touch it, as a reader of the file would
        walls.append(time.perf_counter() - started)
    return statistics.median(walls) * 1000, (time.process_time() - cpu) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.transport", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes-mib", default="0.25,1,10,50", help="reply sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    from bench import transport  # the functions as the worker imports them, not as __main__'s

    pool = WorkerPool(1)
    try:
        pool.submit("start", transport.as_bytes, 1).result()
        while not pool.pids:
            time.sleep(0.05)
        print(f"replies of at least {INLINE_BYTES // 1024} KiB cross through shared memory\n")
        print("| size (MiB) | socket: ms per reply | socket: client CPU ms | shared memory: ms per reply "
              "| shared memory: client CPU ms |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for size_mib in (float(s) for s in args.sizes_mib.split(",")):
            size = int(size_mib * 2**20)
            socket = measure(pool, transport.as_bytes, size, args.repeats)
            shared = measure(pool, transport.as_buffer, size, args.repeats)
            print(f"| {size_mib:g} | {socket[0]:.2f} | {socket[1]:.2f} | {shared[0]:.2f} | {shared[1]:.2f} |",
                  flush=True)
    finally:
        pool.close()


if __name__ == "__main__":
    main()
