"""The projector's command-line options, shared by ``python -m spark_streaming`` and
``strata projector`` (the Kafka client settings, ``--kafka-option``, are every command's, in
``settings.options``). Imports no Spark, so ``strata --help`` stays fast."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from settings.options import Options as Options
from settings.options import add_kafka_option as add_kafka_option
from settings.options import parse_key_values as parse_key_values

SPARK_ONLY_PREFIX = "kafka."
"""A Kafka setting named ``kafka.KEY`` goes to Spark's Kafka source only, verbatim."""

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
"""The Java login module of each SASL mechanism whose username and password librdkafka takes."""


def _jaas_quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_config(config: Mapping[str, Any] | None) -> dict[str, str]:
    """The same settings for the Java Kafka client, without Spark's ``kafka.`` prefix.

    librdkafka's ``sasl.username``/``sasl.password`` become a ``sasl.jaas.config`` for the
    mechanism, ``ssl.ca.location`` a PEM trust store, ``ssl.endpoint.identification.algorithm=none``
    the Java client's empty value; any other setting keeps its name. Raises ``ValueError`` for a
    username or password without a mechanism that takes one.
    """
    config = dict(config or {})
    options: dict[str, str] = {}
    for key, value in config.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if key.startswith(SPARK_ONLY_PREFIX) or key in ("sasl.username", "sasl.password"):
            continue
        if key in ("sasl.mechanism", "sasl.mechanisms"):
            options["sasl.mechanism"] = text
        elif key == "ssl.ca.location":
            options["ssl.truststore.type"] = "PEM"
            options["ssl.truststore.location"] = text
        elif key == "ssl.endpoint.identification.algorithm":
            options[key] = "" if text == "none" else text
        else:
            options[key] = text
    if "sasl.username" in config or "sasl.password" in config:
        mechanism = options.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in LOGIN_MODULES:
            raise ValueError(
                f"sasl.username and sasl.password need sasl.mechanism {', '.join(LOGIN_MODULES)} "
                f"(got {mechanism}); for another mechanism give Spark's Kafka source its "
                "kafka.sasl.jaas.config")
        username = _jaas_quoted(str(config.get("sasl.username", "")))
        password = _jaas_quoted(str(config.get("sasl.password", "")))
        options["sasl.jaas.config"] = (
            f"{LOGIN_MODULES[mechanism]} required username={username} password={password};")
    options.update({key[len(SPARK_ONLY_PREFIX):]: str(value) for key, value in config.items()
                    if key.startswith(SPARK_ONLY_PREFIX)})
    return options


MAX_OFFSETS_PER_TRIGGER = 20_000
"""Records per micro-batch, at most, by default. A batch is held whole in the Spark driver (1 GiB
of heap): 80,000 register events of 2.5 KB each ran it out of memory, 20,000 leave room. A limit
costs a burst one Spark micro-batch (about 0.2 s) per 20,000 records."""


def record_count(text: str) -> int:
    """A number of records given on a command line (0 or more)."""
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a number of records (0 for no limit), got {text!r}")
    return count


def add_max_offsets_option(parser: Options) -> None:
    parser.add_argument("--max-offsets-per-trigger", type=record_count, default=MAX_OFFSETS_PER_TRIGGER,
                        metavar="N", help=f"at most N records per micro-batch (default: "
                                          f"{MAX_OFFSETS_PER_TRIGGER}; 0: no limit). Bounds a "
                                          "batch's memory: lower it if events carry large "
                                          "schemas or properties")


def add_arguments(parser: Options) -> None:
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--store", required=True, metavar="PATH|URL",
                        help="the projection store: a SQLite file or a postgresql:// URL")
    parser.add_argument("--checkpoint", required=True, type=Path,
                        help="Spark checkpoint directory (made afresh at each start: the projector "
                             "starts from the store's offsets)")
    parser.add_argument("--spark-master", default="local[*]",
                        help="Spark master (default: local[*])")
    add_kafka_option(parser)
    add_max_offsets_option(parser)
    parser.add_argument("--no-changelog", dest="changelog", action="store_false",
                        help="do not publish the change feed to the compacted topic "
                             "strata.catalog.changes (published by default)")
    parser.add_argument("--snapshot-every", type=record_count, default=0, metavar="N",
                        help="write a snapshot each time N more records are folded (default 0: "
                             "never); 'strata replay --from-snapshot' rebuilds from the newest")
    parser.add_argument("--snapshots", default=None, metavar="DIR|s3://BUCKET/PREFIX",
                        help="where --snapshot-every writes (default: 'snapshots' beside a SQLite "
                             "store; required with PostgreSQL). s3:// uses the AWS variables")
    parser.add_argument("--ready-file", type=Path, default=None,
                        help="file to create once the streaming query has started")
