"""Secured connections: a broker whose only listener is SASL_SSL (SCRAM-SHA-512, certificates
made by the test), and a PostgreSQL store that takes TLS connections with a password only. The
SDK, the Spark projector and ``strata replay`` work through the documented settings; wrong
credentials are one-line errors within seconds, and produce nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import sdk
from postgres import EmbeddedPostgres
from producers import DeliveryError, end_offsets, ensure_topics
from projector import StoreUnavailableError, open_store
from secured import Certificates, SecuredBroker, make_certificates
from stack import Server
from stack_tools import returns_within, wait_caught_up
from stores import dump

# The stack here has its own store (PostgreSQL over TLS), whatever STRATA_TEST_STORE says.
pytestmark = pytest.mark.own_store

USER, PASSWORD = "strata-sdk", "kafka-secret-4f1"
PG_PASSWORD = "pg-secret-9c2"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"), ["127.0.0.1"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, tls: Certificates) -> Iterator[SecuredBroker]:
    broker = SecuredBroker(tmp_path_factory.mktemp("secured-kafka"), tls, {USER: PASSWORD})
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def secured_postgres(tls: Certificates) -> Iterator[EmbeddedPostgres]:
    with EmbeddedPostgres(password=PG_PASSWORD, tls=tls) as server:
        yield server


@pytest.fixture(scope="module")
def kafka_settings(broker: SecuredBroker) -> dict[str, str]:
    return broker.client_settings(USER, PASSWORD)


@pytest.fixture(scope="module")
def secured_server(tmp_path_factory: pytest.TempPathFactory, broker: SecuredBroker,
                   secured_postgres: EmbeddedPostgres, kafka_settings: dict[str, str]
                   ) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("secured-stack"), bootstrap_servers=broker.bootstrap_servers,
                store=secured_postgres.create_database(), kafka_options=kafka_settings,
                protocol_port=None) as server:
        yield server


def offsets(broker: SecuredBroker, kafka_settings: dict[str, str]) -> dict:
    return end_offsets(broker.bootstrap_servers, config=kafka_settings)


def test_the_sdk_and_the_projector_work_through_sasl_ssl_and_postgres_tls(
        secured_server: Server, secured_postgres: EmbeddedPostgres, make_rrd) -> None:
    assert "sslmode=verify-full" in secured_server.store
    # The projector gets the settings in its environment, never on its command line.
    command_line = Path(f"/proc/{secured_server._projector.pid}/cmdline").read_bytes()
    assert PASSWORD.encode() not in command_line and b"--kafka-option" not in command_line

    client = secured_server.client()
    dataset = client.create_dataset("secured")
    uris = [make_rrd(f"sec_{i}", properties={"info": {"episode": i}}) for i in range(3)]
    dataset.register(uris).wait(120)
    table = dataset.segment_table().to_arrow_table()
    assert sorted(table.column("rerun_segment_id").to_pylist()) == ["sec_0", "sec_1", "sec_2"]

    # A second client, as on another host, reads the first one's writes over TLS.
    other = sdk.CatalogClient(secured_server.bootstrap_servers, secured_server.store,
                              kafka_config=secured_server.kafka_options)
    try:
        assert other.get_dataset(name="secured").segment_ids() == ["sec_0", "sec_1", "sec_2"]
    finally:
        other.close()


def test_strata_replay_reads_the_log_with_settings_from_the_environment(
        secured_server: Server, broker: SecuredBroker, kafka_settings: dict[str, str],
        tmp_path: Path) -> None:
    secured_server.client().create_dataset(f"replayed-{uuid.uuid4().hex[:6]}")
    wait_caught_up(secured_server.store, broker.bootstrap_servers, timeout_secs=120,
                   config=kafka_settings)
    strata = Path(sys.executable).parent / "strata"
    done = subprocess.run(
        [strata, "replay", "--bootstrap-servers", broker.bootstrap_servers, "--into", tmp_path],
        env={**os.environ, "STRATA_KAFKA_OPTIONS": json.dumps(kafka_settings)},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert dump(tmp_path / "store.db") == dump(secured_server.store)


def test_a_wrong_kafka_password_is_one_clear_error_within_seconds_and_produces_nothing(
        secured_server: Server, broker: SecuredBroker, kafka_settings: dict[str, str]) -> None:
    before = offsets(broker, kafka_settings)
    wrong = {**kafka_settings, "sasl.password": "not-the-password"}
    client = sdk.CatalogClient(secured_server.bootstrap_servers, secured_server.store,
                               kafka_config=wrong, delivery_timeout_secs=120)
    try:
        with pytest.raises(DeliveryError) as raised:  # refused, not waited out until the delivery timeout
            returns_within(60, lambda: client.create_dataset("never-created"))
    finally:
        client.close()
    message = str(raised.value)
    assert "\n" not in message and "not-the-password" not in message
    assert "SASL authentication" in message and "sasl.password" in message
    time.sleep(2)  # anything sent late would be in the log by now
    assert offsets(broker, kafka_settings) == before
    with pytest.raises(LookupError):
        secured_server.client().get_dataset(name="never-created")


def test_a_stack_with_a_wrong_kafka_password_does_not_start(
        broker: SecuredBroker, kafka_settings: dict[str, str], tmp_path: Path) -> None:
    wrong = {**kafka_settings, "sasl.password": "not-the-password"}
    with pytest.raises(ConnectionError, match="refused the connection.*SASL authentication"):
        returns_within(60, lambda: Server(tmp_path, bootstrap_servers=broker.bootstrap_servers,
                                          kafka_options=wrong).start())
    with pytest.raises(ConnectionError, match="SSL handshake failed"):
        ensure_topics(broker.bootstrap_servers,
                      config={k: v for k, v in kafka_settings.items() if k != "ssl.ca.location"})


@pytest.mark.parametrize("change, expected", [
    ({"password": "wrong-pw-77"}, "password authentication failed"),
    ({"sslmode": "disable"}, "no encryption"),
])
def test_postgres_refuses_a_wrong_password_or_no_tls_in_one_line(
        secured_postgres: EmbeddedPostgres, change: dict[str, str], expected: str) -> None:
    url = secured_postgres.create_database()
    if "password" in change:
        url = url.replace(PG_PASSWORD, change["password"])
    else:
        url = url.split("?")[0] + "?sslmode=disable"
    with pytest.raises(StoreUnavailableError) as raised:
        returns_within(60, lambda: open_store(url, read_only=True))
    message = str(raised.value)
    assert expected in message and "\n" not in message, message
    assert PG_PASSWORD not in message and "wrong-pw-77" not in message


def test_a_projector_with_a_wrong_kafka_password_exits_with_the_reason(
        broker: SecuredBroker, kafka_settings: dict[str, str], tmp_path: Path) -> None:
    wrong = {**kafka_settings, "sasl.password": "not-the-password"}
    done = subprocess.run(
        [sys.executable, "-m", "spark_streaming", "--bootstrap-servers", broker.bootstrap_servers,
         "--store", tmp_path / "store.db", "--checkpoint", tmp_path / "checkpoint"],
        env={**os.environ, "STRATA_KAFKA_OPTIONS": json.dumps(wrong)},
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    [reason] = [line for line in done.stderr.splitlines() if "projector stopped" in line]
    # It waits for its topics first, and the broker's refusal ends that wait at once.
    assert reason.startswith("projector stopped on an error:") and "refused the connection" in reason
    assert "authentication" in reason.lower()
    assert "not-the-password" not in done.stderr + done.stdout
