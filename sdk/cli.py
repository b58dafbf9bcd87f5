"""The ``strata`` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

import settings
from spark_streaming.options import (
    add_arguments,
    add_kafka_option,
    add_max_offsets_option,
    parse_key_values,
)

ENV_HELP = settings.help_text()


def _stack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="state directory: broker log, checkpoint, store (default $STRATA_HOME "
                             "or ./.strata)")
    parser.add_argument("--bootstrap-servers", default=None,
                        help="use an existing Kafka cluster (host:port,...) instead of starting a "
                             "broker")
    parser.add_argument("--spark-master", default=None,
                        help="Spark master for the projector, e.g. spark://host:7077 (default "
                             "local[*])")
    _store_argument(parser)
    add_kafka_option(parser)


def _topic_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-finite-retention", action="store_true",
                        help="run on an existing topic that may delete records (finite retention or "
                             "compaction); a replay then misses what the broker deleted")


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", default=None, metavar="PATH|URL",
                        help="the projection store: a SQLite file, or a postgresql://user@host/db "
                             "URL (default: the running stack's, else $STRATA_STORE, else "
                             "DATA_DIR/store.db)")


def _server(args: argparse.Namespace):
    from sdk._server import Server

    return Server(args.data_dir, bootstrap_servers=args.bootstrap_servers,
                  spark_master=args.spark_master, store=args.store,
                  allow_finite_retention=args.allow_finite_retention,
                  kafka_options=parse_key_values(args.kafka_option))


def _store_location(args: argparse.Namespace) -> str:
    """The store a command works on: --store, the running stack's, $STRATA_STORE, DATA_DIR/store.db."""
    from sdk._catalog import running_stack

    if args.store is not None:
        return args.store
    data_dir = args.data_dir or settings.home()
    return running_stack(data_dir).get("store") or settings.store(data_dir)


def _describe(server) -> None:
    from projector.backends import describe

    print(f"  kafka      {server.bootstrap_servers}"
          + (f"  (embedded, log {server.broker.directory})" if server.broker else "  (external)"))
    print(f"  projector  Spark {server.spark_master}, checkpoint {server.checkpoint_dir}, "
          f"log {server.projector_log}")
    print(f"  store      {describe(server.store)}")
    print(f"  connect    sdk.CatalogClient.from_state_dir({str(server.data_dir)!r})")


def cmd_up(args: argparse.Namespace) -> int:
    server = _server(args)
    print(f"strata: starting in {server.data_dir.absolute()} ...", flush=True)
    started = time.monotonic()
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    with server:
        print(f"strata: up in {time.monotonic() - started:.1f} s", flush=True)
        _describe(server)
        print("strata: press Ctrl-C to stop", flush=True)
        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop:
            time.sleep(0.2)
        print("strata: stopping ...", flush=True)
    print("strata: stopped")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sdk import _demo

    server = _server(args)
    print(f"strata demo: starting the stack in {server.data_dir.absolute()} ...", flush=True)
    started = time.monotonic()
    with server:
        print(f"strata demo: stack up in {time.monotonic() - started:.1f} s", flush=True)
        _describe(server)
        client = server.client()
        _demo.run(client, server.data_dir / "demo-recordings", dataset_name=args.dataset)
    return 0


def cmd_projector(args: argparse.Namespace) -> int:
    from spark_streaming.__main__ import run

    return run(args)


