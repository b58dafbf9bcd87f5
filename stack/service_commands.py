"""The ``strata`` commands that run or maintain services: ``up`` and ``demo`` (a whole stack, with
its dashboard), ``dashboard``, ``serve`` (Rerun's catalog protocol) and ``token`` (its tokens),
``projector``, ``replay`` and ``snapshot``. Each uses the public
names of the room that owns the service (``stack.server``, ``dashboard``, ``protocol``,
``spark_streaming``, ``changelog``, and the store's public functions in ``projector``) and writes through
``stack.output``. What a command needs is imported when it runs: the other commands load
neither Spark nor the web stack.
"""

from __future__ import annotations

import argparse
import base64
import logging
import secrets
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import settings
from events import CATALOG_TOPIC, import_extra
from stack import output
from stack.cli_options import cluster, data_dir, kafka_config, known_cluster, protocol_tls, store_location

if TYPE_CHECKING:
    from dashboard import Dashboard
    from projector.stores.snapshots import Location
    from protocol import ProtocolServer
    from stack.server import Server


def _server(args: argparse.Namespace, *, protocol_tls: tuple[Path, Path] | None = None) -> Server:
    """The stack the arguments describe, started (``protocol_tls``: its endpoint's certificate
    and key)."""
    from stack.server import Server

    # strata up's --protocol-port or --no-protocol; strata demo, which has neither, serves none.
    protocol_port = getattr(args, "protocol_port", None)
    web_port = None if protocol_port is None else getattr(args, "protocol_web_port", None)  # beside it
    return Server(args.data_dir, bootstrap_servers=args.bootstrap_servers, spark_master=args.spark_master,
                  store=args.store, allow_finite_retention=args.allow_finite_retention,
                  kafka_options=kafka_config(args), snapshot_every=getattr(args, "snapshot_every", 0),
                  protocol_port=protocol_port, protocol_tls=protocol_tls, protocol_web_port=web_port)


def _dashboard_class() -> type[Dashboard]:
    """``dashboard.Dashboard``; one line naming the extra if the web stack is not installed."""
    for module in ("starlette", "uvicorn", "sse_starlette"):
        import_extra(module, "dashboard", "the dashboard")
    from dashboard import Dashboard

    return Dashboard


def _stack_dashboard(server: Server, args: argparse.Namespace) -> Dashboard:
    """The dashboard of the stack of ``server``, to serve in the background."""
    return _dashboard_class()(server.store, bootstrap_servers=server.bootstrap_servers,
                              kafka_config=server.kafka_options, host=args.host, port=args.port,
                              viewer_port=args.viewer_port, catalog_url=server.protocol_web_url)


def _describe(server: Server, dashboard: Dashboard) -> None:
    """Where the parts of a running stack are, and how to connect to it."""
    from projector.stores import describe

    output.say(f"  kafka      {server.bootstrap_servers}"
               + (f"  (embedded, log {server.broker.directory})" if server.broker else "  (external)"))
    output.say(f"  projector  Spark {server.spark_master}, checkpoint {server.checkpoint_dir}, "
               f"log {server.projector_log}")
    output.say(f"  store      {describe(server.store)}")
    output.say(f"  connect    sdk.CatalogClient.from_state_dir({str(server.data_dir)!r})")
    output.say(f"  dashboard  {dashboard.url}")
    if server.protocol_url is not None:
        output.say(f"  protocol   {server.protocol_url}  (rr.catalog.CatalogClient({server.protocol_url!r}), "
                   f"log {server.protocol_log})")
    if server.protocol_web_url is not None:
        output.say(f"  gRPC-web   {server.protocol_web_url}  (Rerun's web viewer's ?url=)")
    if dashboard.viewer_port is not None:
        through = " through the catalog" if server.protocol_web_url is not None else ""
        output.say(f"  viewer     Rerun's web viewer on port {dashboard.viewer_port} (segment pages open "
                   f"their segment in it{through})")


def up(args: argparse.Namespace) -> int:
    """``strata up``: runs the stack, its dashboard and (unless ``--no-protocol``) Rerun's catalog
    protocol (over TLS with ``--tls-cert`` and ``--tls-key``) until SIGINT or SIGTERM."""
    tls = protocol_tls(args)  # a certificate without its key fails before anything starts
    output.say(f"strata: starting in {data_dir(args).absolute()} ...")
    started = time.monotonic()
    server = _server(args, protocol_tls=tls)
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    with server, _stack_dashboard(server, args) as dashboard:
        output.say(f"strata: answering reads after {time.monotonic() - started:.1f} s")
        _describe(server, dashboard)
        server.ready()  # on a catalog already there, Kafka and Spark start behind the reads
        output.say(f"strata: up in {time.monotonic() - started:.1f} s (writes are taken and projected)")
        output.say("strata: press Ctrl-C to stop")
        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stop:
            time.sleep(0.2)
        output.say("strata: stopping ...")
    output.say("strata: stopped")
    return 0


