"""A client host of the several-hosts test (``tests/reliability/test_several_hosts.py``) that
registers a prefix on the Spark cluster's executors, as a team member registers a large delivery:
it uploads ``--count`` small recordings under ``s3://BUCKET/delivery/``, creates dataset
``team-delivery``, writes ``DIR/register.uploaded``, then runs
``strata register team-delivery --prefix s3://BUCKET/delivery/ --spark`` on ``--spark-master``
(the test kills one of its executors while they read). Then it checks that each recording is a
segment of the dataset, that the log holds exactly one registration of each, and that every record
in the log was applied exactly once. Exits 0 when every check holds. Kafka settings come from
``STRATA_KAFKA_OPTIONS``, object-store ones from the ``AWS_*`` variables.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import sdk
import settings
from events import RegisterLayer, decode
from producers import end_offsets, read_range
from stack_tools import assert_whole_log_applied_once
from team_client import recording, upload

DATASET = "team-delivery"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True, help="this host's IP address, for the executors")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--spark-master", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="shared with the test")
    args = parser.parse_args()
    files = args.dir / "delivery"
    files.mkdir()
    expected = [f"delivery_{n:05d}" for n in range(args.count)]
    for segment in expected:
        upload(recording(files, segment, "base"), args.bucket, f"delivery/{segment}.rrd")
    client = sdk.CatalogClient(args.bootstrap_servers, args.store)
    dataset = client.create_dataset(DATASET)
    (args.dir / "register.uploaded").touch()

    registered = subprocess.run(
        [sys.executable, "-m", "stack.cli", "register", DATASET, "--prefix", f"s3://{args.bucket}/delivery/",
         "--spark", "--spark-master", args.spark_master, "--bootstrap-servers", args.bootstrap_servers,
         "--store", args.store, "--timeout", "600"],
        env={**os.environ, "SPARK_LOCAL_IP": args.address}, capture_output=True, text=True)
    print(registered.stderr, file=sys.stderr)
    assert registered.returncode == 0, registered.stderr
    printed = [line.split("\t")[0] for line in registered.stdout.splitlines() if "\t" in line]
    others = [line for line in registered.stdout.splitlines() if "\t" not in line]
    assert sorted(printed) == expected and not others, (len(printed), others[:10])

    assert sorted(dataset.segment_ids()) == expected
    config = settings.kafka_options()
    end = end_offsets(args.bootstrap_servers, config=config)
    events = [decode(value) for _, _, _, value in read_range(args.bootstrap_servers, {}, end, config=config)
              if value is not None]
    registrations = sorted(e.command.segment_id for e in events
                           if e.entry_id == dataset.id and isinstance(e.command, RegisterLayer))
    assert registrations == expected, f"{len(registrations)} registrations of {args.count} recordings"
    assert_whole_log_applied_once(args.store, args.bootstrap_servers, config=config)
    print(f"{args.count} recordings registered once each on the executors", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
