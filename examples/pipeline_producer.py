"""Register recordings from a data pipeline with confluent-kafka and the Avro schema alone.

This script does not import strata: it is what a pipeline in any language does. Each command is
one Kafka record on the topic ``strata.catalog`` (one partition), keyed by the dataset id (UTF-8),
whose value is Avro single-object encoded: ``C3 01``, the 8-byte little-endian CRC-64-AVRO
fingerprint of the writer schema, then the Avro binary body (schema: events/schemas/envelope.v6.avsc).

A recording's Arrow schema travels by reference: the first time the pipeline meets a schema it
produces a ``DefineSchema`` event (the schema's SHA-256 and its Arrow IPC bytes), and every
``RegisterLayer`` names the schema by that digest. Both go to the same partition, the definition
first, so the log stays self-contained. Defining a schema the catalog already has changes nothing.

    python examples/pipeline_producer.py --bootstrap-servers localhost:9092 \\
        --dataset-id 0b6f...  ILIAD_50aee79f=file:///data/ILIAD_50aee79f.rrd

Prints the offset of each RegisterLayer; the registration is visible once the projection store's
next offset for the partition is past it. The dataset must exist already (create it with the SDK
or a CreateDataset command).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

import fastavro
from confluent_kafka import Producer

TOPIC = "strata.catalog"
SCHEMA_FILE = Path(__file__).resolve().parents[1] / "events" / "schemas" / "envelope.v6.avsc"


def load_schema(path: Path) -> tuple[dict, bytes]:
    """The parsed schema and the single-object header that announces it."""
    schema = fastavro.parse_schema(json.loads(path.read_text()))
    canonical = fastavro.schema.to_parsing_canonical_form(schema)
    # fastavro gives the fingerprint's bytes in little-endian order already, as the wire wants.
    return schema, b"\xc3\x01" + bytes.fromhex(fastavro.schema.fingerprint(canonical, "CRC-64-AVRO"))


def envelope(dataset_id: str, command_type: str, command: dict) -> dict:
    return {
        "event_id": str(uuid.uuid4()),
        "event_type": command_type,
        "schema_version": 5,
        "produced_at": datetime.now(UTC),
        "producer_id": "example-pipeline",
        "dataset_id": dataset_id,
        "command": (f"strata.events.{command_type}", command),
    }


def recording_schema(path: Path) -> bytes:
    """The recording's Arrow schema as an Arrow IPC schema message, read with rerun-sdk."""
    from rerun.chunk import RrdReader

    reader = RrdReader(path)
    schema = reader.store(store=reader.recordings()[0]).schema().to_arrow()
    return schema.serialize().to_pybytes()


def register_layer(dataset_id: str, segment_id: str, path: Path, url: str, layer: str,
                   on_duplicate: str, schema_sha256: str) -> dict:
    return envelope(dataset_id, "RegisterLayer", {
        "segment_id": segment_id, "layer_name": layer, "storage_url": url,
        "on_duplicate": on_duplicate, "size_bytes": path.stat().st_size,
        "schema_sha256": schema_sha256, "properties_schema_sha256": "", "properties_batch": b"",
        "arrow_schema": b"", "properties": b"", "num_chunks": None, "index_ranges": []})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--dataset-id", required=True, help="the dataset's UUID")
    parser.add_argument("--layer", default="base", help="layer name (default base)")
    parser.add_argument("--on-duplicate", default="error", choices=["error", "skip", "replace"])
    parser.add_argument("recordings", nargs="+", metavar="SEGMENT_ID=URL")
    args = parser.parse_args()
    schema, header = load_schema(SCHEMA_FILE)
    producer = Producer({"bootstrap.servers": args.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "partitioner": "murmur2_random"})

    def report(err, msg) -> None:
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        print(f"{msg.topic()}[{msg.partition()}]@{msg.offset()}")

    def produce(record: dict, on_delivery) -> None:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, record)
        producer.produce(TOPIC, key=dataset_id.encode(), value=header + body.getvalue(),
                         on_delivery=on_delivery)

    def defined(err, msg) -> None:
        if err is not None:
            raise SystemExit(f"delivery failed: {err}")
        print(f"schema defined at {msg.topic()}[{msg.partition()}]@{msg.offset()}", file=sys.stderr)

    dataset_id = str(uuid.UUID(args.dataset_id))
    defined_digests: set[str] = set()
    for item in args.recordings:
        segment_id, _, url = item.partition("=")
        path = Path(unquote(urlparse(url).path))
        schema_bytes = recording_schema(path)
        digest = hashlib.sha256(schema_bytes).hexdigest()
        if digest not in defined_digests:
            produce(envelope(dataset_id, "DefineSchema", {"sha256": digest, "arrow_schema": schema_bytes}),
                    defined)
            defined_digests.add(digest)
        produce(register_layer(dataset_id, segment_id, path, url, args.layer, args.on_duplicate, digest),
                report)
    if producer.flush(30) != 0:
        raise SystemExit("not every event was delivered within 30 s")


if __name__ == "__main__":
    main()
