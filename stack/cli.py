"""The ``strata`` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import settings
from events import CATALOG_TOPIC, StrataError, import_extra
from spark_streaming.options import (
    add_arguments,
    add_kafka_option,
    add_max_offsets_option,
    parse_key_values,
)
from stack.server import Server

if TYPE_CHECKING:
    from dashboard import Dashboard
    from projector import CatalogReader, Change, Dataset, Layer
    from projector.stores.snapshots import Location

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


def _read_arguments(parser: argparse.ArgumentParser) -> None:
    """For commands that only read the store."""
    parser.add_argument("--data-dir", type=Path, default=None, help="state directory")
    _store_argument(parser)


def _server(args: argparse.Namespace) -> Server:
    """The stack the arguments describe, started."""
    return Server(args.data_dir, bootstrap_servers=args.bootstrap_servers,
                  spark_master=args.spark_master, store=args.store,
                  allow_finite_retention=args.allow_finite_retention,
                  kafka_options=parse_key_values(args.kafka_option),
                  snapshot_every=getattr(args, "snapshot_every", 0))


def _known_bootstrap(args: argparse.Namespace) -> str | None:
    """The Kafka cluster a command works on: --bootstrap-servers, the running stack's,
    $STRATA_BOOTSTRAP_SERVERS; None if none."""
    return (args.bootstrap_servers
            or settings.running_stack(args.data_dir or settings.home()).get("bootstrap_servers")
            or settings.bootstrap_servers())


def _bootstrap(args: argparse.Namespace, what_to_pass: str) -> str:
    """``_known_bootstrap``; exits with what to do if none."""
    bootstrap = _known_bootstrap(args)
    if bootstrap is None:
        raise SystemExit(f"strata: no running stack in {args.data_dir or settings.home()}: start it "
                         f"with 'strata up', or pass {what_to_pass}")
    return bootstrap


def _kafka_config(args: argparse.Namespace) -> dict[str, Any]:
    """$STRATA_KAFKA_OPTIONS with the --kafka-option settings over it."""
    return {**settings.kafka_options(), **parse_key_values(args.kafka_option)}


def _store_location(args: argparse.Namespace) -> str:
    """The store a command works on: --store, the running stack's, $STRATA_STORE, DATA_DIR/store.db."""
    if args.store is not None:
        return str(args.store)
    data_dir = args.data_dir or settings.home()
    return settings.running_stack(data_dir).get("store") or settings.store(data_dir)


def _dashboard_class() -> type[Dashboard]:
    """``dashboard.Dashboard``; one line naming the extra if the web stack is not installed."""
    for module in ("starlette", "uvicorn", "sse_starlette"):
        import_extra(module, "dashboard", "the dashboard")
    from dashboard import Dashboard

    return Dashboard


def _dashboard_arguments(parser: argparse.ArgumentParser, port_help: str) -> None:
    parser.add_argument("--host", default="127.0.0.1",
                        help="address the dashboard listens on (default 127.0.0.1: this machine only; "
                             "0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=settings.DASHBOARD_PORT,
                        help=f"{port_help} (default {settings.DASHBOARD_PORT}; 0: any free port)")
    viewer = parser.add_mutually_exclusive_group()
    viewer.add_argument("--viewer-port", type=int, default=settings.VIEWER_PORT,
                        help="port of Rerun's web viewer, served beside the dashboard on every interface, "
                             "that segment pages open their segment in (default "
                             f"{settings.VIEWER_PORT}; 0: any free port)")
    viewer.add_argument("--no-viewer", dest="viewer_port", action="store_const", const=None,
                        help="serve no web viewer: segment pages offer their segment as an .rrd download")


def _stack_dashboard(server: Server, args: argparse.Namespace) -> Dashboard:
    """The dashboard of the stack of ``server``, to serve in the background."""
    return _dashboard_class()(server.store, bootstrap_servers=server.bootstrap_servers,
                              kafka_config=server.kafka_options, host=args.host, port=args.port,
                              viewer_port=args.viewer_port)


def _describe(server: Server) -> None:
    from projector.stores import describe

    print(f"  kafka      {server.bootstrap_servers}"
          + (f"  (embedded, log {server.broker.directory})" if server.broker else "  (external)"))
    print(f"  projector  Spark {server.spark_master}, checkpoint {server.checkpoint_dir}, "
          f"log {server.projector_log}")
    print(f"  store      {describe(server.store)}")
    print(f"  connect    sdk.CatalogClient.from_state_dir({str(server.data_dir)!r})")


