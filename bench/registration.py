"""Where a registration's time goes, stage by stage, on DROID-like episodes: a file's facts read
from its footer (in the caller, and on warm worker processes), the commands built and checked,
the producer (Kafka's acknowledgement), then the projector's micro-batch (its fetch, and its fold
and commit, from the projector's own log) and the wait until the client sees it. Prints a table;
nothing is asserted.

    python -m bench.registration --files 100 --calls 5

Each call registers ``--files`` episodes into a new dataset with the command core's steps
(``commands.register``'s, which ``DatasetEntry.register`` and the endpoint run), each timed,
then waits for it.
The stack is the embedded one, without the endpoint of Rerun's protocol. Compare stages within
one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import commands
from bench.profile import BATCH_LINE
from bench.recordings import RecordingPool
from commands import writes_for
from recordings import (
    ObjectStore,
    ObjectStoreConfig,
    WorkerPool,
    object_store,
    read_recording,
    read_recordings,
)
from stack import Server


def _footer_ms(uri: str, objects: ObjectStore) -> float:
    """The milliseconds of one read of ``uri``'s facts in this process."""
    started = time.perf_counter()
    read_recording(uri, objects)
    return (time.perf_counter() - started) * 1000


def _batches_after(log: Path, offset: int) -> tuple[list[tuple[int, int, int]], int]:
    """The (records, fetch ms, fold and commit ms) of the projector's batches logged after byte
    ``offset`` of its log, with records; and the log's new end."""
    text = log.read_text()
    rows = [(int(m.group(2)), int(m.group(3)), int(m.group(4))) for m in BATCH_LINE.finditer(text[offset:])]
    return [row for row in rows if row[0] > 0], len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100, help="episodes per call (default 100)")
    parser.add_argument("--calls", type=int, default=5,
                        help="measured calls (default 5), after one unmeasured")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the episodes and the stack go (default: a temporary directory)")
    args = parser.parse_args()
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="strata-bench-registration-"))
    uris = RecordingPool(work / "recordings").episodes(args.files)
    objects = object_store(ObjectStoreConfig.resolve())

    footer = [_footer_ms(uri, objects) for uri in uris * 2][len(uris):]  # the second read of each
    pool = WorkerPool(args.workers)
    pool.start()
    request = commands.request(uris, "base", "error", None)
    stages = ("read", "build", "producer", "wait", "fetch", "fold", "batches")
    rows: dict[str, list[float]] = {name: [] for name in stages}
    with Server(work / "stack", protocol_port=None) as server:
        client = server.client()
        log = client._internal.log
        for call in range(args.calls + 1):
            dataset = client.create_dataset(f"registration-{uuid.uuid4().hex[:8]}")
            time.sleep(0.3)  # the dataset's own batch, logged after its commit, is not the call's
            _, offset = _batches_after(server.projector_log, 0)
            started = time.perf_counter()
            recordings = read_recordings(uris, objects, pool)
            read = time.perf_counter()
            writes, schemas = writes_for(recordings, request.layer_names, request.on_duplicate)
            built = time.perf_counter()
            submitted = log.submit(dataset.id, writes, schemas=schemas)
            sent = time.perf_counter()
            log.wait([write.positions[-1] for write in submitted], 60)
            waited = time.perf_counter()
            time.sleep(0.3)  # the projector logs its batch after committing it
            batches, _ = _batches_after(server.projector_log, offset)
            if call == 0:  # the workers' and the producer's first use
                continue
            for name, ms in (("read", read - started), ("build", built - read), ("producer", sent - built),
                             ("wait", waited - sent)):
                rows[name].append(ms * 1000)
            rows["fetch"].append(sum(b[1] for b in batches))
            rows["fold"].append(sum(b[2] for b in batches))
            rows["batches"].append(len(batches))
    pool.close()

    def median(name: str) -> float:
        return statistics.median(rows[name])

    n = args.files
    print(f"\n{n} DROID-like episodes a call, {args.calls} calls, {args.workers} workers (medians)\n")
    print("| stage | per call, ms | per file, ms |")
    print("|---|---:|---:|")
    table = [
        ("a file's footer read, in the caller alone", statistics.median(footer) * n),
        (f"the files read on {args.workers} warm workers (hand-off included)", median("read")),
        ("the commands built and checked", median("build")),
        ("the producer, until Kafka acknowledged", median("producer")),
        ("the wait, from Kafka's acknowledgement until the store has it", median("wait")),
        (f"  of which Spark's fetch ({median('batches'):g} micro-batch a call)", median("fetch")),
        ("  of which the fold and its commit", median("fold")),
    ]
    for name, ms in table:
        print(f"| {name} | {ms:,.0f} | {ms / n:.2f} |")


if __name__ == "__main__":
    main()
