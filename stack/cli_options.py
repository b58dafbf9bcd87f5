"""The options the ``strata`` commands share, each group defined once (``OptionGroup``, under its
own title in ``--help``) and added to the commands that take it, and what they resolve to: the
state directory, the store a command reads, the Kafka cluster it writes to and the Kafka client
settings.

Imports neither Spark nor the SDK.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from spark_streaming.options import (
    Options,
    add_arguments,
    add_kafka_option,
    add_max_offsets_option,
    parse_key_values,
)


@dataclass(frozen=True)
class OptionGroup:
    """Options that go together, listed under ``title`` in ``--help`` (None: with the command's
    own options), each added by one of ``adders``."""

    title: str | None
    adders: tuple[Callable[[Options], None], ...]

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        options = parser if self.title is None else parser.add_argument_group(self.title)
        for add in self.adders:
            add(options)


def _data_dir(options: Options) -> None:
    options.add_argument("--data-dir", type=Path, default=None,
                         help="state directory: broker log, checkpoint, store, and the running "
                              "stack's record of where they are (default $STRATA_HOME or ./.strata)")


def _store(options: Options) -> None:
    options.add_argument("--store", default=None, metavar="PATH|URL",
                         help="the projection store: a SQLite file, or a postgresql://user@host/db "
                              "URL (default: the running stack's, else $STRATA_STORE, else "
                              "DATA_DIR/store.db)")


def _known_cluster(options: Options) -> None:
    options.add_argument("--bootstrap-servers", default=None, metavar="HOST:PORT,...",
                         help="the Kafka cluster (default: the running stack's, else "
                              "$STRATA_BOOTSTRAP_SERVERS)")


def _existing_cluster(options: Options) -> None:
    options.add_argument("--bootstrap-servers", default=None, metavar="HOST:PORT,...",
                         help="use an existing Kafka cluster instead of starting a broker (default "
                              "$STRATA_BOOTSTRAP_SERVERS)")


def _finite_retention(options: Options) -> None:
    options.add_argument("--allow-finite-retention", action="store_true",
                         help="run on an existing topic that may delete records (finite retention or "
                              "compaction); a replay then misses what the broker deleted")


def _spark_master(options: Options) -> None:
    options.add_argument("--spark-master", default=None, metavar="MASTER",
                         help="Spark master, e.g. spark://host:7077 (default $STRATA_SPARK_MASTER, "
                              "else local[*])")


def _dashboard(options: Options) -> None:
    options.add_argument("--host", default="127.0.0.1",
                         help="address the dashboard listens on (default 127.0.0.1: this machine only; "
                              "0.0.0.0: every interface)")
    options.add_argument("--port", type=int, default=settings.DASHBOARD_PORT,
                         help=f"port the dashboard listens on (default {settings.DASHBOARD_PORT}; 0: any "
                              "free port)")
    viewer = options.add_mutually_exclusive_group()
    viewer.add_argument("--viewer-port", type=int, default=settings.VIEWER_PORT, metavar="PORT",
                        help="port of Rerun's web viewer, served beside the dashboard on every interface, "
                             "that segment pages open their segment in (default "
                             f"{settings.VIEWER_PORT}; 0: any free port)")
    viewer.add_argument("--no-viewer", dest="viewer_port", action="store_const", const=None,
                        help="serve no web viewer: segment pages offer their segment as an .rrd download")


def _protocol(options: Options) -> None:
    options.add_argument("--host", default="127.0.0.1",
                         help="address Rerun's catalog protocol listens on (default 127.0.0.1: this "
                              "machine only; 0.0.0.0: every interface)")
    options.add_argument("--port", type=int, default=settings.PROTOCOL_PORT,
                         help=f"port it listens on (default {settings.PROTOCOL_PORT}, Rerun's; 0: any free "
                              "port)")


def _quiet(options: Options) -> None:
    options.add_argument("-q", "--quiet", action="store_true",
                         help="draw no progress bars (they are drawn only when stderr is a terminal)")


LOCATION = OptionGroup("where the catalog is", (_data_dir, _store))
"""The state directory and the store: every command but ``projector``."""
KAFKA = OptionGroup("Kafka", (_known_cluster, add_kafka_option))
"""The cluster a command writes to or reads the log of, and the client settings."""
STACK_KAFKA = OptionGroup("Kafka", (_existing_cluster, _finite_retention, add_kafka_option))
"""For the commands that start a stack: a broker of their own unless told a cluster."""
SPARK = OptionGroup("Spark", (_spark_master,))
REPLAY_SPARK = OptionGroup("Spark", (_spark_master, add_max_offsets_option))
DASHBOARD = OptionGroup("dashboard", (_dashboard,))
PROGRESS = OptionGroup("progress", (_quiet,))
PROTOCOL = OptionGroup("Rerun's catalog protocol", (_protocol,))
PROJECTOR = OptionGroup(None, (add_arguments,))
"""``python -m spark_streaming``'s options, which ``strata projector`` takes as they are."""


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


def cluster(args: argparse.Namespace, what_to_pass: str) -> str:
    """``known_cluster``; exits saying what to do if none is known."""
    bootstrap = known_cluster(args)
    if bootstrap is None:
        raise SystemExit(f"strata: no running stack in {data_dir(args)}: start it with 'strata up', "
                         f"or pass {what_to_pass}")
    return bootstrap


def kafka_config(args: argparse.Namespace) -> dict[str, Any]:
    """``$STRATA_KAFKA_OPTIONS`` with the ``--kafka-option`` settings over it. ``ValueError`` for
    a malformed one."""
    return {**settings.kafka_options(), **parse_key_values(args.kafka_option)}