def _print_dashboard(dashboard: Dashboard) -> None:
    print(f"  dashboard  {dashboard.url}")
    if dashboard.viewer_port is not None:
        print(f"  viewer     Rerun's web viewer on port {dashboard.viewer_port} (segment pages open it)")


def cmd_up(args: argparse.Namespace) -> int:
    print(f"strata: starting in {(args.data_dir or settings.home()).absolute()} ...", flush=True)
    started = time.monotonic()
    server = _server(args)
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    with server, _stack_dashboard(server, args) as dashboard:
        print(f"strata: up in {time.monotonic() - started:.1f} s", flush=True)
        _describe(server)
        _print_dashboard(dashboard)
        print("strata: press Ctrl-C to stop", flush=True)
        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop:
            time.sleep(0.2)
        print("strata: stopping ...", flush=True)
    print("strata: stopped")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from stack import demo

    print(f"strata demo: starting the stack in {(args.data_dir or settings.home()).absolute()} ...",
          flush=True)
    started = time.monotonic()
    server = _server(args)
    with server, _stack_dashboard(server, args) as dashboard:
        print(f"strata demo: stack up in {time.monotonic() - started:.1f} s", flush=True)
        _describe(server)
        _print_dashboard(dashboard)
        client = server.client()
        demo.run(client, server.data_dir / "demo-recordings", dataset_name=args.dataset)
        shown = demo.on_dashboard(dashboard.url, args.dataset)
    print(f"\nstrata demo: stack stopped. The dashboard showed {shown}; to see it again, run\n"
          f"  strata dashboard --data-dir {server.data_dir} --port {dashboard.port}\n"
          f"and open {dashboard.url}/datasets/{args.dataset}")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    _read_store(args).close()  # a store that cannot be read fails here, in one line
    bootstrap = _known_bootstrap(args)
    dashboard = _dashboard_class()(_store_location(args), bootstrap_servers=bootstrap,
                                   kafka_config=_kafka_config(args), host=args.host, port=args.port,
                                   viewer_port=args.viewer_port)
    lag = f"lag against Kafka at {bootstrap}" if bootstrap else "no Kafka cluster known: lag unknown"
    viewer = "" if dashboard.viewer_port is None else f"; Rerun's web viewer on port {dashboard.viewer_port}"
    print(f"strata dashboard: {dashboard.url}  ({lag}){viewer}; Ctrl-C to stop", flush=True)
    dashboard.serve()
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


def _read_store(args: argparse.Namespace) -> CatalogReader:
    """The store of ``args``, opened read-only; exits with one line if it cannot be."""
    from projector import StoreUnavailableError, open_store

    try:
        return open_store(_store_location(args), read_only=True)
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None


def _dataset(store: CatalogReader, name: str) -> Dataset:
    dataset = store.dataset_by_name(name)
    if dataset is None:
        known = ", ".join(d.name for d in store.datasets() if not d.hidden) or "none yet"
        raise SystemExit(f"strata: no dataset named {name!r} (datasets: {known})")
    return dataset


