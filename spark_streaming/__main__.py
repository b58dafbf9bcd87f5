"""``python -m spark_streaming``: run the projector until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from py4j.protocol import Py4JError

from projector import SqliteStore
from spark_streaming.job import ProjectorJob, build_session


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_streaming",
        description="Fold the strata Kafka topics into the projection store with Spark "
                    "Structured Streaming. Runs until SIGTERM or Ctrl-C.")
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--store", required=True, type=Path, help="SQLite projection store file")
    parser.add_argument("--checkpoint", required=True, type=Path,
                        help="Spark checkpoint directory (must survive restarts)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: local[*])")
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Kafka consumer setting, e.g. security.protocol=SASL_SSL (repeatable)")
    parser.add_argument("--ready-file", type=Path, default=None,
                        help="file to create once the streaming query has started")
    return parser.parse_args(argv)


def kafka_options(pairs: list[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--kafka-option expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    store = SqliteStore(args.store)
    spark = build_session(args.master)
    job = ProjectorJob(spark, args.bootstrap_servers, store, args.checkpoint,
                       kafka_options=kafka_options(args.kafka_option))
    query = job.start()
    logging.getLogger("strata.projector").info(
        "projector running: %s -> %s (checkpoint %s, master %s)",
        args.bootstrap_servers, args.store, args.checkpoint, args.master)
    if args.ready_file:
        args.ready_file.write_text(str(query.id))
    log = logging.getLogger("strata.projector")
    try:
        while not stop_requested and query.isActive:
            query.awaitTermination(0.5)
        error = query.exception()
        if query.isActive:
            query.stop()
        spark.stop()
    except Py4JError:
        # Run in a terminal, Ctrl-C reaches the Spark JVM too, and it shuts itself down.
        if not stop_requested:
            raise
        log.info("the Spark JVM stopped with the interrupt")
        error = None
    finally:
        store.close()
    if error is not None:
        print(f"projector stopped on an error: {error}", file=sys.stderr)
        return 1
    log.info("projector stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
