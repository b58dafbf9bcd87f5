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


MAX_OFFSETS_PER_TRIGGER = 20_000
"""Records per micro-batch, at most, by default. A batch is held whole in the Spark driver (1 GiB
of heap): 80,000 register events of 2.5 KB each ran it out of memory, 20,000 leave room. A limit
costs a burst one Spark micro-batch (about 0.2 s) per 20,000 records."""


def _record_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a number of records (0 for no limit), got {text!r}")
    return count


def add_max_offsets_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-offsets-per-trigger", type=_record_count, default=MAX_OFFSETS_PER_TRIGGER,
                        metavar="N", help=f"at most N records per micro-batch (default: "
                                          f"{MAX_OFFSETS_PER_TRIGGER}; 0: no limit). Bounds a "
                                          "batch's memory: lower it if events carry large "
                                          "schemas or properties")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--store", required=True, metavar="PATH|URL",
                        help="the projection store: a SQLite file or a postgresql:// URL")
    parser.add_argument("--checkpoint", required=True, type=Path,
                        help="Spark checkpoint directory (keep it across restarts; without one, "
                             "the projector starts from the store's offsets)")
    parser.add_argument("--spark-master", default="local[*]",
                        help="Spark master (default: local[*])")
    add_kafka_option(parser)
    add_max_offsets_option(parser)
    parser.add_argument("--ready-file", type=Path, default=None,
                        help="file to create once the streaming query has started")
