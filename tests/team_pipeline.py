"""A pipeline host of the several-hosts test (``tests/reliability/test_several_hosts.py``), run
in its own network namespace: it creates dataset ``team-pipeline`` and produces ``--count``
RegisterLayer events into it at once with ``producers.EventProducer``, a burst that the projector
folds in large batches, on the Spark cluster's executors. It writes ``DIR/pipeline.sent`` once
every event is in Kafka, then waits until each is in the segment table, exactly once, and checks
that every record in the log was applied exactly once. Exits 0 when every check holds. Kafka
settings come from ``STRATA_KAFKA_OPTIONS``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import sdk
import settings
from stack_tools import PipelineLoad, assert_whole_log_applied_once, wait_until

WAIT_SECS = 600.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="shared with the test")
    args = parser.parse_args()
    client = sdk.CatalogClient(args.bootstrap_servers, args.store)
    dataset = client.create_dataset("team-pipeline")
    load = PipelineLoad(args.bootstrap_servers, [dataset.id], args.count, prefix="burst",
                        chunk=5_000, duration_secs=0.0, config=settings.kafka_options())
    load.start()
    load.finish(WAIT_SECS)
    (args.dir / "pipeline.sent").touch()

    def all_visible() -> bool:
        return len(dataset.segment_ids()) >= args.count

    wait_until(all_visible, WAIT_SECS, f"{args.count:,} segments")
    segments = dataset.segment_table().to_arrow_table().column("rerun_segment_id").to_pylist()
    assert sorted(segments) == [load.event(i).command.segment_id for i in range(args.count)], \
        f"{len(segments):,} segment rows, {len(set(segments)):,} distinct, for {args.count:,} events"
    assert_whole_log_applied_once(args.store, args.bootstrap_servers, WAIT_SECS,
                                  config=settings.kafka_options())
    client.close()
    print(f"pipeline: {args.count:,} registrations, each applied once")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
