"""The projector's command-line options, shared by ``python -m spark_streaming`` and
``strata projector``. Imports no Spark, so ``strata --help`` stays fast."""

from __future__ import annotations

import argparse
from pathlib import Path


def parse_key_values(pairs: list[str], *, option: str = "--kafka-option") -> dict[str, str]:
    """``["k=v", ...]`` as a dict; raises ``ValueError`` naming the malformed pair."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} expects KEY=VALUE, got {pair!r}")
        options[key] = value
    return options


def add_kafka_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                        help="Kafka client setting, e.g. security.protocol=SASL_SSL "
                             "(repeatable); Spark's Kafka source gets it as kafka.KEY")


def add_max_offsets_option(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    parser.add_argument("--max-offsets-per-trigger", type=int, default=default, metavar="N",
                        help="at most N records per micro-batch (default: "
                             f"{default or 'no limit'}); bounds a batch's memory")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--store", required=True, type=Path, help="SQLite projection store file")
    parser.add_argument("--checkpoint", required=True, type=Path,
                        help="Spark checkpoint directory (keep it across restarts)")
    parser.add_argument("--spark-master", default="local[*]",
                        help="Spark master (default: local[*])")
    add_kafka_option(parser)
    add_max_offsets_option(parser)
    parser.add_argument("--ready-file", type=Path, default=None,
                        help="file to create once the streaming query has started")
