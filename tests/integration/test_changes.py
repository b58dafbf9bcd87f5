"""The change feed on the real stack: ``client.changes()`` and the compacted changelog topic,
read with a plain confluent-kafka consumer."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

import sdk
from changelog import CHANGES_TOPIC, ChangelogRelay
from changelog_topic import catalog_of_store, catalog_of_topic, wait_for_changelog
from events import CATALOG_TOPIC, Event, RegisterLayer
from producers import EventProducer
from sdk import ChangeKind
from stack import Server
from stack_tools import produce_raw

K = ChangeKind


def test_changes_follow_registrations_and_resume_exactly_once(client: sdk.CatalogClient, dataset,
                                                             make_rrd) -> None:
    uris = [make_rrd(f"feed_{i}") for i in range(4)]
    start = client._internal.wait_for_store().next_offsets()[(CATALOG_TOPIC, 0)]
    seen: list[sdk.Change] = []
    follower = threading.Thread(target=lambda: seen.extend(
        client.changes(dataset=dataset.name, timeout_secs=5)), daemon=True)
    follower.start()
    time.sleep(0.5)  # the follower starts from the end of the feed, before these registrations
    dataset.register(uris[:2]).wait()
    dataset.register(uris[2:]).wait()
    dataset.register([uris[0]], layer_name="extra").wait()
    dataset.unregister(segments_to_drop=["feed_1"]).wait()
    follower.join(timeout=30)
    assert not follower.is_alive()

    assert [(c.kind, c.segment_id, c.layer_name) for c in seen] == [
        *[(kind, f"feed_{i}", layer) for i in range(4)
          for kind, layer in ((K.LAYER_ADDED, "base"), (K.SEGMENT_ADDED, ""))],
        (K.LAYER_ADDED, "feed_0", "extra"),
        (K.LAYER_REMOVED, "feed_1", "base"), (K.SEGMENT_REMOVED, "feed_1", ""),
    ]
    assert all(c.entry_id == dataset.id and c.entry_name == dataset.name for c in seen)
    assert [c.detail for c in seen if c.kind is K.LAYER_ADDED][:4] == uris
    # From an offset, and resumed after any change: the same changes, each once.
    assert list(client.changes(start, dataset=dataset, timeout_secs=0)) == seen
    for stop in range(len(seen)):
        assert list(client.changes(seen[stop], dataset=dataset, timeout_secs=0)) == seen[stop + 1:]


def test_changes_report_rejections_with_their_reasons(server: Server, client: sdk.CatalogClient,
                                                      dataset) -> None:
    after = client._internal.wait_for_store().next_offsets()[(CATALOG_TOPIC, 0)]
    with EventProducer(server.bootstrap_servers) as producer:
        negative = RegisterLayer("s1", "base", "file:///x.rrd", size_bytes=-5)
        [bad] = producer.send([Event(dataset.id, negative)])
    garbage = produce_raw(server.bootstrap_servers, b"\x00 not an event")
    client._internal.wait([bad, garbage], 60)
    rejected = [c for c in client.changes(after, timeout_secs=0) if c.kind is K.REJECTED]
    assert [(c.position.offset, c.entry_id, c.detail) for c in rejected] == [
        (bad.offset, dataset.id, "size_bytes must not be negative, got -5"),
        (garbage.offset, None, "not an Avro single-object encoded event (missing C3 01 header)")]


def test_bad_arguments_fail_at_the_call(client: sdk.CatalogClient) -> None:
    with pytest.raises(ValueError, match="since must be a log offset"):
        client.changes(-1)
    with pytest.raises(LookupError):
        client.changes(dataset=f"no-such-dataset-{uuid.uuid4()}")


# -- the changelog topic ------------------------------------------------------------------------


def test_the_changelog_topic_read_from_the_start_is_the_catalog(server: Server, client: sdk.CatalogClient,
                                                               dataset, make_rrd) -> None:
    uris = [make_rrd(f"log_{i}") for i in range(3)]
    dataset.register(uris).wait()
    dataset.register([uris[1]], layer_name="extra").wait()
    dataset.unregister(segments_to_drop=["log_2"]).wait()
    dataset.register([make_rrd("log_0", name="log_0_v2")], on_duplicate="replace").wait()
    gone = client.create_dataset(f"gone-{uuid.uuid4().hex[:8]}")
    gone.register([uris[0]]).wait()
    gone.delete()
    with EventProducer(server.bootstrap_servers) as producer:
        positions = producer.send([Event(dataset.id, RegisterLayer("s1", "", "file:///x.rrd"))])
        client._internal.wait(positions, 60)

    latest, _ = wait_for_changelog(server, client)
    assert catalog_of_topic(latest) == catalog_of_store(client)
    # What was removed is a tombstone: the unregistered segment and the deleted dataset's layer.
    d, g = str(dataset.id), str(gone.id)
    assert latest[("segment", d, "log_2")] is None and latest[("layer", d, "log_2", "base")] is None
    assert latest[("dataset", g)] is None and latest[("layer", g, "log_0", "base")] is None
    assert latest[("layer", d, "log_0", "base")]["state"][1]["storage_url"].endswith("log_0_v2.rrd")
    # The topic is compacted, so a new subscriber reads one record per key, eventually.
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, CHANGES_TOPIC)]).values()
    assert future.result(timeout=30)["cleanup.policy"].value == "compact"


def test_a_relay_started_again_repeats_harmlessly(server: Server, client: sdk.CatalogClient, dataset,
                                                  make_rrd) -> None:
    dataset.register([make_rrd("again_0")]).wait()
    before, count = wait_for_changelog(server, client)
    # A second relay (as after a crash of the first) publishes again from the topic's last
    # record: that record repeats, and the catalog read from the topic is unchanged.
    relay = ChangelogRelay(client._internal.wait_for_store(), server.bootstrap_servers)
    relay.start()
    try:
        deadline = time.monotonic() + 30
        while relay.published == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        relay.stop()
    assert relay.published >= 1
    after, count_after = wait_for_changelog(server, client)
    assert count_after > count
    assert catalog_of_topic(after) == catalog_of_topic(before) == catalog_of_store(client)