def cmd_rejections(args: argparse.Namespace) -> int:
    from projector import StoreUnavailableError, open_store

    try:
        store = open_store(_store_location(args), read_only=True)
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None
    rejections = store.rejections()
    store.close()
    for r in rejections:
        print(f"{r.position.topic}[{r.position.partition}]@{r.position.offset}  "
              f"{len(r.raw)} bytes  {r.reason}")
    print(f"{len(rejections)} rejected records")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from projector import SqliteStore
    from projector.backends import describe
    from sdk._catalog import running_stack
    from spark_streaming.replay import rebuild, swap_into

    data_dir = args.data_dir or settings.home()
    bootstrap = (args.bootstrap_servers or running_stack(data_dir).get("bootstrap_servers")
                 or settings.bootstrap_servers())
    if bootstrap is None:
        raise SystemExit(f"strata: no running stack in {data_dir}: start it with 'strata up', or "
                         "pass --bootstrap-servers")
    kafka_options = {**settings.kafka_options(), **parse_key_values(args.kafka_option)}
    into = args.into or data_dir / "rebuild"
    print(f"strata replay: rebuilding from offset 0 of {bootstrap} into {into}", flush=True)
    started = time.monotonic()
    rebuilt = rebuild(bootstrap, into, spark_master=args.spark_master or "local[*]",
                      kafka_options=kafka_options, max_offsets_per_trigger=args.max_offsets_per_trigger)
    store = SqliteStore(rebuilt)
    counts, records = store.counts(), sum(store.next_offsets().values())
    store.close()
    print(f"strata replay: {records:,} records in {time.monotonic() - started:.1f} s -> "
          f"{counts['datasets']} datasets, {counts['segments']} segments, {counts['layers']} layers, "
          f"{counts['outcomes']} outcomes, {counts['rejections']} rejections")
    if args.swap:
        live = _store_location(args)
        caught_up = swap_into(live, rebuilt, bootstrap, kafka_options=kafka_options)
        print(f"strata replay: swapped into {describe(live)} "
              f"({caught_up} records that arrived during the rebuild caught up)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="strata",
        description="strata: an event-sourced registry of recordings. Commands go to a Kafka "
                    "log; a Spark Structured Streaming projector folds them into a SQLite "
                    "catalog that the Python SDK reads.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = commands.add_parser(
        "up", help="run the stack (Kafka broker, Spark projector, store) until Ctrl-C",
        description="Start a single-node KRaft Kafka broker (unless --bootstrap-servers), create "
                    "the topics, and run the Spark projector into the SQLite store, all under "
                    "the state directory. Running it again on the same directory resumes.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _stack_arguments(up)
    _topic_argument(up)
    up.set_defaults(func=cmd_up)

    demo = commands.add_parser(
        "demo", help="run the layers how-to of Rerun's catalog docs on the stack and print it",
        description="Start the stack, register five generated DROID-like recordings to 'base', "
                    "add 'tracking_error' and 'quality' layers, print segment_table() and "
                    "manifest(), and stop.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _stack_arguments(demo)
    _topic_argument(demo)
    demo.add_argument("--dataset", default="droid", help="dataset name (default droid)")
    demo.set_defaults(func=cmd_demo)

    proj = commands.add_parser(
        "projector", help="run only the Spark projector against an existing Kafka cluster",
        description="Run the Spark Structured Streaming projector alone, for deployments where "
                    "Kafka and Spark are clusters. Stops on SIGTERM or Ctrl-C.")
    add_arguments(proj)
    proj.set_defaults(func=cmd_projector)

    replay = commands.add_parser(
        "replay", help="rebuild the projection from offset 0 into a new store, optionally swap it in",
        description="Fold the whole log from offset 0 into a new store (default DATA_DIR/rebuild/"
                    "store.db) with Spark, showing progress and the final counts. With --swap, the "
                    "live store then becomes a copy of it, in one transaction, after catching up "
                    "on records that arrived meanwhile: nothing is lost, a running projector "
                    "carries on.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _stack_arguments(replay)
    replay.add_argument("--into", type=Path, default=None,
                        help="directory for the rebuilt store and its checkpoint (emptied first)")
    replay.add_argument("--swap", action="store_true",
                        help="make the live store (see --store) a copy of the rebuilt one")
    add_max_offsets_option(replay)
    replay.set_defaults(func=cmd_replay)

    rej = commands.add_parser(
        "rejections", help="list records the projector rejected as bad input",
        description="List every record in the rejections table: position, size and reason.")
    rej.add_argument("--data-dir", type=Path, default=None, help="state directory")
    _store_argument(rej)
    rej.set_defaults(func=cmd_rejections)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # Transient client warnings (a broker that is still starting) are retried; errors surface.
    logging.getLogger("strata.kafka").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"strata: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
