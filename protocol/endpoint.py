"""The endpoint as a service of its own: Rerun's catalog protocol served on the catalog that the
shared options of ``settings.options`` name (store, Kafka cluster and its settings, address) until
SIGINT or SIGTERM. ``python -m protocol`` and ``strata serve`` run it; a process that starts
``python -m protocol`` learns its URL from the one line it prints when it serves
(``ready_line``, read back with ``url_of`` and ``web_url_of``).
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from datetime import datetime

import settings
from commands import Catalog
from projector import open_store
from protocol.service import ProtocolServer, serve
from protocol.tls import Certificate
from settings.options import kafka_config, known_cluster, store_location, tls_files

READY = "strata protocol: serving "
"""What the line ``python -m protocol`` prints once it serves starts with, before the URL."""
WEB = " gRPC-web "
"""What comes between the URL and the gRPC-web URL in the ready line, if gRPC-web is served."""


def ready_line(url: str, web_url: str | None = None) -> str:
    """The line that says the endpoint serves at ``url`` (and gRPC-web at ``web_url``)."""
    return f"{READY}{url}" + (f"{WEB}{web_url}" if web_url else "")


def url_of(line: str) -> str | None:
    """The URL a ``ready_line`` names; None for any other line."""
    line = line.strip()
    return line[len(READY):].split(WEB)[0] if line.startswith(READY) else None


def web_url_of(line: str) -> str | None:
    """The gRPC-web URL a ``ready_line`` names; None for another line or one without it."""
    line = line.strip()
    if not line.startswith(READY) or WEB not in line:
        return None
    return line.split(WEB, 1)[1]


def point(catalog: Catalog, given: int | datetime | tuple[str, str]) -> int | datetime:
    """The point ``--as-of`` names (``settings.options.as_of_point``): a tag ``(dataset, tag)``
    as its log offset. ``ValueError`` naming what there is for a dataset or tag there is not."""
    if not isinstance(given, tuple):
        return given
    name, tag = given
    store = catalog.wait_for_store()
    try:
        tags = store.tags(catalog.find_dataset(name, None).id)
    except LookupError:
        names = [d.name for d in store.datasets() if not d.hidden]
        raise ValueError(f"--as-of {name}/{tag}: there is no dataset {name!r} (its datasets: "
                         f"{', '.join(map(repr, names)) or 'none'})") from None
    for found in tags:
        if found.name == tag:
            return found.offset
    raise ValueError(f"--as-of {name}/{tag}: dataset {name!r} has no tag {tag!r} (its tags: "
                     f"{', '.join(repr(t.name) for t in tags) or 'none'})")


def run(args: argparse.Namespace, announce: Callable[[ProtocolServer, str | None], None]) -> None:
    """Serve Rerun's catalog protocol on the catalog ``args`` names (``settings.options``'s
    location, Kafka and protocol address options) until SIGINT or SIGTERM, then stop it and its
    client. ``announce(served, bootstrap_servers)`` is called once it serves; without a Kafka
    cluster known the catalog is served read-only, and with ``--as-of`` as of that point.
    Installs its signal handlers, so it runs in the main thread.

    With ``STRATA_TOKEN_SECRET`` set, every call needs a token signed with it
    (``protocol.tokens``); with ``--tls-cert`` and ``--tls-key``, it serves ``rerun+https://``.

    Raises ``StoreUnavailableError`` if the store cannot be read, ``ValueError`` for a malformed
    store URL, Kafka setting, token secret or certificate, or an ``--as-of`` point the catalog
    does not have, ``OSError`` if the address cannot be bound.
    """
    secret = settings.token_secret()
    files = tls_files(args)
    certificate = None if files is None else Certificate(*files)
    location = store_location(args)
    open_store(location, read_only=True).close()  # a store that cannot be read fails here
    bootstrap = known_cluster(args)
    catalog = Catalog(bootstrap, location, kafka_config=kafka_config(args),
                      delivery_timeout_secs=args.delivery_timeout)
    try:
        served_catalog = catalog if args.as_of is None else catalog.at(point(catalog, args.as_of))
        served = serve(served_catalog, host=args.host, port=args.port, direct_urls=args.direct_urls,
                       presigned_urls=args.presigned_urls, token_secret=secret, certificate=certificate,
                       web_port=args.web_port)
    except BaseException:
        catalog.close()
        raise
    stop = False

    def request_stop(signum: int, frame: object) -> None:
        # A flag, not a threading.Event: the handler runs in the main thread, and Event.set
        # there, while the main thread waits on the same Event, deadlocks on its lock.
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        announce(served, bootstrap)
        while not stop:
            time.sleep(0.2)
    finally:
        served.stop()
        catalog.close()