def demo(args: argparse.Namespace) -> int:
    """``strata demo``: runs the stack, the layers how-to on it and its dashboard, then stops."""
    from stack import demo

    output.say(f"strata demo: starting the stack in {data_dir(args).absolute()} ...")
    started = time.monotonic()
    server = _server(args)
    with server, _stack_dashboard(server, args) as dashboard:
        server.ready()  # the demo writes at once: the whole stack first
        output.say(f"strata demo: stack up in {time.monotonic() - started:.1f} s")
        _describe(server, dashboard)
        client = server.client()
        demo.run(client, server.data_dir / "demo-recordings", dataset_name=args.dataset)
        shown = demo.on_dashboard(dashboard.url, args.dataset)
    output.say(f"\nstrata demo: stack stopped. The dashboard showed {shown}; to see it again, run\n"
               f"  strata dashboard --data-dir {server.data_dir} --port {dashboard.port}\n"
               f"and open {dashboard.url}/datasets/{args.dataset}")
    return 0


def _check_store(location: str) -> None:
    """Opens the store at ``location`` read-only and closes it: one that cannot be read exits
    here, in one line."""
    from projector import StoreUnavailableError, open_store

    try:
        open_store(location, read_only=True).close()
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None


def dashboard(args: argparse.Namespace) -> int:
    """``strata dashboard``: serves the live page of a store until Ctrl-C. Exits with one line if
    the store cannot be read."""
    location = store_location(args)
    _check_store(location)
    bootstrap = known_cluster(args)
    served = _dashboard_class()(location, bootstrap_servers=bootstrap, kafka_config=kafka_config(args),
                                host=args.host, port=args.port, viewer_port=args.viewer_port)
    lag = f"lag against Kafka at {bootstrap}" if bootstrap else "no Kafka cluster known: lag unknown"
    viewer = "" if served.viewer_port is None else f"; Rerun's web viewer on port {served.viewer_port}"
    output.say(f"strata dashboard: {served.url}  ({lag}){viewer}; Ctrl-C to stop")
    served.serve()
    return 0


def serve(args: argparse.Namespace) -> int:
    """``strata serve``: serves Rerun's catalog protocol on the catalog until SIGINT or SIGTERM
    (``protocol.endpoint.run``, as ``python -m protocol``). Exits with one line if the store
    cannot be read or the address cannot be bound; a catalog without a Kafka cluster known is
    served read-only."""
    import_extra("grpc", "protocol", "serving Rerun's catalog protocol")
    from projector import StoreUnavailableError
    from protocol.endpoint import run

    def announce(served: ProtocolServer, bootstrap: str | None) -> None:
        writes = f"writes through Kafka at {bootstrap}" if bootstrap else "read-only: no Kafka cluster known"
        if served.catalog is not None and served.catalog.point is not None:
            writes = f"read-only: the catalog as of log offset {served.catalog.point}"
        tokens = settings.token_secret() is not None
        connect = f"{served.url!r}, token=..." if tokens else repr(served.url)
        web = f"; Rerun's web viewer: ?url={served.web_url}" if served.web_url else ""
        output.say(f"strata serve: {served.url}  ({writes}{'; every call needs a token' * tokens}); "
                   f"connect with rr.catalog.CatalogClient({connect}){web}; Ctrl-C to stop")

    try:
        run(args, announce)
    except (StoreUnavailableError, ValueError, OSError) as exc:
        raise SystemExit(f"strata: {exc}") from None
    output.say("strata serve: stopped")
    return 0


def token(args: argparse.Namespace) -> int:
    """``strata token``: prints a token of the catalog endpoint, signed with
    ``STRATA_TOKEN_SECRET`` (``protocol.tokens.mint``), or with ``--new-secret`` a new secret.
    Exits with one line without a secret or with bad options."""
    if args.new_secret:
        output.say(base64.b64encode(secrets.token_bytes(settings.TOKEN_SECRET_BYTES)).decode())
        return 0
    import_extra("jwt", "protocol", "making the catalog endpoint's tokens")
    from protocol.tokens import mint

    secret = settings.token_secret()
    if secret is None:
        raise SystemExit("strata: STRATA_TOKEN_SECRET is not set: set it to the endpoint's secret (make one "
                         "with 'strata token --new-secret', and give the same to 'strata serve')")
    if args.days <= 0:
        raise SystemExit(f"strata: --days is a positive number of days, not {args.days:g}")
    output.say(mint(secret, hosts=args.host or ["127.0.0.1", "localhost"], read_only=args.read_only,
                    lifetime_secs=max(1, round(args.days * 86400)), subject=args.subject))
    return 0


