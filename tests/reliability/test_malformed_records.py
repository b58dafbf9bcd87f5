"""10k malformed records between valid events, straight to the topic: each one lands in the
rejections table with its reason, every valid event is applied, the stream never stops, and
``strata rejections`` lists them all."""

from __future__ import annotations

import io
import json
import random
import re
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import fastavro
from confluent_kafka import Producer

import sdk
from events import CATALOG_TOPIC, SCHEMA_VERSION, CreateDataset, Event, RegisterLayer, encode
from events.codec import HEADER_SIZE, MAGIC, schema_fingerprint
from projector.fold import MAX_NAME_LENGTH
from stack import Server

MALFORMED = 10_000
VALID_EVERY = 10
"""One valid registration after every this many malformed records."""


def envelope_schema() -> dict:
    """The current envelope schema as JSON, to be modified."""
    path = resources.files("events").joinpath(f"schemas/envelope.v{SCHEMA_VERSION}.avsc")
    return json.loads(path.read_text())


def avro_body(schema: dict, event_type: str, dataset_id: uuid.UUID, command: tuple[str, dict]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {
        "event_id": str(uuid.uuid4()), "event_type": event_type, "schema_version": SCHEMA_VERSION,
        "produced_at": datetime.now(UTC), "producer_id": "malformed-test",
        "dataset_id": str(dataset_id), "command": command})
    return out.getvalue()


def unknown_event_type(rng: random.Random) -> bytes:
    """A valid envelope under the current fingerprint whose command is a type this reader does
    not know: written with a schema in which CreateDataset's branch is named PurgeDataset."""
    schema = envelope_schema()
    command_field = next(f for f in schema["fields"] if f["name"] == "command")
    command_field["type"][0]["name"] = "PurgeDataset"
    body = avro_body(schema, "PurgeDataset", uuid.uuid4(),
                     ("strata.events.PurgeDataset", {"name": f"purge-{rng.random()}"}))
    return MAGIC + schema_fingerprint(fastavro.parse_schema(envelope_schema())) + body


def future_schema(rng: random.Random) -> bytes:
    """An event from a newer release: a schema with an ArchiveDataset command, under its own
    (unknown) fingerprint."""
    schema = envelope_schema()
    command_field = next(f for f in schema["fields"] if f["name"] == "command")
    command_field["type"].append({"type": "record", "name": "ArchiveDataset",
                                  "fields": [{"name": "until", "type": "string"}]})
    body = avro_body(schema, "ArchiveDataset", uuid.uuid4(),
                     ("strata.events.ArchiveDataset", {"until": f"archive-{rng.random()}"}))
    return MAGIC + schema_fingerprint(fastavro.parse_schema(schema)) + body


def truncated(rng: random.Random) -> bytes:
    valid = encode(Event(uuid.uuid4(), RegisterLayer(f"cut-{rng.random()}", "base",
                                                     "file:///data/cut.rrd", size_bytes=7)))
    return valid[:rng.randrange(HEADER_SIZE, len(valid))]


def unknown_dataset(rng: random.Random) -> bytes:
    return encode(Event(uuid.uuid4(), RegisterLayer(f"orphan-{rng.random()}", "base",
                                                    "file:///data/orphan.rrd")))


def oversized_name(rng: random.Random) -> bytes:
    name = "n" * rng.randrange(MAX_NAME_LENGTH + 1, MAX_NAME_LENGTH + 5_000)
    return encode(Event(uuid.uuid4(), CreateDataset(name)))


def random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(0, 300))


# Each kind of malformed record and the reason the projector must give for it.
KINDS: dict[str, tuple[Callable[[random.Random], bytes], str]] = {
    "random bytes": (random_bytes, r"."),
    "truncated": (truncated, r"corrupt or truncated Avro body"),
    "unknown event type": (unknown_event_type, r"unknown event type 'PurgeDataset'"),
    "unknown dataset": (unknown_dataset, r"dataset [0-9a-f-]+ does not exist"),
    "oversized name": (oversized_name, rf"a dataset name has at most {MAX_NAME_LENGTH} characters"),
    "future schema": (future_schema, r"unknown writer schema fingerprint"),
}


def strata_command(*args: str) -> str:
    """Run the installed ``strata`` command line and return its output."""
    strata = Path(sys.executable).with_name("strata")
    finished = subprocess.run([str(strata), *args], capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


def test_malformed_records_are_rejected_and_the_stream_goes_on(
        server: Server, client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    rng = random.Random(7)
    kinds = list(KINDS)
    bad: dict[int, tuple[str, bytes]] = {}
    valid: dict[int, str] = {}
    failures: list[str] = []
    producer = Producer({"bootstrap.servers": server.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5})

    def produce(value: bytes, on_offset: Callable[[int], None]) -> None:
        def delivered(err, msg) -> None:
            if err is not None:
                failures.append(err.str())
            else:
                on_offset(msg.offset())
        while True:
            try:
                producer.produce(CATALOG_TOPIC, key=str(dataset.id).encode(), value=value,
                                 on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.1)

    for i in range(MALFORMED):
        kind = kinds[i % len(kinds)]
        value = KINDS[kind][0](rng)
        produce(value, lambda offset, kind=kind, value=value: bad.__setitem__(offset, (kind, value)))
        if i % VALID_EVERY == VALID_EVERY - 1:
            segment = f"valid-{i:05d}"
            event = Event(dataset.id, RegisterLayer(segment, "base", f"file:///data/{segment}.rrd"))
            produce(encode(event), lambda offset, segment=segment: valid.__setitem__(offset, segment))
    assert producer.flush(60) == 0
    assert failures == []
    assert len(bad) == MALFORMED and len(valid) == MALFORMED // VALID_EVERY

    # A registration after all of it is applied: the stream went on.
    after = make_rrd("after_malformed")
    assert dataset.register([after]).wait(timeout_secs=300).segment_ids == ["after_malformed"]
    assert server._projector is not None and server._projector.poll() is None

    rejections = {r.position.offset: r for r in client._internal.wait_for_store().rejections()
                  if r.position.topic == CATALOG_TOPIC}
    missing = sorted(set(bad) - set(rejections))
    assert missing == [], f"{len(missing)} malformed records not in the rejections table"
    for offset, (kind, value) in bad.items():
        rejection = rejections[offset]
        assert rejection.raw == value, (kind, offset)
        assert re.search(KINDS[kind][1], rejection.reason), (kind, rejection.reason)
    assert not set(valid) & set(rejections), "a valid event was rejected"
    assert set(dataset.segment_ids()) == set(valid.values()) | {"after_malformed"}

    # The command line lists each of them with its position, size and reason.
    listed = {}
    output = strata_command("rejections", "--data-dir", str(server.data_dir))
    for line in output.splitlines()[:-1]:
        position, size, reason = line.split("  ", 2)
        listed[int(position.rsplit("@", 1)[1])] = (int(size.removesuffix(" bytes")), reason)
    count = len(client._internal.wait_for_store().rejections())
    assert output.splitlines()[-1] == f"{count} rejected records"
    for offset, (_, value) in bad.items():
        assert listed[offset] == (len(value), rejections[offset].reason)
    print(f"malformed records: {len(bad)} rejected with their reason, {len(valid) + 1} valid "
          f"applied, {len(listed)} listed by strata rejections; by kind: "
          f"{ {k: sum(1 for kind, _ in bad.values() if kind == k) for k in KINDS} }")
