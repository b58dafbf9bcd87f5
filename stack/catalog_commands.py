"""The ``strata`` commands on the catalog: ``datasets``, ``segments``, ``diff``, ``tags``, ``tag``,
``register``, ``watch`` and ``rejections``. Each goes through the public SDK only (the names of
``sdk.__all__``), as a user's notebook would: the reading ones with a client of the store alone,
which never talks to Kafka, the writing ones (``tag``, ``register``) with a client of the stack.
They write through ``stack.output``.

Imports nothing of the ``projector`` room and no private module of ``sdk``
(tests/unit/test_cli.py checks it).
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from pathlib import Path

from sdk import AlreadyExistsError, CatalogClient, DatasetEntry, StoreUnavailableError
from stack import output
from stack.cli_options import cluster, kafka_config, spark_session, store_location, utc_time


def reader(args: argparse.Namespace) -> CatalogClient:
    """A client of the store the arguments name, which only reads it; exits with one line if the
    store cannot be opened."""
    try:
        return CatalogClient(store=store_location(args))
    except (StoreUnavailableError, ValueError) as exc:
        raise SystemExit(f"strata: {exc}") from None


def writer(args: argparse.Namespace) -> CatalogClient:
    """A client of the stack the arguments name, which writes to its Kafka cluster; exits saying
    what to pass if no cluster is known."""
    bootstrap = cluster(args, "--bootstrap-servers and --store")
    return CatalogClient(bootstrap, store_location(args), kafka_config=kafka_config(args))


def dataset_named(client: CatalogClient, name: str) -> DatasetEntry:
    """The dataset named ``name`` in the catalog ``client`` reads; exits naming the datasets
    there if it has none of that name."""
    try:
        return client.get_dataset(name)
    except LookupError:
        known = ", ".join(client.dataset_names()) or "none yet"
        raise SystemExit(f"strata: no dataset named {name!r} (datasets: {known})") from None


def _offset(dataset: DatasetEntry, point: str) -> int:
    """The log offset of ``point`` as a command line gives it: an offset, or the name of one of
    the dataset's tags; exits with one line if it is neither."""
    if point.isdigit():
        return int(point)
    tags = {tag.name: tag.offset for tag in dataset.tags()}
    if point not in tags:
        names = ", ".join(tags) or "none"
        raise SystemExit(f"strata: {point!r} is neither a log offset nor a tag of the dataset "
                         f"(its tags: {names})")
    return tags[point]


def _as_of(client: CatalogClient, offset: int) -> CatalogClient:
    """The catalog as of ``offset``; exits with one line if the store cannot show it."""
    try:
        return client.as_of(offset)
    except ValueError as exc:
        raise SystemExit(f"strata: {exc}") from None


def datasets(args: argparse.Namespace) -> int:
    """``strata datasets``: a row per dataset (``CatalogClient.dataset_table``). Exits with one
    line if the store cannot be read."""
    with reader(args) as client:
        table = client.dataset_table().to_arrow_table()
    output.table(("DATASET", "SEGMENTS", "LAYERS", "SIZE", "UPDATED (UTC)", "ID"), [
        (d["name"], d["segments"], d["layers"], output.size(d["size_bytes"]), output.utc(d["updated_at"]),
         d["id"]) for d in table.to_pylist()])
    output.say(f"{table.num_rows} datasets")
    return 0


def segments(args: argparse.Namespace) -> int:
    """``strata segments NAME [--as-of POINT]``: a row per segment of the dataset's segment table,
    now or as of the point. Exits with one line for an unknown dataset or point."""
    with reader(args) as client:
        dataset = dataset_named(client, args.name)
        if args.as_of is not None:  # the name as the catalog had it then
            dataset = dataset_named(_as_of(client, _offset(dataset, args.as_of)), args.name)
        table = dataset.segment_table().select(
            "rerun_segment_id", "rerun_layer_names", "rerun_size_bytes", "rerun_last_updated_at",
        ).to_arrow_table()
    output.table(("SEGMENT", "LAYERS", "SIZE", "LAST REGISTERED (UTC)"), [
        (s["rerun_segment_id"], ",".join(s["rerun_layer_names"]), output.size(s["rerun_size_bytes"]),
         output.utc(s["rerun_last_updated_at"])) for s in table.to_pylist()])
    point = "" if args.as_of is None else f" as of {args.as_of}"
    output.say(f"{table.num_rows} segments in {args.name}{point}")
    return 0


def diff(args: argparse.Namespace) -> int:
    """``strata diff NAME A [B]``: a row per change of ``DatasetEntry.diff``. Exits with one line
    for an unknown dataset or point."""
    with reader(args) as client:
        dataset = dataset_named(client, args.name)
        before = _offset(dataset, args.before)
        after = None if args.after is None else _offset(dataset, args.after)
        try:
            table = dataset.diff(before, after).to_arrow_table()
        except ValueError as exc:
            raise SystemExit(f"strata: {exc}") from None
    output.table(("SEGMENT", "LAYER", "CHANGE", "FROM", "TO"), [
        (c["rerun_segment_id"], c["rerun_layer_name"] or c["property"] or "-", c["change"],
         c["old_storage_url"] or c["old_value"] or "-", c["new_storage_url"] or c["new_value"] or "-")
        for c in table.to_pylist()])
    output.say(f"{table.num_rows} changes in {args.name} from {args.before} to {args.after or 'now'}")
    return 0


