"""The options the ``strata`` commands share, each group defined once (``OptionGroup``, under its
own title in ``--help``) and added to the commands that take it, and what they resolve to: the
state directory, the store a command reads, the Kafka cluster it writes to and the Kafka client
settings (resolved in ``settings.options``, which the services' own entry points share).

Imports neither Spark nor the SDK.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import settings
from settings.options import (
    Options,
    add_data_dir,
    add_kafka_option,
    add_known_cluster,
    add_listen_address,
    add_protocol_endpoint,
    add_store,
    add_tls_files,
    data_dir,
    kafka_config,
    known_cluster,
    store_location,
    tls_files,
)
from spark_streaming.options import add_arguments, record_count

__all__ = [
    "DASHBOARD", "KAFKA", "LOCATION", "PROGRESS", "PROJECTOR", "PROTOCOL", "REPLAY_SPARK", "SPARK",
    "STACK_KAFKA", "STACK_PROTOCOL", "OptionGroup", "cluster", "data_dir", "kafka_config", "known_cluster",
    "protocol_tls", "store_location",
]


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


def _replay_batches(options: Options) -> None:
    from spark_streaming.replay import BATCH_BYTES

    options.add_argument("--batch-records", type=record_count, default=0, metavar="N",
                         help=f"at most N records per batch (default 0: about {BATCH_BYTES >> 20} MiB "
                              "of records each, sized from the records read so far)")


def _dashboard(options: Options) -> None:
    add_listen_address(options, service="the dashboard", port=settings.DASHBOARD_PORT)
    viewer = options.add_mutually_exclusive_group()
    viewer.add_argument("--viewer-port", type=int, default=settings.VIEWER_PORT, metavar="PORT",
                        help="port of Rerun's web viewer, served beside the dashboard on every interface, "
                             "that segment pages open their segment in (default "
                             f"{settings.VIEWER_PORT}; 0: any free port)")
    viewer.add_argument("--no-viewer", dest="viewer_port", action="store_const", const=None,
                        help="serve no web viewer: segment pages offer their segment as an .rrd download")


def _stack_protocol(options: Options) -> None:
    served = options.add_mutually_exclusive_group()
    served.add_argument("--protocol-port", type=int, default=settings.PROTOCOL_PORT, metavar="PORT",
                        help="port Rerun's catalog protocol (rerun+http://, or rerun+https:// with "
                             "--tls-cert) is served on, on this machine only, for rerun-sdk's own "
                             f"rr.catalog.CatalogClient (default {settings.PROTOCOL_PORT}, Rerun's; 0: any "
                             "free port)")
    served.add_argument("--no-protocol", dest="protocol_port", action="store_const", const=None,
                        help="do not serve Rerun's catalog protocol ('strata serve' serves it later)")
    web = options.add_mutually_exclusive_group()
    web.add_argument("--protocol-web-port", type=int, default=settings.PROTOCOL_WEB_PORT, metavar="PORT",
                     help="port the protocol is also served on over gRPC-web, for Rerun's web viewer, "
                          "which segment pages then open their segment through (default "
                          f"{settings.PROTOCOL_WEB_PORT}; 0: any free port)")
    web.add_argument("--no-protocol-web", dest="protocol_web_port", action="store_const", const=None,
                     help="serve no gRPC-web: segment pages open their segment in the viewer as an .rrd")
    add_tls_files(options)


def _quiet(options: Options) -> None:
    options.add_argument("-q", "--quiet", action="store_true",
                         help="draw no progress bars (they are drawn only when stderr is a terminal)")


LOCATION = OptionGroup("where the catalog is", (add_data_dir, add_store))
"""The state directory and the store: every command but ``projector``."""
KAFKA = OptionGroup("Kafka", (add_known_cluster, add_kafka_option))
"""The cluster a command writes to or reads the log of, and the client settings."""
STACK_KAFKA = OptionGroup("Kafka", (_existing_cluster, _finite_retention, add_kafka_option))
"""For the commands that start a stack: a broker of their own unless told a cluster."""
SPARK = OptionGroup("Spark", (_spark_master,))
REPLAY_SPARK = OptionGroup("Spark", (_spark_master, _replay_batches))
DASHBOARD = OptionGroup("dashboard", (_dashboard,))
PROGRESS = OptionGroup("progress", (_quiet,))
PROTOCOL = OptionGroup("Rerun's catalog protocol", (add_protocol_endpoint,))
STACK_PROTOCOL = OptionGroup("Rerun's catalog protocol", (_stack_protocol,))
"""For ``strata up``: the endpoint it starts beside the projector."""
PROJECTOR = OptionGroup(None, (add_arguments,))
"""``python -m spark_streaming``'s options, which ``strata projector`` takes as they are."""


def protocol_tls(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """The certificate and key ``strata up`` serves its endpoint with (``tls_files``); None
    without ``--tls-cert``. ``ValueError`` if only one of the two is given, or with
    ``--no-protocol``."""
    files = tls_files(args)
    if files is not None and args.protocol_port is None:
        raise ValueError("--tls-cert and --tls-key serve Rerun's catalog protocol over TLS, which "
                         "--no-protocol does not serve: give one or the other")
    return files


def utc_time(value: str, option: str, *, or_offset: bool = False) -> datetime:
    """An option's ISO time, UTC unless it says otherwise; exits with one line naming ``option``
    if it is not one (``or_offset``: the option also takes a log offset)."""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        what = "neither an offset nor an ISO time" if or_offset else "not an ISO time"
        raise SystemExit(f"strata: {option} {value!r} is {what} (2026-03-03T12:00)") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def cluster(args: argparse.Namespace, what_to_pass: str) -> str:
    """``known_cluster``; exits saying what to do if none is known."""
    bootstrap = known_cluster(args)
    if bootstrap is None:
        raise SystemExit(f"strata: no running stack in {data_dir(args)}: start it with 'strata up', "
                         f"or pass {what_to_pass}")
    return bootstrap


QUIET_LOG4J2 = """\
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %m%n
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
"""
"""The driver's log configuration for ``--spark``: its errors only, not Spark's start-up lines."""


def spark_session(args: argparse.Namespace, command: str) -> Any:
    """A Spark session on ``--spark-master`` (default ``$STRATA_SPARK_MASTER``, else local) for
    ``command`` (``strata register``), whose driver logs its errors only."""
    from spark_streaming.job import build_session  # heavy: only for --spark

    master = args.spark_master or settings.spark_master()
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as config:
        config.write(QUIET_LOG4J2)
    return build_session(master, app_name=command.replace(" ", "-"), conf={
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={config.name}"})