def _print_table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    cells = [tuple(map(str, header)), *[tuple(map(str, row)) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _size(size_bytes: int) -> str:
    size = float(size_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"


def cmd_datasets(args: argparse.Namespace) -> int:
    from projector.views import datasets_table

    store = _read_store(args)
    try:
        table = datasets_table(store)
    finally:
        store.close()
    _print_table(("DATASET", "SEGMENTS", "LAYERS", "SIZE", "UPDATED (UTC)", "ID"), [
        (d["name"], d["segments"], d["layers"], _size(d["size_bytes"]),
         f"{d['updated_at']:%Y-%m-%d %H:%M:%S}", d["id"]) for d in table.to_pylist()])
    print(f"{table.num_rows} datasets")
    return 0


def _at(store: CatalogReader, name: str, point: str) -> CatalogReader:
    """``store`` as of ``point`` (``views.at_point``); exits with one line if it names nothing."""
    from projector.views import at_point

    try:
        return at_point(store, _dataset(store, name).id, point)
    except (ValueError, LookupError) as exc:
        raise SystemExit(f"strata: {exc}") from None


def cmd_segments(args: argparse.Namespace) -> int:
    store = _read_store(args)
    try:
        reader = store if args.as_of is None else _at(store, args.name, args.as_of)
        dataset = _dataset(reader, args.name)
        by_segment: dict[str, list[Layer]] = {}
        for layer in reader.layers(dataset.id):
            by_segment.setdefault(layer.segment_id, []).append(layer)
    finally:
        store.close()
    _print_table(("SEGMENT", "LAYERS", "SIZE", "LAST REGISTERED (UTC)"), [
        (segment_id, ",".join(x.layer_name for x in layers), _size(sum(x.size_bytes for x in layers)),
         f"{max(x.registered_at for x in layers):%Y-%m-%d %H:%M:%S}")
        for segment_id, layers in by_segment.items()])
    point = "" if args.as_of is None else f" as of {args.as_of}"
    print(f"{len(by_segment)} segments in {dataset.name}{point}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from projector.views import diff_table

    store = _read_store(args)
    try:
        dataset = _dataset(store, args.name)
        table = diff_table(_at(store, args.name, args.before),
                           store if args.after is None else _at(store, args.name, args.after), dataset.id)
    finally:
        store.close()
    _print_table(("SEGMENT", "LAYER", "CHANGE", "FROM", "TO"), [
        (c["rerun_segment_id"], c["rerun_layer_name"] or c["property"] or "-", c["change"],
         c["old_storage_url"] or c["old_value"] or "-", c["new_storage_url"] or c["new_value"] or "-")
        for c in table.to_pylist()])
    print(f"{table.num_rows} changes in {args.name} from {args.before} to {args.after or 'now'}")
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    store = _read_store(args)
    try:
        tags = store.tags(_dataset(store, args.name).id)
    finally:
        store.close()
    _print_table(("TAG", "OFFSET", "CREATED (UTC)"),
                 [(t.name, t.offset, f"{t.created_at:%Y-%m-%d %H:%M:%S}") for t in tags])
    print(f"{len(tags)} tags of {args.name}")
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    from sdk import AlreadyExistsError, CatalogClient

    bootstrap = _bootstrap(args, "--bootstrap-servers and --store")
    kafka_config = parse_key_values(args.kafka_option)
    with CatalogClient(bootstrap, _store_location(args), kafka_config=kafka_config) as client:
        dataset = client.get_dataset(args.name)
        point = None if args.at is None else (int(args.at) if args.at.isdigit() else _utc(args.at))
        try:
            tag = dataset.create_tag(args.tag, point)
        except (AlreadyExistsError, ValueError) as exc:
            raise SystemExit(f"strata: {exc}") from None
    print(f"{tag.name}\t{tag.offset}")
    return 0


def _utc(text: str) -> datetime:
    """An ISO time, UTC unless it says otherwise; exits with one line if it is not one."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SystemExit(f"strata: --at {text!r} is neither an offset nor an ISO time "
                         "(2026-03-03T12:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _change_line(change: Change) -> str:
    where = "/".join(part for part in (change.segment_id, change.layer_name) if part)
    committed = f"{change.committed_at:%H:%M:%S.%f}"[:-3] if change.committed_at else ""
    return "  ".join(part for part in (
        f"{change.position.offset:>8}", committed, f"{change.kind:<21}", change.entry_name or "-", where,
        change.detail) if part).rstrip()


def cmd_watch(args: argparse.Namespace) -> int:
    from projector import feed

    store = _read_store(args)
    try:
        entry_id = _dataset(store, args.name).id if args.name else None
        try:
            after = feed.start(store, args.since)
        except ValueError as exc:
            raise SystemExit(f"strata: {exc}") from None
        scope = f"dataset {args.name}" if args.name else "the catalog"
        start = "from now" if args.since is None else f"from offset {args.since}"
        print(f"strata watch: changes of {scope} {start}; Ctrl-C to stop", file=sys.stderr, flush=True)
        try:
            for change in feed.follow(store, after, entry_id=entry_id):
                print(_change_line(change), flush=True)
        except KeyboardInterrupt:
            pass
    finally:
        store.close()
    return 0


def _as_uri(value: str) -> str:
    """A URI as given, or a local path as a file:// URI."""
    return value if "://" in value else Path(value).absolute().as_uri()


def _progress(done: int, total: int, failed: int, started: float) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    filled = width * done // total
    note = f", {failed} failed" if failed else ""
    print(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{note} "
          f"{time.monotonic() - started:.1f} s", end="" if done < total else "\n",
          file=sys.stderr, flush=True)


def cmd_register(args: argparse.Namespace) -> int:
    from sdk import CatalogClient

    bootstrap = _bootstrap(args, "--bootstrap-servers and --store")
    if args.batch_size < 1:
        raise SystemExit(f"strata: --batch-size must be at least 1, got {args.batch_size}")
    uris = [_as_uri(u) for u in args.uris]
    with CatalogClient(bootstrap, _store_location(args),
                       kafka_config=parse_key_values(args.kafka_option)) as client:
        dataset = client.get_dataset(args.name)
        print(f"strata register: {len(uris)} recordings into {dataset.name}, layer {args.layer}",
              file=sys.stderr, flush=True)
        started, failures = time.monotonic(), []
        for first in range(0, len(uris), args.batch_size):
            chunk = uris[first:first + args.batch_size]
            operation = dataset.register(chunk, layer_name=args.layer, on_duplicate=args.on_duplicate)
            for result in operation.iter_results(timeout_secs=args.timeout):
                if result.is_error:
                    failures.append(result)
                else:
                    print(f"{result.segment_id}\t{result.uri}")
            _progress(first + len(chunk), len(uris), len(failures), started)
    for result in failures:
        print(f"strata register: {result.uri}: {result.error}", file=sys.stderr)
    print(f"strata register: {len(uris) - len(failures)} registered, {len(failures)} failed in "
          f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    return 1 if failures else 0


def cmd_replay(args: argparse.Namespace) -> int:
    from projector.stores import describe, snapshots
    from projector.stores.sqlite import SqliteStore
    from spark_streaming.replay import rebuild, swap_into

    data_dir = args.data_dir or settings.home()
    bootstrap = _bootstrap(args, "--bootstrap-servers")
    kafka_options = _kafka_config(args)
    into = args.into or data_dir / "rebuild"
    snapshot = None
    if args.from_snapshot is not None:
        kept = _snapshot_location(args.from_snapshot or data_dir / "snapshots")
        try:
            snapshot = snapshots.newest(kept, lambda line: print(f"strata replay: {line}", flush=True))
        except OSError as exc:
            raise SystemExit(f"strata replay: cannot list the snapshots in {kept.url}: {exc}") from None
        if snapshot is None:
            print(f"strata replay: no usable snapshot in {kept.url}: rebuilding from offset 0", flush=True)
    start = 0 if snapshot is None else snapshot.next_offsets().get((CATALOG_TOPIC, 0), 0)
    origin = "offset 0" if snapshot is None else f"{snapshot.url} (offset {start})"
    print(f"strata replay: rebuilding from {origin} of {bootstrap} into {into}", flush=True)
    started = time.monotonic()
    rebuilt = rebuild(bootstrap, into, spark_master=args.spark_master or "local[*]",
                      kafka_options=kafka_options, max_offsets_per_trigger=args.max_offsets_per_trigger,
                      snapshot=snapshot)
    store = SqliteStore(rebuilt)
    counts, records = store.counts(), sum(store.next_offsets().values())
    store.close()
    print(f"strata replay: {records - start:,} records in {time.monotonic() - started:.1f} s -> "
          f"{counts['datasets']} datasets, {counts['segments']} segments, {counts['layers']} layers, "
          f"{counts['outcomes']} outcomes, {counts['rejections']} rejections")
    if args.swap:
        live = _store_location(args)
        caught_up = swap_into(live, rebuilt, bootstrap, kafka_options=kafka_options)
        print(f"strata replay: swapped into {describe(live)} "
              f"({caught_up} records that arrived during the rebuild caught up)")
    return 0


def _snapshot_location(where: str | Path) -> Location:
    """Where snapshots are kept, from a directory or an ``s3://`` URL; exits with one line if the
    URL cannot be one."""
    from changelog.snapshots import location

    try:
        return location(where)
    except ValueError as exc:
        raise SystemExit(f"strata: {exc}") from None


def cmd_snapshot(args: argparse.Namespace) -> int:
    from projector import StoreUnavailableError, open_store
    from projector.stores import snapshots

    kept = _snapshot_location(args.to or (args.data_dir or settings.home()) / "snapshots")
    try:
        store = open_store(_store_location(args), read_only=True)
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None
    started = time.monotonic()
    try:
        written = snapshots.write(store, kept)
    except OSError as exc:
        raise SystemExit(f"strata snapshot: cannot write into {kept.url}: {exc}") from None
    finally:
        store.close()
    snapshot = snapshots.Snapshot(written)
    rows = sum(snapshot.manifest["tables"].values())
    offset = snapshot.next_offsets().get((CATALOG_TOPIC, 0), 0)
    print(f"{written.url}\t{rows:,} rows at offset {offset} in {time.monotonic() - started:.1f} s")
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
        "up", help="run the stack (Kafka broker, Spark projector, store, dashboard) until Ctrl-C",
        description="Start a single-node KRaft Kafka broker (unless --bootstrap-servers), create "
                    "the topics, and run the Spark projector into the SQLite store, all under "
                    "the state directory, and serve the dashboard (see 'strata dashboard --help'). "
                    "Running it again on the same directory resumes.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _stack_arguments(up)
    _topic_argument(up)
    _dashboard_arguments(up, "port of the dashboard it serves")
    up.add_argument("--snapshot-every", type=int, default=0, metavar="N",
                    help="have the projector write a snapshot into DATA_DIR/snapshots each time N "
                         "more records are folded (default 0: never)")
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
    _dashboard_arguments(demo, "port of the dashboard it serves while it runs")
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
    replay.add_argument("--from-snapshot", nargs="?", const="", default=None, metavar="DIR|s3://...",
                        help="start from the newest usable snapshot in DIR or under an s3:// prefix "
                             "(default DATA_DIR/snapshots) and fold only the log after it")
    add_max_offsets_option(replay)
    replay.set_defaults(func=cmd_replay)

    snapshot = commands.add_parser(
        "snapshot", help="write the projection at one offset, to rebuild from it later",
        description="Write every table of the store (history included) as of one commit into "
                    "DIR/snapshot-<offset> (default DATA_DIR/snapshots) or under an s3:// prefix "
                    "(through the AWS variables): Arrow files and a manifest naming the offset and "
                    "the store format. 'strata replay --from-snapshot' starts from the newest usable "
                    "one; 'strata projector --snapshot-every N' writes them as it folds. Reads the "
                    "store only.")
    snapshot.add_argument("--to", default=None, metavar="DIR|s3://BUCKET/PREFIX",
                          help="where snapshots are kept")
    _read_arguments(snapshot)
    snapshot.set_defaults(func=cmd_snapshot)

    rej = commands.add_parser(
        "rejections", help="list records the projector rejected as bad input",
        description="List every record in the rejections table: position, size and reason.")
    _read_arguments(rej)
    rej.set_defaults(func=cmd_rejections)

    datasets = commands.add_parser(
        "datasets", help="list the datasets with their segment and layer counts",
        description="List the catalog's datasets: segments, layers, their total size, when each "
                    "last changed, and its id. Reads the store only.")
    _read_arguments(datasets)
    datasets.set_defaults(func=cmd_datasets)

    segments = commands.add_parser(
        "segments", help="list a dataset's segments and their layers",
        description="List the segments of dataset NAME in registration order, with their layer "
                    "names, total size and last registration. Reads the store only.")
    segments.add_argument("name", metavar="NAME", help="the dataset")
    segments.add_argument("--as-of", metavar="POINT", default=None,
                          help="the dataset as of a log offset or one of its tags (strata tags NAME)")
    _read_arguments(segments)
    segments.set_defaults(func=cmd_segments)

    tags = commands.add_parser(
        "tags", help="list a dataset's tags",
        description="List the tags of dataset NAME: each names a point of its history (a log "
                    "offset) that 'strata segments NAME --as-of TAG' and dataset.as_of(TAG) read. "
                    "Reads the store only.")
    tags.add_argument("name", metavar="NAME", help="the dataset")
    _read_arguments(tags)
    tags.set_defaults(func=cmd_tags)

    diff = commands.add_parser(
        "diff", help="what changed in a dataset between two points",
        description="List what changed in dataset NAME from point A to point B (default: now), "
                    "each a log offset or one of its tags: segments added and removed, layers "
                    "added, removed and replaced (with both URLs), properties changed (both values). "
                    "Reads the store only.")
    diff.add_argument("name", metavar="NAME", help="the dataset")
    diff.add_argument("before", metavar="A", help="the earlier point: a log offset or a tag")
    diff.add_argument("after", metavar="B", nargs="?", default=None, help="the later point (default: now)")
    _read_arguments(diff)
    diff.set_defaults(func=cmd_diff)

    tag = commands.add_parser(
        "tag", help="name a point of a dataset's history",
        description="Create tag TAG of dataset NAME at --at (a log offset or an ISO time, UTC unless "
                    "it says otherwise; default: the catalog now). Prints 'tag<TAB>offset'. A tag is "
                    "a command in the log; a taken name fails (delete it with the SDK to move it).",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    tag.add_argument("name", metavar="NAME", help="the dataset")
    tag.add_argument("tag", metavar="TAG", help="the tag's name")
    tag.add_argument("--at", metavar="POINT", default=None, help="a log offset or an ISO time (default: now)")
    tag.add_argument("--data-dir", type=Path, default=None, help="state directory")
    tag.add_argument("--bootstrap-servers", default=None,
                     help="Kafka bootstrap servers (default: the running stack's)")
    _store_argument(tag)
    add_kafka_option(tag)
    tag.set_defaults(func=cmd_tag)

    register = commands.add_parser(
        "register", help="register recordings into a dataset, with progress",
        description="Register recordings (file:// or s3:// URIs, or local paths) as layer LAYER "
                    "of their segments in dataset NAME, waiting for the projection to apply them. "
                    "Prints 'segment<TAB>uri' per registered recording; failures go to stderr and "
                    "make the exit code 1.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    register.add_argument("name", metavar="NAME", help="the dataset")
    register.add_argument("uris", metavar="URI", nargs="+", help="recordings to register")
    register.add_argument("--layer", default="base", help="layer name (default base)")
    register.add_argument("--on-duplicate", default="error", choices=["error", "skip", "replace"],
                          help="when the segment already has the layer: fail that recording "
                               "(default), skip it, or replace the layer")
    register.add_argument("--batch-size", type=int, default=100,
                          help="recordings per registration call (default 100)")
    register.add_argument("--timeout", type=float, default=60.0,
                          help="seconds to wait for each call's projection (default 60)")
    register.add_argument("--data-dir", type=Path, default=None, help="state directory")
    register.add_argument("--bootstrap-servers", default=None,
                          help="Kafka bootstrap servers (default: the running stack's)")
    _store_argument(register)
    add_kafka_option(register)
    register.set_defaults(func=cmd_register)

    watch = commands.add_parser(
        "watch", help="print the catalog's changes as they happen",
        description="Follow the change feed: one line per change (log offset, commit time, kind, "
                    "dataset or table, segment/layer, detail) until Ctrl-C. With NAME, only that "
                    "dataset's changes.")
    watch.add_argument("name", metavar="NAME", nargs="?", default=None, help="a dataset (default: all)")
    watch.add_argument("--since", type=int, default=None, metavar="OFFSET",
                       help="start with the changes of the records from this log offset (0: all); "
                            "default: only changes still to come")
    _read_arguments(watch)
    watch.set_defaults(func=cmd_watch)

    dash = commands.add_parser(
        "dashboard", help="serve a live page of the catalog until Ctrl-C",
        description="Serve the catalog's live page: datasets, a dataset's segment table, "
                    "registrations and rejections per second, the projection's lag, the rejections "
                    "and the recent changes, updated as the projector commits. The same data as "
                    "JSON under /api/... and as Arrow IPC streams under /api/....arrow; the change "
                    "feed as Server-Sent Events at /events. Reads the store only.",
        epilog=ENV_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _read_arguments(dash)
    dash.add_argument("--bootstrap-servers", default=None,
                      help="Kafka cluster to measure the lag against (default: the running stack's)")
    add_kafka_option(dash)
    _dashboard_arguments(dash, "port to serve on")
    dash.set_defaults(func=cmd_dashboard)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # Transient client warnings (a broker that is still starting) are retried; errors surface.
    logging.getLogger("strata.kafka").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except (StrataError, RuntimeError, ValueError, OSError, LookupError) as exc:
        print(f"strata: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
