"""Reading the changelog topic back as a plain confluent-kafka consumer would, and the catalog
it describes next to the store's."""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Consumer, KafkaError, TopicPartition

import sdk
from changelog import CHANGES_TOPIC, OFFSET_HEADER, decode_value
from stack import Server


def read_changelog(bootstrap_servers: str) -> tuple[dict[tuple, dict | None], int, int]:
    """The topic from the beginning, the last value per key; the number of records read and the
    source offset in the last one's header."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"test-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    latest: dict[tuple, dict | None] = {}
    count, last_offset = 0, -1
    try:
        consumer.assign([TopicPartition(CHANGES_TOPIC, 0, 0)])
        while True:
            message = consumer.poll(10)
            assert message is not None, "the changelog topic did not answer"
            if message.error() is not None:
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                return latest, count, last_offset
            key = tuple(json.loads(message.key()))
            latest[key] = None if message.value() is None else decode_value(message.value())
            last_offset = int.from_bytes(dict(message.headers())[OFFSET_HEADER], "big")
            count += 1
    finally:
        consumer.close()


def catalog_of_topic(latest: dict[tuple, dict | None]) -> dict[tuple, tuple]:
    """What the topic says the catalog is, tombstoned keys gone, in the fields compared below."""
    fields = {"DatasetState": ("name", "default_blueprint"), "SegmentState": ("position",),
              "LayerState": ("storage_url", "registered_offset"), "TableState": ("name", "revision"),
              "RejectionState": ("reason",)}
    out = {}
    for key, value in latest.items():
        if value is not None:
            kind, state = value["state"]
            out[key] = tuple(state[f] for f in fields[kind.rsplit(".", 1)[-1]])
    return out


def catalog_of_store(client: sdk.CatalogClient) -> dict[tuple, tuple]:
    store = client._internal.wait_for_store()
    out: dict[tuple, tuple] = {}
    for d in store.datasets():
        out[("dataset", str(d.id))] = (d.name, d.default_blueprint)
        for s in store.segments(d.id):
            out[("segment", str(d.id), s.segment_id)] = (s.position,)
        for x in store.layers(d.id):
            out[("layer", str(d.id), x.segment_id, x.layer_name)] = (x.storage_url, x.registered_by.offset)
    for t in store.tables():
        out[("table", str(t.id))] = (t.name, t.revision)
    for r in store.rejections():
        p = r.position
        out[("rejection", p.topic, str(p.partition), str(p.offset))] = (r.reason,)
    return out


def wait_for_changelog(server: Server, client: sdk.CatalogClient,
                       timeout_secs: float = 30) -> tuple[dict, int]:
    """Until the topic's last record follows the store's last change; the topic's catalog then."""
    wanted = list(client.changes(0, timeout_secs=0))[-1].position.offset
    deadline = time.monotonic() + timeout_secs
    while True:
        latest, count, last_offset = read_changelog(server.bootstrap_servers)
        if last_offset >= wanted or time.monotonic() > deadline:
            return latest, count
        time.sleep(0.2)
