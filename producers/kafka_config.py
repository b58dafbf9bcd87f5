"""strata's Kafka client settings, in librdkafka's names (what confluent-kafka takes), for every
confluent-kafka client strata makes. ``spark_streaming.options.java_config`` gives Spark's Kafka
source the same settings in the Java client's names; a setting named ``kafka.KEY`` is Spark's
only, and librdkafka clients never see it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from producers._logging import LOGGER

SPARK_ONLY_PREFIX = "kafka."


def librdkafka_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings for a confluent-kafka client: all but Spark's ``kafka.KEY`` ones."""
    return {key: value for key, value in (config or {}).items()
            if not key.startswith(SPARK_ONLY_PREFIX)}


def client_config(bootstrap_servers: str, config: Mapping[str, Any] | None,
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of a confluent-kafka client of ``bootstrap_servers``: ``config``
    (``librdkafka_config``), then ``extra``, and librdkafka's log lines sent to ``LOGGER``."""
    return {**librdkafka_config(config), **(extra or {}), "bootstrap.servers": bootstrap_servers,
            "logger": LOGGER}


REFUSALS = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._SSL}


class RefusalWatch:
    """A client's ``error_cb`` that keeps the broker's refusal of its credentials or TLS
    settings, which librdkafka otherwise retries until a request times out."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.code() in REFUSALS:
            self.reason = error.str()

    def message(self, bootstrap_servers: str) -> str:
        return (f"Kafka at {bootstrap_servers} refused the connection: {self.reason}. Check the "
                "Kafka client settings (security.protocol, sasl.mechanism, sasl.username, "
                "sasl.password, ssl.ca.location: kafka_config, --kafka-option or "
                "STRATA_KAFKA_OPTIONS)")


def cluster_metadata(client: AdminClient | Consumer, bootstrap_servers: str, refusal: RefusalWatch,
                     timeout_secs: float) -> ClusterMetadata:
    """The cluster's metadata, from a client whose ``error_cb`` is ``refusal``. Raises
    ``ConnectionError`` at once if the broker refuses the client's credentials or TLS settings,
    or if it does not answer within ``timeout_secs``."""
    deadline = time.monotonic() + timeout_secs
    while True:
        try:
            return client.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
        except KafkaException as exc:
            client.poll(0)
            if refusal.reason is not None:
                raise ConnectionError(refusal.message(bootstrap_servers)) from None
            if time.monotonic() >= deadline:
                raise ConnectionError(f"Kafka at {bootstrap_servers} did not answer within "
                                      f"{timeout_secs:g} s: {exc}") from exc
