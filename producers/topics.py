"""Creating strata's topics on a broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from events import ENTRIES_TOPIC, LAYERS_TOPIC


def ensure_topics(
    bootstrap_servers: str,
    *,
    config: Mapping[str, Any] | None = None,
    layer_partitions: int = 2,
    replication_factor: int = 1,
    timeout_secs: float = 30.0,
) -> None:
    """Create the topics that are missing; existing ones are left as they are.

    The entries topic always has one partition: dataset names need one total order.
    Raises ``ConnectionError`` if the broker does not answer within ``timeout_secs``.
    """
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap_servers})
    wanted = {ENTRIES_TOPIC: 1, LAYERS_TOPIC: layer_partitions}
    try:
        existing = admin.list_topics(timeout=timeout_secs).topics
    except KafkaException as exc:
        raise ConnectionError(
            f"Kafka at {bootstrap_servers} did not answer within {timeout_secs:g} s: {exc}") from exc
    missing = [
        NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)
        for name, partitions in wanted.items() if name not in existing
    ]
    if not missing:
        return
    for name, future in admin.create_topics(missing, operation_timeout=timeout_secs).items():
        try:
            future.result(timeout=timeout_secs)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectionError(f"could not create topic {name}: {exc}") from exc
