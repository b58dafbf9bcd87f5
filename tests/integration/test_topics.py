"""strata's topics keep every record: created that way, and an existing topic that may delete
records (finite retention, compaction) is refused unless accepted knowingly."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from events import CATALOG_TOPIC, TOPICS
from producers import ensure_topics
from stack import Server
from stack.broker import EmbeddedBroker


def topic_settings(bootstrap: str, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [future] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)]).values()
    return {key: entry.value for key, entry in future.result(timeout=30).items()}


def test_strata_creates_its_topics_to_keep_every_record(server: Server) -> None:
    topics = AdminClient({"bootstrap.servers": server.bootstrap_servers}).list_topics(timeout=30).topics
    for name in TOPICS:
        found = topic_settings(server.bootstrap_servers, name)
        kept = (found["retention.ms"], found["retention.bytes"], found["cleanup.policy"])
        assert kept == ("-1", "-1", "delete")
        # One broker: one replica, and one in-sync replica is enough to acknowledge.
        assert found["min.insync.replicas"] == "1"
        assert [len(p.replicas) for p in topics[name].partitions.values()] == [1]


@pytest.fixture(scope="module")
def other_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = EmbeddedBroker(tmp_path_factory.mktemp("broker"))
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def alter(bootstrap: str, **settings: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
               for key, value in settings.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, CATALOG_TOPIC, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


@pytest.mark.parametrize("settings", [{"retention.ms": "604800000"}, {"retention.bytes": "1073741824"},
                                      {"cleanup.policy": "compact"}], ids=["time", "size", "compaction"])
def test_a_topic_that_may_delete_records_is_refused_unless_accepted(other_broker: str, settings,
                                                                   tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": other_broker})
    if CATALOG_TOPIC not in admin.list_topics(timeout=30).topics:
        [future] = admin.create_topics([NewTopic(CATALOG_TOPIC, 1, 1)]).values()
        future.result(timeout=30)
    alter(other_broker, **{"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete",
                           **settings})
    [(key, value)] = settings.items()
    with pytest.raises(ValueError, match=rf"may delete records \({key}={value}\).*kafka-configs.sh.*"
                                         r"--allow-finite-retention"):
        ensure_topics(other_broker)
    ensure_topics(other_broker, allow_finite_retention=True)
    assert topic_settings(other_broker, CATALOG_TOPIC)[key] == value  # strata changed nothing

    # From the command line: a one-line error, before anything starts.
    done = subprocess.run([sys.executable, "-m", "stack.cli", "up", "--data-dir", str(tmp_path),
                           "--bootstrap-servers", other_broker], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    refused = f"strata: error: topic {CATALOG_TOPIC} on {other_broker} may delete records"
    assert done.stderr.startswith(refused)
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoint").exists() and not (tmp_path / "store.db").exists()
