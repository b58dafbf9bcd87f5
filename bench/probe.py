"""The real projector (``python -m spark_streaming``) writing Spark's event log to
``--event-log-dir``, so benchmarks can see where a micro-batch's time goes: every
``StreamingQueryProgress`` is in it (``durationMs``: latestOffset, addBatch, walCommit, ...).

    python -m bench.probe --event-log-dir events/ --bootstrap-servers B --store S --checkpoint C

The event log is written by the JVM, off the batch's path. A Python ``StreamingQueryListener``
is not: PySpark rebuilds each progress through Py4J calls, which added 80 to 100 ms to the median
read-your-writes latency on a 2-core machine.

The projector's own ``--max-offsets-per-trigger N`` caps each micro-batch at N records, to measure
its effect on replay memory and speed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spark_streaming import __main__ as projector_main
from spark_streaming import job
from spark_streaming.options import add_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--event-log-dir", type=Path, required=True)
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.event_log_dir.mkdir(parents=True, exist_ok=True)
    # The job's getOrCreate() returns this session, so the event log covers the real query.
    job.build_session(args.spark_master, conf={
        "spark.eventLog.enabled": "true", "spark.eventLog.dir": args.event_log_dir.absolute().as_uri(),
        "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
    return projector_main.run(args)


if __name__ == "__main__":
    sys.exit(main())
