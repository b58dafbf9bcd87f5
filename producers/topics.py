"""Creating strata's topic on a broker, and checking an existing one."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from events import TOPICS
from producers.kafka_config import RefusalWatch, client_config, cluster_metadata

KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
"""What strata's topics need: the log is the truth, and a replay from offset 0 must find every
record that was ever acknowledged."""


def ensure_topics(
    bootstrap_servers: str,
    *,
    config: Mapping[str, Any] | None = None,
    allow_finite_retention: bool = False,
    timeout_secs: float = 30.0,
) -> None:
    """Create the topics that are missing, each with one partition (see ``events.topics``), kept
    forever (``KEEP_FOREVER``), on min(3, brokers) replicas with ``min.insync.replicas`` of
    min(2, replicas).

    Raises ``ConnectionError`` if the broker does not answer within ``timeout_secs``, and
    ``ValueError`` if an existing topic has more than one partition (its records would have no
    total order, and the projection would depend on timing) or may delete records (a finite
    retention, or compaction) unless ``allow_finite_retention``.
    """
    refusal = RefusalWatch()
    admin = AdminClient(client_config(bootstrap_servers, config, {"error_cb": refusal}))
    metadata = cluster_metadata(admin, bootstrap_servers, refusal, timeout_secs)
    existing = metadata.topics
    for name in TOPICS:
        if name in existing and len(existing[name].partitions) != 1:
            raise ValueError(
                f"topic {name} on {bootstrap_servers} has {len(existing[name].partitions)} partitions; "
                "strata needs exactly one (one total order of commands). Recreate it with one "
                "partition, or point strata at another cluster.")
    present = [name for name in TOPICS if name in existing]
    if present and not allow_finite_retention:
        _check_kept_forever(admin, bootstrap_servers, present, timeout_secs)
    replicas = min(3, len(metadata.brokers))
    settings = {**KEEP_FOREVER, "min.insync.replicas": str(min(2, replicas))}
    create_topics(admin, [NewTopic(name, num_partitions=1, replication_factor=replicas, config=settings)
                          for name in TOPICS if name not in existing], timeout_secs)


def wait_for_topics(
    bootstrap_servers: str,
    *,
    config: Mapping[str, Any] | None = None,
    timeout_secs: float = 240.0,
    poll_secs: float = 0.1,
) -> None:
    """Wait until the broker answers and has every strata topic (another process creates them:
    ``ensure_topics``). Raises ``ConnectionError`` if that has not happened within
    ``timeout_secs`` (saying whether the broker answered), or at once if it refuses the client's
    credentials or TLS settings."""
    refusal = RefusalWatch()
    admin = AdminClient(client_config(bootstrap_servers, config, {"error_cb": refusal}))
    deadline = time.monotonic() + timeout_secs
    while True:
        try:
            metadata = cluster_metadata(admin, bootstrap_servers, refusal,
                                        max(0.1, deadline - time.monotonic()))
        except ConnectionError:
            if refusal.reason is not None:
                raise
            metadata = None
        missing = [name for name in TOPICS if metadata is None or name not in metadata.topics]
        if not missing:
            return
        if time.monotonic() >= deadline:
            found = ("did not answer" if metadata is None
                     else f"has no topic {', '.join(missing)} (strata up creates them)")
            raise ConnectionError(f"Kafka at {bootstrap_servers} {found} within {timeout_secs:g} s")
        time.sleep(poll_secs)


def create_topics(admin: AdminClient, topics: list[NewTopic], timeout_secs: float) -> None:
    """Create ``topics``; one that another client created meanwhile is fine."""
    if not topics:
        return
    for name, future in admin.create_topics(topics, operation_timeout=timeout_secs).items():
        try:
            future.result(timeout=timeout_secs)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectionError(f"could not create topic {name}: {exc}") from exc


def _check_kept_forever(admin: AdminClient, bootstrap_servers: str, names: list[str],
                        timeout_secs: float) -> None:
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_secs).items():
        try:
            found = {key: entry.value for key, entry in future.result(timeout=timeout_secs).items()}
        except KafkaException as exc:
            raise ConnectionError(f"could not read the settings of topic {resource.name}: {exc}") from exc
        wrong = {key: found.get(key) for key, value in KEEP_FOREVER.items() if found.get(key) != value}
        if wrong:
            shown = ", ".join(f"{key}={value}" for key, value in wrong.items())
            wanted = ",".join(f"{key}={KEEP_FOREVER[key]}" for key in wrong)
            raise ValueError(
                f"topic {resource.name} on {bootstrap_servers} may delete records ({shown}): strata's "
                "log is the truth, and a replay would silently miss what the broker deleted. Keep it "
                f"forever with 'kafka-configs.sh --bootstrap-server {bootstrap_servers} --alter "
                f"--entity-type topics --entity-name {resource.name} --add-config {wanted}', or "
                "accept it knowingly with --allow-finite-retention (Server(allow_finite_retention=True))")
