"""A client host of the several-hosts test (``tests/reliability/test_several_hosts.py``), run in
its own network namespace: the layers how-to of the seeds on dataset ``team-NAME``, with its
recordings uploaded to the object store and registered by ``s3://`` URL. Kafka settings come
from ``STRATA_KAFKA_OPTIONS``, object-store ones from the ``AWS_*`` variables, as on a team
member's laptop.

It writes ``DIR/NAME.base`` once its base layer is registered, waits for ``DIR/go``, registers
its first ``tracking_error`` layer and writes ``DIR/NAME.midway`` (the test then kills the
projector), registers the rest, writes its segment table to ``DIR/NAME.json``, then reads the
peer's dataset and checks it against ``DIR/PEER.json``, and that every record in the log was
applied exactly once. Exits 0 when every check holds.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pyarrow.fs as pafs
import rerun as rr

import sdk
import settings
from stack.demo import SEGMENT_IDS
from stack_tools import assert_whole_log_applied_once, wait_until

LAYERS = ["base", "tracking_error", "quality"]
WAIT_SECS = 300.0
"""How long a registration may wait for the projection: long enough for the projector to be
killed and started again."""


def tracking_good(name: str) -> list[bool]:
    """Each client's quality flags differ, so that reading the peer's shows the peer's."""
    return [(i + len(name)) % 2 == 0 for i in range(len(SEGMENT_IDS))]


def upload(local: Path, bucket: str, key: str) -> str:
    endpoint = os.environ["AWS_ENDPOINT_URL"].removeprefix("http://")
    fs = pafs.S3FileSystem(access_key=os.environ["AWS_ACCESS_KEY_ID"],
                           secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                           region=os.environ["AWS_REGION"], endpoint_override=endpoint,
                           scheme="http")
    with fs.open_output_stream(f"{bucket}/{key}") as out:
        out.write(local.read_bytes())
    return f"s3://{bucket}/{key}"


def recording(directory: Path, segment: str, layer: str, properties: dict | None = None) -> Path:
    path = directory / f"{segment}-{layer}.rrd"
    rec = rr.RecordingStream("strata-team", recording_id=segment)
    rec.save(path)
    rec.log("points", rr.Points3D([[0.0, 1.0, 2.0]]))
    for entity, values in (properties or {}).items():
        rec.send_property(entity, rr.AnyValues(**values))
    rec.flush()
    del rec
    return path


def summary(dataset: sdk.DatasetEntry) -> dict:
    table = dataset.segment_table().to_arrow_table()
    return {"segments": table.column("rerun_segment_id").to_pylist(),
            "layers": table.column("rerun_layer_names").to_pylist(),
            "tracking_good": table.column("property:quality:tracking_good").to_pylist(),
            "manifest_rows": dataset.manifest().to_arrow_table().num_rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--peer", required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--dir", type=Path, required=True, help="shared with the test and the peer")
    args = parser.parse_args()
    local = args.dir / args.name
    local.mkdir(parents=True, exist_ok=True)
    good = tracking_good(args.name)

    def put(segment: str, layer: str, properties: dict | None = None) -> str:
        path = recording(local, segment, layer, properties)
        return upload(path, args.bucket, f"{args.name}/{layer}/{path.name}")

    client = sdk.CatalogClient(args.bootstrap_servers, args.store)
    dataset = client.create_dataset(f"team-{args.name}")
    for segment in SEGMENT_IDS:
        put(segment, "base")
    registered = dataset.register_prefix(f"s3://{args.bucket}/{args.name}/base/").wait(WAIT_SECS)
    assert sorted(registered.segment_ids) == SEGMENT_IDS, registered.segment_ids
    (args.dir / f"{args.name}.base").touch()

    wait_until(lambda: (args.dir / "go").exists(), WAIT_SECS, "the test's go")
    for i, segment in enumerate(SEGMENT_IDS):
        dataset.register([put(segment, "tracking_error")], layer_name="tracking_error").wait(WAIT_SECS)
        if i == 0:
            (args.dir / f"{args.name}.midway").touch()
    quality = [put(segment, "quality", {"quality": {"tracking_good": flag}})
               for segment, flag in zip(SEGMENT_IDS, good, strict=True)]
    dataset.register(quality, layer_name="quality").wait(WAIT_SECS)

    mine = summary(dataset)
    assert mine == {"segments": SEGMENT_IDS, "layers": [LAYERS] * len(SEGMENT_IDS),
                    "tracking_good": [[flag] for flag in good], "manifest_rows": 15}, mine
    partial = args.dir / f"{args.name}.partial"
    partial.write_text(json.dumps(mine))
    partial.replace(args.dir / f"{args.name}.json")

    # The peer's writes, read through this host's client once the peer has seen them itself.
    peer_file = args.dir / f"{args.peer}.json"
    wait_until(peer_file.exists, WAIT_SECS, f"{args.peer}'s segment table")
    theirs = summary(client.get_dataset(name=f"team-{args.peer}"))
    assert theirs == json.loads(peer_file.read_text()), theirs
    assert theirs["tracking_good"] == [[flag] for flag in tracking_good(args.peer)]

    # Nothing lost or applied twice, across the projector's crash.
    assert_whole_log_applied_once(args.store, args.bootstrap_servers, WAIT_SECS,
                                  config=settings.kafka_options())
    client.close()
    print(f"{args.name}: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
