"""Creating strata's topic on a broker, and checking an existing one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from events import TOPICS
from producers._logging import LOGGER


def ensure_topics(
    bootstrap_servers: str,
    *,
    config: Mapping[str, Any] | None = None,
    replication_factor: int = 1,
    timeout_secs: float = 30.0,
) -> None:
    """Create the topics that are missing, each with one partition (see ``events.topics``).

    Raises ``ConnectionError`` if the broker does not answer within ``timeout_secs``, and
    ``ValueError`` if an existing topic has more than one partition: its records would have no
    total order, and the projection would depend on timing.
    """
    admin = AdminClient({**(config or {}), "bootstrap.servers": bootstrap_servers, "logger": LOGGER})
    try:
        existing = admin.list_topics(timeout=timeout_secs).topics
    except KafkaException as exc:
        raise ConnectionError(
            f"Kafka at {bootstrap_servers} did not answer within {timeout_secs:g} s: {exc}") from exc
    for name in TOPICS:
        if name in existing and len(existing[name].partitions) != 1:
            raise ValueError(
                f"topic {name} on {bootstrap_servers} has {len(existing[name].partitions)} partitions; "
                "strata needs exactly one (one total order of commands). Recreate it with one "
                "partition, or point strata at another cluster.")
    missing = [NewTopic(name, num_partitions=1, replication_factor=replication_factor)
               for name in TOPICS if name not in existing]
    if not missing:
        return
    for name, future in admin.create_topics(missing, operation_timeout=timeout_secs).items():
        try:
            future.result(timeout=timeout_secs)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectionError(f"could not create topic {name}: {exc}") from exc
