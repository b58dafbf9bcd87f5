"""The ``strata`` commands on a dataset's search indexes: ``index`` (``create``, ``list``,
``delete``, ``maintain``) and ``search``. Each goes through the public SDK only, as
``stack.catalog_commands`` does, and writes through ``stack.output``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import pyarrow as pa

from sdk import DatasetEntry, NotFoundError
from stack import output
from stack.catalog_commands import dataset_named, reader, writer
from stack.cli_options import utc_time

POLL_SECS = 0.25


def index(args: argparse.Namespace) -> int:
    """``strata index ACTION NAME [COLUMN]``: create, list, delete or maintain a dataset's
    search indexes."""
    actions = {"create": _create, "list": _list, "delete": _delete, "maintain": _maintain}
    if args.action in ("create", "delete") and args.column is None:
        raise SystemExit(f"strata: index {args.action} needs the COLUMN (see 'strata index list NAME' "
                         "and the dataset's schema)")
    return actions[args.action](args)


def _indexes(dataset: DatasetEntry) -> dict[str, dict[str, Any]]:
    return {row["column"]: row for row in pa.table(dataset.list_indexes()).to_pylist()}


def _create(args: argparse.Namespace) -> int:
    if args.text == (args.metric is not None):
        raise SystemExit("strata: index create takes --text (full text) or --metric (a vector index), "
                         f"{'not both' if args.text else 'one of them'}")
    with writer(args) as client:
        dataset = dataset_named(client, args.name)
        try:
            if args.text:
                dataset.create_fts_index(column=args.column, time_index=args.timeline,
                                         store_position=args.positions, base_tokenizer=args.tokenizer)
            else:
                dataset.create_vector_index(column=args.column, time_index=args.timeline,
                                            distance_metric=args.metric,
                                            target_partition_num_rows=args.partition_rows)
        except (ValueError, LookupError) as exc:
            raise SystemExit(f"strata: {exc}") from None
        output.note(f"strata index: {args.column} of {dataset.name} is indexed as the projector's follower "
                    "reads its segments")
        return _wait_built(dataset, args)


def _wait_built(dataset: DatasetEntry, args: argparse.Namespace) -> int:
    """Show the rows indexed until the index's first pass is done; prints its line of ``list``."""
    started = time.monotonic()
    with output.Progress("indexed", "row", quiet=args.quiet) as progress:
        while True:
            row = _indexes(dataset).get(args.column) or _indexes(dataset).get("/" + args.column)
            if row is None:
                raise SystemExit(f"strata: the index of {args.column} is gone (deleted meanwhile?)")
            if row["rows"] is not None:
                progress(row["rows"], row["rows"])
            if row["search"] != "building":
                break
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"strata: the index of {args.column} was not built in {args.timeout:.0f} s: "
                                 "is the projector running? Its follower builds the indexes")
            time.sleep(POLL_SECS)
    _print_indexes([row])
    return 0


def _print_indexes(rows: list[dict[str, Any]]) -> None:
    output.table(("COLUMN", "KIND", "TIMELINE", "METRIC", "ROWS", "SEARCH", "COVERS"), [
        (r["column"], r["kind"], r["time_index"], r["distance_metric"] or "",
         "" if r["rows"] is None else r["rows"], r["search"],
         "" if r["covered_offset"] is None else r["covered_offset"]) for r in rows])


def _list(args: argparse.Namespace) -> int:
    with reader(args) as client:
        rows = list(_indexes(dataset_named(client, args.name)).values())
    _print_indexes(rows)
    output.say(f"{len(rows)} indexes")
    return 0


def _delete(args: argparse.Namespace) -> int:
    with writer(args) as client:
        try:
            dataset_named(client, args.name).delete_indexes(args.column)
        except (NotFoundError, LookupError) as exc:
            raise SystemExit(f"strata: {exc}") from None
    output.say(f"deleted\t{args.column}")
    return 0


def _maintain(args: argparse.Namespace) -> int:
    cleanup = None if args.cleanup_before is None else utc_time(args.cleanup_before, "--cleanup-before")
    with writer(args) as client:
        dataset_named(client, args.name).do_maintenance(
            optimize_indexes=args.optimize, retrain_indexes=args.retrain, compact_fragments=args.compact,
            cleanup_before=cleanup)
    output.say("maintenance asked for: the projector's follower does it next")
    return 0


def search(args: argparse.Namespace) -> int:
    """``strata search NAME COLUMN QUERY``: the best matches of a full-text index, or the nearest
    rows of a vector index to a vector (``--vector``) or to a segment's frame (``--like``)."""
    with reader(args) as client:
        dataset = dataset_named(client, args.name)
        kinds = {c: r["kind"] for c, r in _indexes(dataset).items()}
        if args.column not in kinds:
            listed = ", ".join(kinds) or "none"
            raise SystemExit(f"strata: dataset {dataset.name!r} has no index on {args.column!r} "
                             f"(its indexes: {listed}); see 'strata index create --help'")
        if kinds[args.column] == "full_text":
            if not args.query:
                raise SystemExit("strata: give the words to search for")
            found = dataset.search_fts(" ".join(args.query), args.column, limit=args.top_k)
        else:
            vector = _vector(dataset, args)
            found = dataset.search_vector(vector, args.column, args.top_k)
    table = pa.table(found)
    measure = "_score" if "_score" in table.column_names else "_distance"
    time_column = table.column_names[1]
    output.table(("SEGMENT", time_column.upper(), "INSTANCE", measure.strip("_").upper(), "VALUE"), [
        (r["rerun_segment_id"], "" if r[time_column] is None else r[time_column], r["rerun_instance_index"],
         f"{r[measure]:.4f}", _short(r[args.column])) for r in table.to_pylist()])
    return 0


def _short(value: object) -> str:
    text = str(value) if not isinstance(value, list) else "[" + ", ".join(f"{v:.3g}" for v in value[:4]) + \
        (", ...]" if len(value) > 4 else "]")
    return text if len(text) <= 60 else text[:57] + "..."


def _vector(dataset: DatasetEntry, args: argparse.Namespace) -> np.ndarray:
    """The query vector: ``--vector`` (comma-separated numbers), or the column's value in a
    segment's frame (``--like SEGMENT@TIME``)."""
    if (args.vector is None) == (args.like is None):
        raise SystemExit("strata: a vector index is searched with --vector X,Y,... or --like SEGMENT@TIME")
    if args.vector is not None:
        try:
            return np.array([float(x) for x in args.vector.split(",")], np.float32)
        except ValueError:
            raise SystemExit(f"strata: --vector {args.vector!r} is not comma-separated numbers") from None
    segment, _, at = args.like.rpartition("@")
    if not segment or not at.lstrip("-").isdigit():
        raise SystemExit(f"strata: --like {args.like!r}: give SEGMENT@TIME, TIME the timeline's value "
                         "as an integer (nanoseconds for a time)")
    timeline = next(r["time_index"] for r in pa.table(dataset.list_indexes()).to_pylist()
                    if r["column"] == args.column)
    entity = args.column.split(":", 1)[0]
    rows = pa.table(dataset.filter_segments([segment]).filter_contents([entity]).reader(index=timeline))
    times = rows.column(timeline).cast(pa.int64()).to_pylist()
    if int(at) not in times:
        raise SystemExit(f"strata: segment {segment!r} has no row at {timeline}={at}")
    value = rows.column(args.column)[times.index(int(at))].as_py()
    if not value:
        raise SystemExit(f"strata: segment {segment!r} has no {args.column} at {timeline}={at}")
    return np.asarray(value[0], np.float32)
