"""The real projector (``python -m spark_streaming``) with every ``StreamingQueryProgress``
written as one JSON line to ``--progress-file``, so benchmarks can see where a micro-batch's time
goes (``durationMs``: latestOffset, addBatch, walCommit, commitOffsets, ...).

    python -m bench.probe --progress-file progress.jsonl --bootstrap-servers B --store S --checkpoint C

The projector's own ``--max-offsets-per-trigger N`` caps each micro-batch at N records, to measure
its effect on replay memory and speed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.sql.streaming import StreamingQueryListener

from spark_streaming import __main__ as projector_main
from spark_streaming import job
from spark_streaming.options import add_arguments


class ProgressToFile(StreamingQueryListener):
    """Appends each query progress, as Spark's JSON, to a file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        with open(self.path, "a") as f:
            f.write(event.progress.json.replace("\n", " ") + "\n")

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--progress-file", type=Path, required=True)
    add_arguments(parser)
    args = parser.parse_args(argv)
    # The job's getOrCreate() returns this session, so the listener sees the real query.
    spark = job.build_session(args.spark_master)
    spark.streams.addListener(ProgressToFile(args.progress_file))
    return projector_main.run(args)


if __name__ == "__main__":
    sys.exit(main())
