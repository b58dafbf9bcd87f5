"""The relay: follows the store's change feed and publishes it to the changelog topic."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from changelog.follower import Follower
from changelog.records import (
    CHANGES_TOPIC,
    OFFSET_HEADER,
    Key,
    key_of,
    offset_headers,
    records_of,
    source_offset,
)
from producers import LOGGER
from producers.kafka_config import RefusalWatch, cluster_metadata, librdkafka_config
from producers.topics import create_topics
from projector import Change, ProjectionReader
from projector.feed import follow_pages

log = logging.getLogger("strata.changelog")

RETRY_SECS = 5.0
"""How long the relay waits before starting again after Kafka failed it."""
COMPACTED = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}


class ChangelogRelay(Follower[ProjectionReader]):
    """Publishes the feed of ``store`` to ``CHANGES_TOPIC`` on ``bootstrap_servers``, from where the
    topic's last record left off, until ``stop()``.

    >>> relay = ChangelogRelay(SqliteStore(path, read_only=True), "localhost:9092")  # doctest: +SKIP
    >>> relay.start()  # a daemon thread
    """

    thread_name = "strata-changelog"

    def __init__(self, store: ProjectionReader, bootstrap_servers: str, *,
                 config: Mapping[str, Any] | None = None) -> None:
        super().__init__(store)
        self.bootstrap_servers = bootstrap_servers
        self.config = {**librdkafka_config(config), "bootstrap.servers": bootstrap_servers,
                       "logger": LOGGER}
        self.published = 0
        """Records produced so far (tombstones included), for progress lines."""
        self._failure: str | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.relay()
            except (KafkaException, ConnectionError, RuntimeError) as exc:
                log.warning("changelog relay stopped: %s; starting again in %.0f s", exc, RETRY_SECS)
                self._stop.wait(RETRY_SECS)

    def relay(self) -> None:
        """Create the topic if needed, find where it left off and publish from there until
        ``stop()``. Raises on a Kafka failure."""
        ensure_changelog_topic(self.bootstrap_servers, self.config)
        after = (resume_offset(self.config), -1)
        producer = Producer({**self.config, "enable.idempotence": True, "linger.ms": 5,
                             "compression.type": "lz4", "error_cb": self._on_error})
        self._failure = None
        log.info("changelog relay: publishing the feed from offset %d to %s", after[0], CHANGES_TOPIC)
        try:
            while not self._stop.is_set():
                # Pages of the feed, a key changed several times in one published once; the idle
                # timeout comes back here to check for a stop or a failed delivery.
                for page in follow_pages(self.store, after, timeout_secs=0.5):
                    if self._stop.is_set():
                        break
                    self._check()
                    self._publish(producer, page)
                    after = page[-1].cursor
                self._check()
                producer.poll(0)
        finally:
            producer.flush(10)

    def _check(self) -> None:
        if self._failure is not None:
            raise RuntimeError(self._failure)

    def _publish(self, producer: Producer, page: list[Change]) -> None:
        latest: dict[Key, Change] = {}
        for change in page:
            key = key_of(change)
            if key is not None:
                latest.pop(key, None)  # re-inserted: the dict stays in order of last change
                latest[key] = change
        for change, kafka_key, value in records_of(self.store, latest):
            headers = offset_headers(change.position.offset)
            while True:
                try:
                    producer.produce(CHANGES_TOPIC, value, kafka_key, headers=headers,
                                     on_delivery=self._on_delivery)
                    break
                except BufferError:  # the local queue is full: let it drain
                    producer.poll(0.1)
            self.published += 1
        producer.poll(0)

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self._failure = f"a changelog record was not delivered: {err}"

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._failure = f"the changelog producer failed: {err}"


def ensure_changelog_topic(bootstrap_servers: str, config: Mapping[str, Any],
                           timeout_secs: float = 30.0) -> None:
    """Create the compacted changelog topic (one partition) if it is missing."""
    refusal = RefusalWatch()
    admin_config: dict[str, Any] = {**config, "error_cb": refusal}  # confluent's stubs allow no callables
    admin = AdminClient(admin_config)
    metadata = cluster_metadata(admin, bootstrap_servers, refusal, timeout_secs)
    if CHANGES_TOPIC in metadata.topics:
        return
    replicas = min(3, len(metadata.brokers))
    create_topics(admin, [NewTopic(CHANGES_TOPIC, num_partitions=1, replication_factor=replicas,
                                   config=COMPACTED)], timeout_secs)


def _watermarks(consumer: Consumer, partition: TopicPartition, timeout_secs: float) -> tuple[int, int]:
    """The partition's low and high offsets; a topic just created may be unknown to the broker
    answering for a moment, and is asked again until ``timeout_secs``."""
    deadline = time.monotonic() + timeout_secs
    while True:
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=timeout_secs)
            return low, high
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def resume_offset(config: Mapping[str, Any], timeout_secs: float = 30.0) -> int:
    """The source offset in the changelog's last record: the relay publishes again from there
    (that record's change included, harmlessly); 0 for an empty topic. Raises ``ConnectionError``
    if the topic cannot be read, ``RuntimeError`` if its last record is not one strata wrote."""
    consumer = Consumer({**config, "group.id": f"strata-changelog-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        partition = TopicPartition(CHANGES_TOPIC, 0)
        low, high = _watermarks(consumer, partition, timeout_secs)
        if high <= low:
            return 0
        consumer.assign([TopicPartition(CHANGES_TOPIC, 0, high - 1)])
        deadline = time.monotonic() + timeout_secs
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise ConnectionError(f"reading {CHANGES_TOPIC} failed: {message.error()}")
            offset = source_offset(dict(message.headers() or []))
            if offset is None:
                raise RuntimeError(f"the last record of {CHANGES_TOPIC} has no 8-byte {OFFSET_HEADER} "
                                   "header: the topic holds records strata did not write")
            return offset
        raise ConnectionError(f"reading the last record of {CHANGES_TOPIC} took over {timeout_secs:g} s")
    finally:
        consumer.close()


PARENT_CHECK_SECS = 1.0
"""How often a relay in a process of its own checks that the projector that started it lives."""

NICENESS = 10
"""Added to the relay process's niceness: under a burst the fold gets the cores first, and the
relay publishes behind it (the store, not the changelog, is what a write waits for). 200,000
registrations sent to a ``Server`` were in the store after 27.4 s and in the changelog after
32.5 s, against 31.3 s and 33.3 s at the projector's niceness."""


class RelayProcess:
    """A ``ChangelogRelay`` of the store at ``location``, in a process of its own until ``stop()``
    (or until the process that started it ends).

    The relay reads the feed and encodes every change in Python. As a thread of the projector it
    held Python's interpreter lock 60% of the time under a burst, and the projector's fold waited
    for it: 200,000 registrations were visible at 4,700-5,000 events/s, 7,600 without the relay.
    Its process runs ``NICENESS`` below the projector's priority.

    >>> relay = RelayProcess(".strata/store.db", "localhost:9092")  # doctest: +SKIP
    >>> relay.start()  # a child process  # doctest: +SKIP
    """

    def __init__(self, location: str, bootstrap_servers: str, *, config: Mapping[str, Any] | None = None,
                 log_format: str = logging.BASIC_FORMAT) -> None:
        """``log_format``: of the relay's log lines, written to this process's standard error at
        its root logger's level."""
        context = multiprocessing.get_context("spawn")  # not fork: the projector runs threads
        self._stop = context.Event()
        logs = (logging.getLogger().level, log_format)
        self._process = context.Process(
            target=_relay_until, name="strata-changelog", daemon=True,
            args=(location, bootstrap_servers, dict(config or {}), self._stop, os.getpid(), logs))

    def start(self) -> None:
        self._process.start()

    @property
    def pid(self) -> int | None:
        """The relay's process id; None before ``start()``."""
        return self._process.pid

    def stop(self, timeout_secs: float = 10.0) -> None:
        self._stop.set()
        self._process.join(timeout_secs)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def _relay_until(location: str, bootstrap_servers: str, config: dict[str, Any],
                 stop: multiprocessing.synchronize.Event, parent: int, logs: tuple[int, str]) -> None:
    """``RelayProcess``'s process: relay until ``stop`` is set or the process ``parent`` ends,
    logging at ``logs`` (level, format) to the standard error it shares with its parent."""
    from projector import open_store

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the projector, which stops this
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    os.nice(NICENESS)
    level, log_format = logs
    logging.basicConfig(level=level, format=log_format)
    relay = ChangelogRelay(open_store(location, read_only=True), bootstrap_servers, config=config)
    relay.start()
    try:
        while not stop.wait(PARENT_CHECK_SECS) and os.getppid() == parent:
            pass
    finally:
        relay.stop()
        relay.store.close()
