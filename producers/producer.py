"""A typed, idempotent producer of strata events."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from events import Event, StrataError, encode, topic_for
from producers.kafka_config import RefusalWatch, client_config, librdkafka_config


@dataclass(frozen=True, order=True)
class Position:
    """Where an event landed in the log."""

    topic: str
    partition: int
    offset: int


class DeliveryError(StrataError, ConnectionError):
    """Kafka did not acknowledge one or more events in time; nothing was silently dropped.

    ``failed`` maps the event id of each unacknowledged event to the broker's or client's reason.
    """

    def __init__(self, message: str, failed: Mapping[uuid.UUID, str]) -> None:
        super().__init__(message)
        self.failed = dict(failed)


# Settings every strata producer needs; user settings (SASL, TLS, ...) are applied on top.
REQUIRED_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    # Java's default partitioner and Spark's Kafka sink place a key where this one does.
    "partitioner": "murmur2_random",
}
DEFAULT_CONFIG = {
    "linger.ms": 1,
    "compression.type": "lz4",
    # A producer made while its broker starts (a Server answers before Kafka is up) retries the
    # connection at most a second apart, not librdkafka's 10 s: its first write lands then.
    "reconnect.backoff.max.ms": 1000,
}


class EventProducer:
    """Sends events to their topics and reports where each one landed.

    The underlying confluent-kafka producer is created on first use.

    >>> producer = EventProducer("localhost:9092")
    >>> [position] = producer.send([event])  # doctest: +SKIP
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        config: Mapping[str, Any] | None = None,
        delivery_timeout_secs: float = 15.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.delivery_timeout_secs = delivery_timeout_secs
        self._refusal = RefusalWatch()
        settings = {**DEFAULT_CONFIG, **librdkafka_config(config)}
        self._config = client_config(bootstrap_servers, settings, {
            **REQUIRED_CONFIG,
            "delivery.timeout.ms": int(delivery_timeout_secs * 1000),
            # librdkafka accepts 1 s at least.
            "socket.connection.setup.timeout.ms": max(
                1000, min(10_000, int(delivery_timeout_secs * 1000))),
            "error_cb": self._refusal,
        })
        self._producer: Producer | None = None
        self._making = threading.Lock()

    def _get(self) -> Producer:
        """The producer, made on first use, once even when several threads send at once (each
        call's delivery reports are its own, whichever thread's poll serves them)."""
        with self._making:
            if self._producer is None:
                self._producer = Producer(self._config)
            return self._producer

    def send(self, events: Sequence[Event]) -> list[Position]:
        """Append ``events`` and wait for every delivery report.

        Returns the positions in the order of ``events``. Raises ``DeliveryError`` if any event is
        not acknowledged within ``delivery_timeout_secs`` (an unreachable broker, for example),
        naming the bootstrap servers and the reason; at once if the broker refuses the client's
        credentials or TLS settings, after dropping every event not yet sent.
        """
        producer = self._get()
        positions: dict[uuid.UUID, Position] = {}
        failed: dict[uuid.UUID, str] = {}

        def report(event_id: uuid.UUID) -> Callable[[KafkaError | None, Message], None]:
            def on_delivery(err: KafkaError | None, msg: Message) -> None:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if err is not None:
                    failed[event_id] = err.str()
                elif topic is None or partition is None or offset is None:
                    failed[event_id] = "a delivery report without the record's position"
                else:
                    positions[event_id] = Position(topic, partition, offset)
            return on_delivery

        for event in events:
            self._produce(producer, event, report(event.event_id))
        deadline = time.monotonic() + self.delivery_timeout_secs + 5.0
        while len(positions) + len(failed) < len(events) and time.monotonic() < deadline:
            producer.poll(0.05)
            if self._refusal.reason is not None:
                # Nothing reached the broker over a refused connection; purged, nothing will later.
                producer.purge()
                producer.poll(0)
                failed.update({e.event_id: self._refusal.reason for e in events
                               if e.event_id not in positions})
                raise DeliveryError(self._refusal.message(self.bootstrap_servers), failed)
        for event in events:
            if event.event_id not in positions and event.event_id not in failed:
                failed[event.event_id] = "no delivery report before the deadline"
        if failed:
            reason = next(iter(failed.values()))
            raise DeliveryError(
                f"Kafka at {self.bootstrap_servers} did not acknowledge {len(failed)} of "
                f"{len(events)} events within {self.delivery_timeout_secs:g} s ({reason}). "
                "Check that the broker is running and reachable (strata up, or --bootstrap-servers).",
                failed,
            )
        return [positions[event.event_id] for event in events]

    def _produce(self, producer: Producer, event: Event,
                 on_delivery: Callable[[KafkaError | None, Message], None]) -> None:
        while True:
            try:
                producer.produce(
                    topic_for(event.command),
                    key=str(event.entry_id).encode(),
                    value=encode(event),
                    on_delivery=on_delivery,
                )
                return
            except BufferError:
                # The local queue is full: serve delivery reports, then try again.
                producer.poll(0.1)
            except KafkaException as exc:
                raise DeliveryError(f"could not produce to Kafka: {exc}", {event.event_id: str(exc)}) from exc

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.delivery_timeout_secs)
            self._producer = None

    def __enter__(self) -> EventProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