def tags(args: argparse.Namespace) -> int:
    """``strata tags NAME``: a row per tag of the dataset. Exits with one line for an unknown
    dataset."""
    with reader(args) as client:
        found = dataset_named(client, args.name).tags()
    output.table(("TAG", "OFFSET", "CREATED (UTC)"),
                 [(t.name, t.offset, output.utc(t.created_at)) for t in found])
    output.say(f"{len(found)} tags of {args.name}")
    return 0


def tag(args: argparse.Namespace) -> int:
    """``strata tag NAME TAG [--at POINT]``: creates the tag and prints ``tag<TAB>offset``. Exits
    with one line for a taken name or a bad point, or without a Kafka cluster known; an unknown
    dataset is a ``LookupError``."""
    point: int | datetime | None = None
    if args.at is not None and args.at.isdigit():
        point = int(args.at)
    elif args.at is not None:
        point = utc_time(args.at, "--at", or_offset=True)
    with writer(args) as client:
        dataset = client.get_dataset(args.name)
        try:
            created = dataset.create_tag(args.tag, point)
        except (AlreadyExistsError, ValueError) as exc:
            raise SystemExit(f"strata: {exc}") from None
    output.say(f"{created.name}\t{created.offset}")
    return 0


def _as_uri(value: str) -> str:
    """A URI as given, or a local path as a file:// URI."""
    return value if "://" in value else Path(value).absolute().as_uri()


def register(args: argparse.Namespace) -> int:
    """``strata register NAME (URI ... | --prefix URL)``: prints ``segment<TAB>uri`` per registered
    recording, the failures and a summary on stderr; returns 1 if any failed. Raises what the
    SDK's ``register`` raises (a missing file, an unknown dataset) before anything is sent."""
    if args.batch_size < 1:
        raise SystemExit(f"strata: --batch-size must be at least 1, got {args.batch_size}")
    if bool(args.uris) == (args.prefix is not None):
        raise SystemExit("strata: register takes recordings (URI ...) or --prefix, "
                         f"{'not both' if args.uris else 'one of them'}")
    if args.spark and args.prefix is None:
        raise SystemExit("strata: --spark reads a --prefix's recordings on Spark executors; "
                         "give --prefix, or leave --spark out")
    uris = [_as_uri(u) for u in args.uris]
    with writer(args) as client:
        dataset = client.get_dataset(args.name)
        started, registered, failures = time.monotonic(), 0, []
        # Two bars: the recordings read (told by the SDK as it reads them), and those the
        # projection registered (as their results come back); closed in that order.
        reading = output.Progress("read", "recording", quiet=args.quiet, total=len(uris) or None)
        done = output.Progress("registered", "recording", quiet=args.quiet, total=len(uris) or None)
        try:
            if args.prefix is not None:
                prefix = _as_uri(args.prefix)
                output.note(f"strata register: the recordings under {prefix} into {dataset.name}, "
                            f"layer {args.layer}")

                def read(count: int, total: int) -> None:  # the total is known once listed
                    reading(count, total)
                    done.expect(total)

                spark = None
                if args.spark:
                    output.note("strata register: starting Spark, which reads a prefix of at least "
                                "1,000 recordings on its executors")
                    spark = spark_session(args, "strata register")
                operations = iter([dataset.register_prefix(prefix, args.layer, args.on_duplicate,
                                                           progress=read, spark=spark)])
            else:
                output.note(f"strata register: {len(uris)} recordings into {dataset.name}, "
                            f"layer {args.layer}")
                # Each batch is read, sent and waited for before the next one is read.
                operations = (dataset.register(uris[first:first + args.batch_size], layer_name=args.layer,
                                               on_duplicate=args.on_duplicate,
                                               progress=reading.part(first, len(uris)))
                              for first in range(0, len(uris), args.batch_size))
            for operation in operations:
                for result in operation.iter_results(timeout_secs=args.timeout):
                    if result.is_error:
                        failures.append(result)
                    else:
                        registered += 1
                        output.say(f"{result.segment_id}\t{result.uri}")
                    done.advance(failed=len(failures))
        finally:
            reading.close()
            done.close()
    for result in failures:
        output.note(f"strata register: {result.uri}: {result.error}")
    output.note(f"strata register: {registered} registered, {len(failures)} failed in "
                f"{time.monotonic() - started:.1f} s")
    return 1 if failures else 0


def watch(args: argparse.Namespace) -> int:
    """``strata watch [NAME] [--since OFFSET]``: a line per change until Ctrl-C. Exits with one
    line for an unknown dataset or a bad offset."""
    with reader(args) as client:
        dataset = dataset_named(client, args.name) if args.name else None
        try:
            changes = client.changes(args.since, dataset=dataset)
        except ValueError as exc:
            raise SystemExit(f"strata: {exc}") from None
        scope = f"dataset {args.name}" if args.name else "the catalog"
        start = "from now" if args.since is None else f"from offset {args.since}"
        output.note(f"strata watch: changes of {scope} {start}; Ctrl-C to stop")
        try:
            for change in changes:
                output.say(output.change_line(change))
        except KeyboardInterrupt:
            pass
    return 0


def rejections(args: argparse.Namespace) -> int:
    """``strata rejections``: a line per rejected record (position, size, reason) and their
    count. Exits with one line if the store cannot be read."""
    with reader(args) as client:
        rejected = client.rejections()
    for r in rejected:
        output.say(f"{r.position.topic}[{r.position.partition}]@{r.position.offset}  {len(r.raw)} bytes  "
                   f"{r.reason}")
    output.say(f"{len(rejected)} rejected records")
    return 0
