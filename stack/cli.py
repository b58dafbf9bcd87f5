"""The ``strata`` command line: its commands as one table (name, what it does, the shared option
groups of ``stack.cli_options`` it takes, its own arguments), the parser built from it, and
``main``. The commands themselves are ``stack.catalog_commands`` (on the public SDK) and
``stack.service_commands``; what they print is formatted by ``stack.output``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import settings
from events import StrataError
from stack import catalog_commands, output, search_commands, service_commands
from stack.cli_options import (
    DASHBOARD,
    KAFKA,
    LOCATION,
    PROGRESS,
    PROJECTOR,
    PROTOCOL,
    REPLAY_SPARK,
    SPARK,
    STACK_KAFKA,
    STACK_PROTOCOL,
    OptionGroup,
)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help, but a text of several lines (the environment table of the epilog) is
    kept as written; a paragraph (a description) is wrapped to the terminal as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


@dataclass(frozen=True)
class Argument:
    """One argument of a single command, as ``ArgumentParser.add_argument`` takes it."""

    names: tuple[str, ...]
    options: dict[str, Any]


def argument(*names: str, **options: Any) -> Argument:
    """``add_argument``'s arguments, kept for a command of the table."""
    return Argument(names, options)


@dataclass(frozen=True)
class Command:
    """A command of ``strata``: the function that runs it (with the parsed arguments; it returns
    the exit code), its help, and its options."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    """One line, in ``strata --help``."""
    description: str
    """What ``strata NAME --help`` says first."""
    groups: tuple[OptionGroup, ...] = ()
    """Shared option groups (``stack.cli_options``), listed after the command's own options."""
    arguments: tuple[Argument, ...] = ()


DATASET = argument("name", metavar="NAME", help="the dataset")
READS_ONLY = "Reads the store only: no Kafka cluster is needed."

