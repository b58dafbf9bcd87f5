"""``python -m spark_streaming``: run the projector until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import StreamingQueryException

import settings
from producers import wait_for_topics
from projector import StoreUnavailableError, open_store
from projector.stores import fault_advice, scheme
from spark_streaming.options import add_arguments, java_config, parse_key_values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m spark_streaming",
        description="Fold the strata Kafka topics into the projection store with Spark "
                    "Structured Streaming. Runs until SIGTERM or Ctrl-C.")
    add_arguments(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))


TOPICS_TIMEOUT_SECS = 240.0
"""How long the projector waits for the broker and its topics before giving up (exit code 1)."""

STORE_FAULT_EXIT_CODE = 2
"""The exit code when the store cannot be opened or written (read-only, full): fix it, restart."""
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
"""The projector's log lines, and its changelog relay's."""


def run(args: argparse.Namespace) -> int:
    """Run the projector with parsed ``options.add_arguments`` until SIGTERM or Ctrl-C.

    Returns 0 after a requested stop, ``STORE_FAULT_EXIT_CODE`` if the store cannot be opened or
    a batch cannot be written to it (one line on stderr says what to do), 1 on any other error.
    """
    from spark_streaming.job import ProjectorJob, build_session

    try:
        kafka_options = {**settings.kafka_options(), **parse_key_values(args.kafka_option)}
        java_config(kafka_options)  # settings Spark could not take fail here, in one line
        snapshots_at = snapshot_location(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=LOG_FORMAT)
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    log = logging.getLogger("strata.projector")
    try:
        store = open_store(args.store)
    except StoreUnavailableError as exc:
        log.error("cannot open the projection store, nothing was read: %s. %s, then start the "
                  "projector again.", exc, fault_advice(args.store))
        return STORE_FAULT_EXIT_CODE
    spark = build_session(args.spark_master)
    # Started beside its broker (sdk.Server starts both at once), the projector builds its Spark
    # session while the broker starts, and reads once the topics are there.
    try:
        wait_for_topics(args.bootstrap_servers, config=kafka_options, timeout_secs=TOPICS_TIMEOUT_SECS)
    except ConnectionError as exc:
        spark.stop()
        store.close()
        print(f"projector stopped on an error: {exc} (nothing was read)", file=sys.stderr)
        return 1
    # PostgreSQL takes a writer per task: large batches are folded where Spark runs their tasks.
    job = ProjectorJob(spark, args.bootstrap_servers, store, args.checkpoint,
                       kafka_options=kafka_options,
                       max_offsets_per_trigger=args.max_offsets_per_trigger,
                       executor_store=args.store if scheme(args.store) == "postgresql" else None)
    query = job.start()
    relay = None
    if args.changelog:
        # The relay reads the store like a client and publishes what the query commits.
        from changelog.relay import RelayProcess

        relay = RelayProcess(args.store, args.bootstrap_servers, config=kafka_options, log_format=LOG_FORMAT)
        relay.start()
    mirror = _lance_mirror(args.store, log)
    indexer = _search_follower(args.store, log)
    snapshotter = _snapshotter(args.store, snapshots_at, args.snapshot_every) if snapshots_at else None
    log.info(
        "projector running: %s -> %s (checkpoint %s, master %s)",
        args.bootstrap_servers, store.location, args.checkpoint, args.spark_master)
    if args.ready_file:
        args.ready_file.write_text(str(query.id))
    try:
        while not stop_requested and query.isActive and not job.fold_failed():
            try:
                # pyspark annotates an int but takes a float: it waits int(timeout * 1000) ms.
                query.awaitTermination(0.5)  # type: ignore[arg-type]
            except StreamingQueryException:
                break  # the query failed; query.exception() below says why
        error: Exception | None = query.exception()
        if query.isActive:
            query.stop()
        try:
            job.finish()  # the batch the folding thread holds: committed, or why not
        except Exception as exc:  # noqa: BLE001 - a store fault is in job.store_fault, anything else said below
            error = error or exc
        spark.stop()
    except Py4JError:
        # Run in a terminal, Ctrl-C reaches the Spark JVM too, and it shuts itself down.
        if not stop_requested:
            raise
        log.info("the Spark JVM stopped with the interrupt")
        error = None
    finally:
        if relay is not None:
            relay.stop()
        for follower in (mirror, indexer, snapshotter):
            if follower is not None:
                follower.stop()
                follower.store.close()
        store.close()
    if job.store_fault is not None:
        # The batch's Python traceback is in Spark's log above; this is what the operator needs.
        log.error("projector stopped: %s", job.store_fault)
        return STORE_FAULT_EXIT_CODE
    if error is not None:
        # Its first line is the cause; the rest describes the query (Spark logged it already).
        print(f"projector stopped on an error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 1
    log.info("projector stopped")
    return 0


def snapshot_location(args: argparse.Namespace) -> str | None:
    """Where ``--snapshot-every`` writes: ``--snapshots``, else beside a SQLite store. ``ValueError``
    without a place to write to."""
    if not args.snapshot_every:
        return None
    if args.snapshots:
        return str(args.snapshots)
    if scheme(args.store) != "sqlite":
        raise ValueError("--snapshot-every with a PostgreSQL store needs --snapshots DIR|s3://BUCKET/PREFIX")
    return str(Path(args.store).absolute().parent / "snapshots")


def _snapshotter(store: str, where: str, every: int) -> Any:
    """The thread that writes a snapshot every ``every`` records into ``where``."""
    from changelog.snapshots import Snapshotter, location

    snapshotter = Snapshotter(open_store(store, read_only=True), location(where), every)
    snapshotter.start()
    return snapshotter


def _lance_mirror(location: str, log: logging.Logger) -> Any:
    """The thread that keeps the Lance copies of tables created with a ``url``; None (said once)
    without ``strata[lance]``, whose tables then have no copy."""
    try:
        import lance  # noqa: F401
    except ImportError:
        log.warning("pylance is not installed (pip install 'strata[lance]'): tables created with a "
                    "url get no Lance copy there")
        return None
    from changelog.lance_mirror import LanceMirror

    mirror = LanceMirror(open_store(location, read_only=True))
    mirror.start()
    return mirror


def _search_follower(location: str, log: logging.Logger) -> Any:
    """The thread that keeps the search indexes; None (said once) without ``strata[lance]``, or
    for a PostgreSQL store without ``STRATA_SEARCH_URL``: its searches then wait in vain."""
    try:
        import lance  # noqa: F401

        root = settings.search_indexes(location)
    except ImportError:
        log.warning("pylance is not installed (pip install 'strata[lance]'): search indexes are not kept")
        return None
    except ValueError as exc:
        log.warning("search indexes are not kept: %s", exc)
        return None
    from changelog.search_follower import SearchFollower

    follower = SearchFollower(open_store(location, read_only=True), root)
    follower.start()
    return follower


if __name__ == "__main__":
    sys.exit(main())
