"""The command-line options that say where a catalog is and how its services listen, shared by
the ``strata`` commands and the services' own entry points (``python -m protocol``), each defined
once, and what they resolve to: the state directory, the store, the Kafka cluster and its client
settings. Explicit options win over the ``STRATA_*`` variables and the running stack's record.

Imports nothing of strata but ``settings``.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

import settings

Options = argparse.ArgumentParser | argparse._ArgumentGroup
"""What an option is added to: a parser, or one of its titled groups of options."""


def parse_key_values(pairs: list[str], *, option: str = "--kafka-option") -> dict[str, str]:
    """``["k=v", ...]`` as a dict; raises ``ValueError`` naming the malformed pair."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def add_kafka_option(parser: Options) -> None:
    """``--kafka-option KEY=VALUE``, repeatable (``kafka_config`` resolves it)."""
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Kafka client setting in librdkafka's names, e.g. "
                             "security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-512, "
                             "sasl.username=..., ssl.ca.location=ca.pem (repeatable). Spark's "
                             "Kafka source gets it in the Java client's names; kafka.KEY=VALUE "
                             "is for Spark only. Passwords are better in $STRATA_KAFKA_OPTIONS")


def add_data_dir(options: Options) -> None:
    """``--data-dir`` (``data_dir`` resolves it)."""
    options.add_argument("--data-dir", type=Path, default=None,
                         help="state directory: broker log, checkpoint, store, and the running "
                              "stack's record of where they are (default $STRATA_HOME or ./.strata)")


def add_store(options: Options) -> None:
    """``--store`` (``store_location`` resolves it)."""
    options.add_argument("--store", default=None, metavar="PATH|URL",
                         help="the projection store: a SQLite file, or a postgresql://user@host/db "
                              "URL (default: the running stack's, else $STRATA_STORE, else "
                              "DATA_DIR/store.db)")


def add_known_cluster(options: Options) -> None:
    """``--bootstrap-servers`` of a cluster that runs (``known_cluster`` resolves it)."""
    options.add_argument("--bootstrap-servers", default=None, metavar="HOST:PORT,...",
                         help="the Kafka cluster (default: the running stack's, else "
                              "$STRATA_BOOTSTRAP_SERVERS)")


def add_listen_address(options: Options, *, service: str, port: int) -> None:
    """``--host`` and ``--port`` a service listens on (``service`` names it in the help)."""
    options.add_argument("--host", default="127.0.0.1",
                         help=f"address {service} listens on (default 127.0.0.1: this machine "
                              "only; 0.0.0.0: every interface)")
    options.add_argument("--port", type=int, default=port,
                         help=f"port {service} listens on (default {port}; 0: any free port)")


def add_protocol_endpoint(options: Options) -> None:
    """``--host`` and ``--port`` of Rerun's catalog protocol's endpoint (Rerun's port, 51234),
    ``--no-direct-urls``, ``--no-presigned-urls``, ``--as-of``, ``--web-port``,
    ``--delivery-timeout``, and ``--tls-cert`` with ``--tls-key``."""
    add_listen_address(options, service="Rerun's catalog protocol", port=settings.PROTOCOL_PORT)
    options.add_argument("--no-direct-urls", dest="direct_urls", action="store_false",
                         help="serve no direct URLs: Rerun's client then fetches every chunk through "
                              "gRPC (FetchChunks) instead of from the layers' files over HTTP, on a "
                              "free port of the same host")
    options.add_argument("--no-presigned-urls", dest="presigned_urls", action="store_false",
                         help="serve s3:// layers' direct URLs from this endpoint, which reads the object "
                              "store, instead of handing out the objects' presigned URLs: for clients "
                              "that cannot reach the object store")
    options.add_argument("--as-of", type=as_of_point, default=None, metavar="POINT",
                         help="serve the catalog as it was at POINT, read-only: a log offset, a time "
                              "with its zone (2026-12-05T10:00:00+00:00), or a dataset's tag as "
                              "DATASET/TAG. Rerun's clients, viewer and loaders then open that point "
                              "at this endpoint's URL (default: the catalog as it is)")
    options.add_argument("--web-port", type=int, default=None,
                         help="also serve the protocol over gRPC-web on this port (0: any free port), for "
                              "Rerun's web viewer, which cannot speak gRPC: open the viewer with "
                              "?url=rerun+http://HOST:WEB_PORT (default: none)")
    options.add_argument("--delivery-timeout", type=float, default=15.0, metavar="SECS",
                         help="how long a write waits for Kafka to acknowledge it before it fails; "
                              "longer when the endpoint starts before its broker (default: 15)")
    add_tls_files(options)


def add_tls_files(options: Options) -> None:
    """``--tls-cert`` and ``--tls-key`` of Rerun's catalog protocol's endpoint (``tls_files``
    resolves them): ``strata serve``'s and ``strata up``'s."""
    options.add_argument("--tls-cert", type=Path, default=None, metavar="PEM",
                         help="serve over TLS (rerun+https://, and direct URLs over https://) with this "
                              "certificate chain; needs --tls-key. Clients trust it through their CA "
                              "roots (SSL_CERT_FILE)")
    options.add_argument("--tls-key", type=Path, default=None, metavar="PEM",
                         help="the private key of --tls-cert")


def as_of_point(text: str) -> int | datetime | tuple[str, str]:
    """``--as-of``'s point: a log offset, a timezone-aware ISO 8601 time, or a dataset's tag as
    ``(dataset, tag)`` from ``DATASET/TAG`` (a dataset's name has no ``/``).
    ``argparse.ArgumentTypeError`` saying what it takes for anything else."""
    if text.strip().isdigit():
        return int(text)
    dataset, slash, tag = text.partition("/")
    if slash:
        if not dataset or not tag:
            raise argparse.ArgumentTypeError(f"{text!r}: a tag is given as DATASET/TAG, both named")
        return dataset, tag
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a log offset, a time (2026-12-05T10:00:00+00:00) nor a tag "
            "(DATASET/TAG)") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: give one (2026-12-05T10:00:00Z)")
    return when


def tls_files(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """``--tls-cert`` and ``--tls-key``; None without them. ``ValueError`` if only one is given."""
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ValueError("--tls-cert and --tls-key go together: the certificate and its private key")
    if args.tls_cert is None:
        return None
    return args.tls_cert, args.tls_key


def data_dir(args: argparse.Namespace) -> Path:
    """``--data-dir``, else ``$STRATA_HOME``, else ``./.strata``."""
    directory: Path = args.data_dir or settings.home()
    return directory


def store_location(args: argparse.Namespace) -> str:
    """The store a command works on: ``--store``, the running stack's, ``$STRATA_STORE``,
    ``DATA_DIR/store.db``."""
    if args.store is not None:
        return str(args.store)
    return settings.running_stack(data_dir(args)).get("store") or settings.store(data_dir(args))


def known_cluster(args: argparse.Namespace) -> str | None:
    """The Kafka cluster a command works on: ``--bootstrap-servers``, the running stack's,
    ``$STRATA_BOOTSTRAP_SERVERS``; None if none."""
    known: str | None = args.bootstrap_servers or settings.running_stack(data_dir(args)).get(
        "bootstrap_servers") or settings.bootstrap_servers()
    return known


def kafka_config(args: argparse.Namespace) -> dict[str, str]:
    """``$STRATA_KAFKA_OPTIONS`` with the ``--kafka-option`` settings over it. ``ValueError`` for
    a malformed one."""
    return {**settings.kafka_options(), **parse_key_values(args.kafka_option)}