COMMANDS = (
    Command(
        "up", service_commands.up,
        help="run the stack (Kafka broker, Spark projector, store, dashboard) until Ctrl-C",
        description="Start a single-node KRaft Kafka broker (unless --bootstrap-servers), create the "
                    "topics, and run the Spark projector into the SQLite store, all under the state "
                    "directory, and serve the dashboard (see 'strata dashboard --help') and Rerun's "
                    "catalog protocol (see 'strata serve --help'). Running it again on the same "
                    "directory resumes.",
        groups=(LOCATION, STACK_KAFKA, SPARK, DASHBOARD, STACK_PROTOCOL),
        arguments=(argument("--snapshot-every", type=int, default=0, metavar="N",
                            help="have the projector write a snapshot into DATA_DIR/snapshots each time "
                                 "N more records are folded (default 0: never)"),)),
    Command(
        "demo", service_commands.demo,
        help="run the layers how-to of Rerun's catalog docs on the stack and print it",
        description="Start the stack, register five generated DROID-like recordings to 'base', add "
                    "'tracking_error' and 'quality' layers, print segment_table() and manifest(), "
                    "and stop.",
        groups=(LOCATION, STACK_KAFKA, SPARK, DASHBOARD),
        arguments=(argument("--dataset", default="droid", help="dataset name (default droid)"),)),
    Command(
        "projector", service_commands.projector,
        help="run only the Spark projector against an existing Kafka cluster",
        description="Run the Spark Structured Streaming projector alone, for deployments where Kafka "
                    "and Spark are clusters. Stops on SIGTERM or Ctrl-C.",
        groups=(PROJECTOR,)),
    Command(
        "replay", service_commands.replay,
        help="rebuild the projection from offset 0 into a new store, optionally swap it in",
        description="Fold the whole log from offset 0 into a new store (default DATA_DIR/rebuild/"
                    "store.db) with Spark, whose own output goes to a log beside it (DATA_DIR/"
                    "rebuild.log), with a progress bar of the records folded (on a terminal) and the "
                    "final counts. With --swap, the live store then becomes a copy of it, in "
                    "one transaction, after catching up on records that arrived meanwhile: nothing is "
                    "lost, a running projector carries on.",
        groups=(LOCATION, KAFKA, REPLAY_SPARK, PROGRESS),
        arguments=(
            argument("--into", type=Path, default=None,
                     help="directory for the rebuilt store, DIR/store.db: replaced only once the "
                          "rebuild is complete"),
            argument("--swap", action="store_true",
                     help="make the live store (see --store) a copy of the rebuilt one"),
            argument("--from-snapshot", nargs="?", const="", default=None, metavar="DIR|s3://...",
                     help="start from the newest usable snapshot in DIR or under an s3:// prefix "
                          "(default DATA_DIR/snapshots) and fold only the log after it"),
        )),
    Command(
        "snapshot", service_commands.snapshot,
        help="write the projection at one offset, to rebuild from it later",
        description="Write every table of the store (history included) as of one commit into "
                    "DIR/snapshot-<offset> (default DATA_DIR/snapshots) or under an s3:// prefix "
                    "(through the AWS variables): Arrow files and a manifest naming the offset and the "
                    "store format, with a progress bar of the rows written (on a terminal). Prints "
                    "'snapshot<TAB>summary'. 'strata replay --from-snapshot' starts from the newest "
                    "usable one; 'strata projector --snapshot-every N' writes them as it folds. "
                    + READS_ONLY,
        groups=(LOCATION, PROGRESS),
        arguments=(argument("--to", default=None, metavar="DIR|s3://BUCKET/PREFIX",
                            help="where snapshots are kept"),)),
    Command(
        "rejections", catalog_commands.rejections,
        help="list records the projector rejected as bad input",
        description="List every record in the rejections table: position, size and reason. "
                    + READS_ONLY,
        groups=(LOCATION,)),
    Command(
        "datasets", catalog_commands.datasets,
        help="list the datasets with their segment and layer counts",
        description="List the catalog's datasets: segments, layers, their total size, when each last "
                    "changed, and its id. " + READS_ONLY,
        groups=(LOCATION,)),
    Command(
        "segments", catalog_commands.segments,
        help="list a dataset's segments and their layers",
        description="List the segments of dataset NAME in registration order, with their layer names, "
                    "total size and last registration. " + READS_ONLY,
        groups=(LOCATION,),
        arguments=(DATASET, argument("--as-of", metavar="POINT", default=None,
                                     help="the dataset as of a log offset or one of its tags "
                                          "(strata tags NAME)"))),
    Command(
        "tags", catalog_commands.tags,
        help="list a dataset's tags",
        description="List the tags of dataset NAME: each names a point of its history (a log offset) "
                    "that 'strata segments NAME --as-of TAG' and dataset.as_of(TAG) read. " + READS_ONLY,
        groups=(LOCATION,),
        arguments=(DATASET,)),
    Command(
        "diff", catalog_commands.diff,
        help="what changed in a dataset between two points",
        description="List what changed in dataset NAME from point A to point B (default: now), each a "
                    "log offset or one of its tags: segments added and removed, layers added, removed "
                    "and replaced (with both URLs), properties changed (both values). " + READS_ONLY,
        groups=(LOCATION,),
        arguments=(DATASET,
                   argument("before", metavar="A", help="the earlier point: a log offset or a tag"),
                   argument("after", metavar="B", nargs="?", default=None,
                            help="the later point (default: now)"))),
    Command(
        "tag", catalog_commands.tag,
        help="name a point of a dataset's history",
        description="Create tag TAG of dataset NAME at --at (a log offset or an ISO time, UTC unless it "
                    "says otherwise; default: the catalog now). Prints 'tag<TAB>offset'. A tag is a "
                    "command in the log; a taken name fails (delete it with the SDK to move it).",
        groups=(LOCATION, KAFKA),
        arguments=(DATASET, argument("tag", metavar="TAG", help="the tag's name"),
                   argument("--at", metavar="POINT", default=None,
                            help="a log offset or an ISO time (default: now)"))),
    Command(
        "index", search_commands.index,
        help="create, list, delete or maintain a dataset's search indexes",
        description="ACTION is one of: create (a vector index with --metric, a full-text index with "
                    "--text, on COLUMN and --timeline; waits, with progress, until the projector's "
                    "follower has indexed every segment, then prints the index), list (every index "
                    "of NAME, how many rows it holds, how it is searched: exact, trained, inverted, "
                    "or building; reads the store only), delete (the index of COLUMN), maintain "
                    "(--optimize, --retrain, --compact, --cleanup-before, done by the follower). "
                    "COLUMN is '<entity_path>:<component>' as the dataset's schema names it. An "
                    "index is a command in the log; its rows are derived from the layers.",
        groups=(LOCATION, KAFKA, PROGRESS),
        arguments=(
            argument("action", choices=["create", "list", "delete", "maintain"], metavar="ACTION",
                     help="create, list, delete or maintain"),
            DATASET,
            argument("column", metavar="COLUMN", nargs="?", default=None,
                     help="the indexed column, e.g. /camera:embedding"),
            argument("--timeline", default=None, help="create: the timeline the index's rows carry"),
            argument("--metric", default=None, choices=["L2", "Cosine", "Dot", "Hamming"],
                     help="create: a vector index with this distance"),
            argument("--text", action="store_true", help="create: a full-text index (BM25)"),
            argument("--partition-rows", type=int, default=None, metavar="N",
                     help="create: rows per IVF partition of a trained vector index (default 4096)"),
            argument("--positions", action="store_true",
                     help="create: keep token positions, for phrase searches (\"red cup\")"),
            argument("--tokenizer", default="simple", choices=["simple", "whitespace", "raw"],
                     help="create: how full text is split into words (default simple: words, lowercased)"),
            argument("--timeout", type=float, default=3600.0, metavar="SECS",
                     help="create: how long to wait for the build (default 3600)"),
            argument("--optimize", action="store_true", help="maintain: index the rows added since "
                     "the last training"),
            argument("--retrain", action="store_true", help="maintain: train the indexes again"),
            argument("--compact", action="store_true", help="maintain: merge small files"),
            argument("--cleanup-before", default=None, metavar="ISO_TIME",
                     help="maintain: remove versions older than this time"),
        )),
    Command(
        "search", search_commands.search,
        help="search a dataset's index: words, a vector, or frames like a segment's frame",
        description="Search the index of COLUMN in dataset NAME: a full-text index for the words of "
                    "QUERY (a phrase in double quotes, with an index created with --positions), best "
                    "BM25 score first; a vector index for the rows nearest --vector or the vector of "
                    "--like SEGMENT@TIME, nearest first. Prints segment, time, instance, score or "
                    "distance and the value. " + READS_ONLY,
        groups=(LOCATION,),
        arguments=(
            DATASET,
            argument("column", metavar="COLUMN",
                     help="the indexed column, e.g. /narration:TextDocument:text"),
            argument("query", metavar="QUERY", nargs="*", help="full text: the words to search for"),
            argument("--vector", default=None, metavar="X,Y,...", help="a vector index: the query vector"),
            argument("--like", default=None, metavar="SEGMENT@TIME",
                     help="a vector index: the column's vector in that segment's row at TIME"),
            argument("--top-k", type=int, default=10, metavar="K", help="how many rows (default 10)"),
        )),
    Command(
        "register", catalog_commands.register,
        help="register recordings into a dataset, with progress",
        description="Register recordings as layer LAYER of their segments in dataset NAME, waiting "
                    "for the projection to apply them: the URIs given (file:// or s3:// URIs, or local "
                    "paths), in calls of --batch-size, or with --prefix every .rrd under a directory "
                    "or an s3:// prefix, recursively, in path order, in one call. On a terminal, "
                    "progress bars show the recordings read and those the projection registered. "
                    "Prints 'segment<TAB>uri' per registered recording; failures go to stderr and "
                    "make the exit code 1. With --spark, a --prefix of at least 1,000 recordings "
                    "is read by the tasks of a Spark session on --spark-master, whose executors "
                    "must reach the files (s3://, or a shared file system).",
        groups=(LOCATION, KAFKA, SPARK, PROGRESS),
        arguments=(
            DATASET,
            argument("uris", metavar="URI", nargs="*", help="recordings to register"),
            argument("--prefix", default=None, metavar="DIR|URL",
                     help="register every recording under this directory, file:// or s3:// prefix "
                          "instead of URIs"),
            argument("--layer", default="base", help="layer name (default base)"),
            argument("--on-duplicate", default="error", choices=["error", "skip", "replace"],
                     help="when the segment already has the layer: fail that recording (default), "
                          "skip it, or replace the layer"),
            argument("--spark", action="store_true",
                     help="read a --prefix's recordings on Spark executors (--spark-master)"),
            argument("--batch-size", type=int, default=100, metavar="N",
                     help="recordings per registration call (default 100; a --prefix is one call)"),
            argument("--timeout", type=float, default=60.0, metavar="SECS",
                     help="seconds to wait for each call's projection (default 60)"),
        )),
    Command(
        "watch", catalog_commands.watch,
        help="print the catalog's changes as they happen",
        description="Follow the change feed: one line per change (log offset, commit time, kind, "
                    "dataset or table, segment/layer, detail) until Ctrl-C. With NAME, only that "
                    "dataset's changes. " + READS_ONLY,
        groups=(LOCATION,),
        arguments=(argument("name", metavar="NAME", nargs="?", default=None,
                            help="a dataset (default: all)"),
                   argument("--since", type=int, default=None, metavar="OFFSET",
                            help="start with the changes of the records from this log offset (0: all); "
                                 "default: only changes still to come"))),
    Command(
        "serve", service_commands.serve,
        help="serve Rerun's catalog protocol (rerun+http://) on the catalog until Ctrl-C",
        description="Serve Rerun's catalog protocol (gRPC, the RerunCloudService of the installed "
                    "rerun-sdk) on the catalog, beside a running stack, so that rerun-sdk's own "
                    "rr.catalog.CatalogClient('rerun+http://HOST:PORT') reaches it. Reads the store as a "
                    "client does; writes (creating, renaming, deleting datasets) go through the Kafka "
                    "cluster as the SDK's do, and without one the catalog is served read-only. Prints "
                    "the URL to connect to. 'python -m protocol' runs the same with the same options.",
        groups=(LOCATION, KAFKA, PROTOCOL)),
    Command(
        "token", service_commands.token,
        help="make a token for the catalog protocol's endpoint (or its secret)",
        description="Print a token for the endpoint of Rerun's catalog protocol that runs with the same "
                    "STRATA_TOKEN_SECRET ('strata serve', 'strata up'): a JWT as Rerun's catalog server "
                    "issues, which rr.catalog.CatalogClient(url, token=...) and strata's client send. "
                    "Rerun's client sends a token only to the hosts it names (--host). With "
                    "--new-secret, print a new secret to set STRATA_TOKEN_SECRET to instead.",
        arguments=(
            argument("--new-secret", action="store_true",
                     help="print a new random secret (base64 of 32 bytes) and nothing else"),
            argument("--read-only", action="store_true",
                     help="a token that may only read: its writes are refused (PermissionDenied)"),
            argument("--host", action="append", default=None, metavar="HOST",
                     help="a host the endpoint is reached at, as in its URL (repeatable; .example.com: "
                          "every subdomain; default 127.0.0.1 and localhost)"),
            argument("--days", type=float, default=30.0,
                     help="days until the token expires (default 30)"),
            argument("--subject", default=None, metavar="NAME",
                     help="who the token is for (default: your user name)"),
        )),
    Command(
        "dashboard", service_commands.dashboard,
        help="serve a live page of the catalog until Ctrl-C",
        description="Serve the catalog's live page: datasets, a dataset's segment table, "
                    "registrations and rejections per second, the projection's lag, the rejections and "
                    "the recent changes, updated as the projector commits. The same data as JSON under "
                    "/api/... and as Arrow IPC streams under /api/....arrow; the change feed as "
                    "Server-Sent Events at /events. Reads the store only; the Kafka cluster, if one is "
                    "known, to measure the projection's lag.",
        groups=(LOCATION, KAFKA, DASHBOARD)),
)
"""Every command, in the order ``strata --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``strata``, a subcommand per entry of ``COMMANDS``."""
    environment = settings.help_text()
    parser = argparse.ArgumentParser(
        prog="strata",
        description="strata: an event-sourced registry of recordings. Commands go to a Kafka log; a "
                    "Spark Structured Streaming projector folds them into a SQLite catalog that the "
                    "Python SDK reads. 'strata COMMAND --help' tells more of each command.",
        epilog=environment, formatter_class=HelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        subparser = commands.add_parser(
            command.name, help=command.help, description=command.description, epilog=environment,
            formatter_class=HelpFormatter)
        for own in command.arguments:
            subparser.add_argument(*own.names, **own.options)
        for group in command.groups:
            group.add_to(subparser)
        subparser.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit code. An error the command does not handle
    itself is one line on stderr and exit code 1; Ctrl-C is exit code 130."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    # Transient client warnings (a broker that is still starting) are retried; errors surface.
    logging.getLogger("strata.kafka").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except (StrataError, RuntimeError, ValueError, OSError, LookupError) as exc:
        output.note(f"strata: error: {exc}")
        return 1
    except KeyboardInterrupt:
        output.note("strata: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