def projector(args: argparse.Namespace) -> int:
    """``strata projector``: ``python -m spark_streaming``'s ``run``, with its exit codes."""
    from spark_streaming.__main__ import run

    return run(args)


def _snapshot_location(where: str | Path) -> Location:
    """Where snapshots are kept, from a directory or an ``s3://`` URL; exits with one line if the
    URL cannot be one."""
    from changelog.snapshots import location

    try:
        return location(where)
    except ValueError as exc:
        raise SystemExit(f"strata: {exc}") from None


def replay(args: argparse.Namespace) -> int:
    """``strata replay``: rebuilds the store from the log (from a snapshot, with
    ``--from-snapshot``), then with ``--swap`` makes the live store a copy of it. Exits with one
    line without a Kafka cluster known or with snapshots that cannot be listed; raises
    ``RuntimeError`` if the rebuild stops on an error."""
    from projector import open_store
    from projector.stores import describe, snapshots
    from spark_streaming.replay import rebuild, swap_into

    bootstrap = cluster(args, "--bootstrap-servers")
    kafka_options = kafka_config(args)
    into = args.into or data_dir(args) / "rebuild"
    snapshot = None
    if args.from_snapshot is not None:
        kept = _snapshot_location(args.from_snapshot or data_dir(args) / "snapshots")
        try:
            snapshot = snapshots.newest(kept, lambda line: output.say(f"strata replay: {line}"))
        except OSError as exc:
            raise SystemExit(f"strata replay: cannot list the snapshots in {kept.url}: {exc}") from None
        if snapshot is None:
            output.say(f"strata replay: no usable snapshot in {kept.url}: rebuilding from offset 0")
    start = 0 if snapshot is None else snapshot.next_offsets().get((CATALOG_TOPIC, 0), 0)
    origin = "offset 0" if snapshot is None else f"{snapshot.url} (offset {start})"
    output.say(f"strata replay: rebuilding from {origin} of {bootstrap} into {into}")
    spark_log = into.parent / f"{into.name}.log"
    spark_log.parent.mkdir(parents=True, exist_ok=True)
    output.say(f"strata replay: Spark's own output goes to {spark_log}")
    started = time.monotonic()
    logging.getLogger("strata.replay").setLevel(logging.INFO)  # each batch's times, into the log
    with output.others_to(spark_log), output.Progress("folded", "record", quiet=args.quiet) as folded:
        rebuilt = rebuild(bootstrap, into, spark_master=args.spark_master or settings.spark_master(),
                          kafka_options=kafka_options, batch_limit=args.batch_records or None,
                          snapshot=snapshot, progress=folded)
    store = open_store(rebuilt, read_only=True)
    try:
        counts, records = store.counts(), sum(store.next_offsets().values())
    finally:
        store.close()
    output.say(f"strata replay: {records - start:,} records in {time.monotonic() - started:.1f} s -> "
               f"{counts['datasets']} datasets, {counts['segments']} segments, {counts['layers']} layers, "
               f"{counts['outcomes']} outcomes, {counts['rejections']} rejections")
    if args.swap:
        live = store_location(args)
        caught_up = swap_into(live, rebuilt, bootstrap, kafka_options=kafka_options)
        output.say(f"strata replay: swapped into {describe(live)} "
                   f"({caught_up} records that arrived during the rebuild caught up)")
    return 0


def snapshot(args: argparse.Namespace) -> int:
    """``strata snapshot``: writes a snapshot of the store and prints ``where<TAB>summary``. Exits
    with one line if the store cannot be read or the snapshot written."""
    from projector import StoreUnavailableError, open_store
    from projector.stores import snapshots

    kept = _snapshot_location(args.to or data_dir(args) / "snapshots")
    try:
        store = open_store(store_location(args), read_only=True)
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None
    started = time.monotonic()
    try:
        with output.Progress("written", "row", quiet=args.quiet) as written_rows:
            written = snapshots.write(store, kept, progress=written_rows)
    except OSError as exc:
        raise SystemExit(f"strata snapshot: cannot write into {kept.url}: {exc}") from None
    finally:
        store.close()
    kept_snapshot = snapshots.Snapshot(written)
    rows = sum(kept_snapshot.manifest["tables"].values())
    offset = kept_snapshot.next_offsets().get((CATALOG_TOPIC, 0), 0)
    output.say(f"{written.url}\t{rows:,} rows at offset {offset} in {time.monotonic() - started:.1f} s")
    return 0
