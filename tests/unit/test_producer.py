"""EventProducer without a broker: bounded failure, the settings it never gives up, a quiet log."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import pytest

from events import CreateDataset, Event, RegisterLayer
from producers import DeliveryError, EventProducer
from producers.producer import REQUIRED_CONFIG


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_send_to_unreachable_broker_raises_delivery_error_in_bounded_time():
    bootstrap = f"127.0.0.1:{free_port()}"
    producer = EventProducer(bootstrap, delivery_timeout_secs=2)
    dataset_id = uuid.uuid4()
    events = [Event(dataset_id, CreateDataset("droid")),
              Event(dataset_id, RegisterLayer("seg", "base", "file:///seg.rrd"))]
    start = time.monotonic()
    try:
        with pytest.raises(DeliveryError) as info:
            producer.send(events)
        elapsed = time.monotonic() - start
    finally:
        producer.close()

    assert elapsed < 20, f"send() took {elapsed:.1f} s to give up"
    error = info.value
    assert bootstrap in str(error)
    assert set(error.failed) == {e.event_id for e in events}
    assert all(isinstance(reason, str) and reason for reason in error.failed.values())
    assert isinstance(error, ConnectionError)


def test_required_settings_win_over_user_config():
    producer = EventProducer(
        "broker-a:9092,broker-b:9092",
        config={
            "enable.idempotence": False,
            "acks": "1",
            "partitioner": "consistent_random",
            "bootstrap.servers": "somewhere-else:1",
            "compression.type": "zstd",
            "client.id": "my-pipeline",
        },
        delivery_timeout_secs=7,
    )
    config = producer._config

    assert config["enable.idempotence"] is True
    assert config["acks"] == "all"
    assert config["partitioner"] == "murmur2_random"
    assert config["bootstrap.servers"] == "broker-a:9092,broker-b:9092"
    assert config["delivery.timeout.ms"] == 7000
    # Other user settings (TLS, SASL, tuning, ...) pass through.
    assert config["compression.type"] == "zstd"
    assert config["client.id"] == "my-pipeline"
    assert producer._producer is None  # nothing connects before the first send


def test_required_settings_are_set_without_user_config():
    config = EventProducer("localhost:9092")._config
    for key, value in REQUIRED_CONFIG.items():
        assert config[key] == value
    assert REQUIRED_CONFIG == {"enable.idempotence": True, "acks": "all",
                               "partitioner": "murmur2_random"}


def test_librdkafka_warnings_stay_off_the_terminal_unless_logging_is_configured():
    # A subprocess: pytest's own log capture would otherwise stand in for the missing handler.
    script = ("import logging; from producers._logging import LOGGER; "
              "LOGGER.warning('GETPID: Coordinator load in progress: retrying'); "
              "logging.basicConfig(); LOGGER.warning('configured')")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "Coordinator load" not in result.stderr
    assert "configured" in result.stderr
