"""Bad input: clear errors, nothing produced, nothing lost, and the stream goes on."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import sdk
from events import CATALOG_TOPIC, TOPICS
from sdk._server import Server


def end_offsets(server: Server) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "strata-test"})
    try:
        offsets = {}
        for topic in TOPICS:
            for partition in consumer.list_topics(topic, timeout=10).topics[topic].partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                offsets[(topic, partition)] = high
        return offsets
    finally:
        consumer.close()


def test_bad_registrations_produce_nothing(server: Server, dataset: sdk.DatasetEntry,
                                           make_rrd, tmp_path) -> None:
    good = make_rrd("bad_input_ok")
    before = end_offsets(server)
    with pytest.raises(sdk.NotFoundError):
        dataset.register([good, (tmp_path / "missing.rrd").as_uri()])
    with pytest.raises(ValueError, match="file://"):
        dataset.register([str(tmp_path / "plain-path.rrd")])
    with pytest.raises(ValueError, match="is not a file"):
        dataset.register([tmp_path.as_uri()])
    corrupt = tmp_path / "corrupt.rrd"
    corrupt.write_bytes(os.urandom(256))
    with pytest.raises(ValueError, match="not a readable"):
        dataset.register([corrupt.as_uri()])
    with pytest.raises(ValueError, match="appears twice"):
        dataset.register([good, good])
    with pytest.raises(ValueError, match="on_duplicate"):
        dataset.register([good], on_duplicate="overwrite")
    with pytest.raises(ValueError, match="layer_name"):
        dataset.register([good], layer_name=["a", "b"])
    with pytest.raises(ValueError):
        dataset.register([])
    assert end_offsets(server) == before


def test_malformed_records_are_rejected_and_the_stream_goes_on(
        server: Server, client: sdk.CatalogClient, dataset: sdk.DatasetEntry, make_rrd) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap_servers})
    bad_values = [os.urandom(64), b"", b"\xc3\x01" + os.urandom(8) + b"body"]
    for value in bad_values:
        producer.produce(CATALOG_TOPIC, key=str(dataset.id).encode(), value=value)
    assert producer.flush(10) == 0

    # A valid registration after the garbage is applied: the projector kept going.
    assert dataset.register([make_rrd("after_garbage")]).wait().segment_ids == ["after_garbage"]
    rejections = [r for r in client._store.rejections() if r.raw in bad_values]
    assert len(rejections) == len(bad_values)
    assert {r.raw for r in rejections} == set(bad_values)
    assert all(r.reason for r in rejections)


def test_wait_times_out_while_the_projector_is_down_then_applies_once(
        server: Server, dataset: sdk.DatasetEntry, make_rrd) -> None:
    server.stop_projector()
    try:
        operation = dataset.register([make_rrd("while_down")])
        started = time.monotonic()
        with pytest.raises(TimeoutError) as raised:
            operation.wait(timeout_secs=2)
        assert time.monotonic() - started < 4
        message = str(raised.value)
        assert CATALOG_TOPIC in message and "next offset" in message
    finally:
        server.start_projector()
    assert operation.wait(timeout_secs=120).segment_ids == ["while_down"]
    assert dataset.segment_ids().count("while_down") == 1


def test_producer_reports_an_unreachable_broker(make_rrd, tmp_path) -> None:
    from sdk._processes import free_port

    client = sdk.CatalogClient(f"127.0.0.1:{free_port()}", tmp_path / "store.db",
                               delivery_timeout_secs=2)
    started = time.monotonic()
    with pytest.raises(sdk.DeliveryError, match="did not acknowledge"):
        client.create_dataset("unreachable")
    assert time.monotonic() - started < 15
    client.close()
