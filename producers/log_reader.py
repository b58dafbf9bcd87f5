"""Reading strata's topic back with a plain Kafka consumer: its end offsets, the offset of a time,
and a range of it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from events import CATALOG_TOPIC, TOPICS
from producers.kafka_config import RefusalWatch, client_config, cluster_metadata


def _consumer(bootstrap_servers: str, config: Mapping[str, Any] | None,
              refusal: RefusalWatch) -> Consumer:
    return Consumer(client_config(bootstrap_servers, config, {
        "group.id": f"strata-reader-{uuid.uuid4()}", "enable.auto.commit": False,
        "enable.partition.eof": True, "isolation.level": "read_committed", "error_cb": refusal}))


def end_offsets(bootstrap_servers: str, *, config: Mapping[str, Any] | None = None,
                timeout_secs: float = 30.0) -> dict[tuple[str, int], int]:
    """The next offset to be written, per (topic, partition) of strata's topics."""
    refusal = RefusalWatch()
    consumer = _consumer(bootstrap_servers, config, refusal)
    try:
        offsets = {}
        metadata = cluster_metadata(consumer, bootstrap_servers, refusal, timeout_secs)
        for topic in TOPICS:
            if topic not in metadata.topics:
                continue
            for partition in metadata.topics[topic].partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                         timeout=timeout_secs)
                offsets[(topic, partition)] = high
        return offsets
    except KafkaException as exc:
        raise ConnectionError(f"could not read offsets from Kafka at {bootstrap_servers}: {exc}") from exc
    finally:
        consumer.close()


def offset_after(bootstrap_servers: str, when: datetime, *, config: Mapping[str, Any] | None = None,
                 timeout_secs: float = 30.0) -> int:
    """The offset of the first record of the catalog topic produced after ``when`` (Kafka's
    record timestamps, in milliseconds), or the end of the log if none was: the records before it
    make the catalog as of ``when``."""
    refusal = RefusalWatch()
    consumer = _consumer(bootstrap_servers, config, refusal)
    after_ms = int(when.timestamp() * 1000) + 1
    try:
        cluster_metadata(consumer, bootstrap_servers, refusal, timeout_secs)
        [found] = consumer.offsets_for_times([TopicPartition(CATALOG_TOPIC, 0, after_ms)],
                                             timeout=timeout_secs)
        if found.offset >= 0:
            return int(found.offset)
        _, high = consumer.get_watermark_offsets(TopicPartition(CATALOG_TOPIC, 0), timeout=timeout_secs)
        return int(high)
    except KafkaException as exc:
        raise ConnectionError(f"could not look up offsets by time in Kafka at {bootstrap_servers}: "
                              f"{exc}") from exc
    finally:
        consumer.close()


def read_range(
    bootstrap_servers: str,
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    *,
    config: Mapping[str, Any] | None = None,
    timeout_secs: float = 60.0,
) -> list[tuple[str, int, int, bytes | None]]:
    """Every record from ``start`` (inclusive) to ``end`` (exclusive) per (topic, partition),
    as (topic, partition, offset, value)."""
    wanted = {key: (start.get(key, 0), stop) for key, stop in end.items() if start.get(key, 0) < stop}
    if not wanted:
        return []
    refusal = RefusalWatch()
    consumer = _consumer(bootstrap_servers, config, refusal)
    records = []
    try:
        consumer.assign([TopicPartition(t, p, first) for (t, p), (first, _) in wanted.items()])
        pending = set(wanted)
        deadline = time.monotonic() + timeout_secs
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading the log back did not finish within {timeout_secs:g} s; "
                                   f"still waiting for {sorted(pending)}")
            if refusal.reason is not None:
                raise ConnectionError(refusal.message(bootstrap_servers))
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                key = (message.topic(), message.partition())
                error, offset = message.error(), message.offset()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise ConnectionError(f"reading {key} failed: {error}")
                    pending.discard(key)  # at the end of the partition: nothing more to read
                    continue
                if offset is None:
                    raise ConnectionError(f"reading {key} gave a record without an offset")
                if key in pending and offset < wanted[key][1]:
                    records.append((*key, offset, message.value()))
                if key in pending and offset >= wanted[key][1] - 1:
                    pending.discard(key)
        return records
    finally:
        consumer.close()


class LogProbe:
    """One consumer kept open to measure a partition of strata's log again and again: its end
    offset, and when a record was appended (the dashboard's lag)."""

    def __init__(self, bootstrap_servers: str, *, config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._consumer = _consumer(bootstrap_servers, config, RefusalWatch())

    def end_offset(self, topic: str, partition: int, *, timeout_secs: float = 2.0) -> int:
        """The next offset to be written. Raises ``ConnectionError`` if Kafka does not answer."""
        try:
            return self._consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                        timeout=timeout_secs)[1]
        except KafkaException as exc:
            raise ConnectionError(f"could not read the end offset of {topic} from Kafka at "
                                  f"{self.bootstrap_servers}: {exc}") from exc

    def append_time(self, topic: str, partition: int, offset: int, *,
                    timeout_secs: float = 2.0) -> float | None:
        """When the record at ``offset`` was appended (seconds since the epoch); ``None`` if it
        could not be read within ``timeout_secs``."""
        self._consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + timeout_secs
        while (left := deadline - time.monotonic()) > 0:
            message = self._consumer.poll(min(left, 0.5))
            if message is not None and message.error() is None:
                kind, millis = message.timestamp()
                return millis / 1000 if kind != 0 else None  # 0: TIMESTAMP_NOT_AVAILABLE
        return None

    def close(self) -> None:
        self._consumer.close()
