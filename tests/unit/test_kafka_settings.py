"""Kafka client settings: one set in librdkafka's names, the same settings in the Java client's
names for Spark's Kafka source, and ``STRATA_KAFKA_OPTIONS``."""

from __future__ import annotations

import pytest

import settings
from producers.kafka_config import librdkafka_config
from spark_streaming.options import java_config

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
         "sasl.username": "pipeline", "sasl.password": 'p"a\\ss', "ssl.ca.location": "/etc/ca.pem"}


def test_sasl_credentials_and_the_ca_become_the_java_clients_settings() -> None:
    assert java_config(SCRAM) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="pipeline" password="p\\"a\\\\ss";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
    }


def test_plain_uses_its_login_module_and_other_settings_keep_their_names() -> None:
    options = java_config({"sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p",
                           "ssl.endpoint.identification.algorithm": "none", "fetch.max.wait.ms": 50,
                           "enable.idempotence": True})
    assert options["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")
    assert options["ssl.endpoint.identification.algorithm"] == ""
    assert options["fetch.max.wait.ms"] == "50" and options["enable.idempotence"] == "true"


def test_spark_only_settings_win_for_spark_and_never_reach_librdkafka() -> None:
    config = {**SCRAM, "kafka.sasl.jaas.config": "mine", "kafka.ssl.truststore.type": "JKS"}
    assert java_config(config)["sasl.jaas.config"] == "mine"
    assert java_config(config)["ssl.truststore.type"] == "JKS"
    assert librdkafka_config(config) == SCRAM


def test_a_username_without_a_mechanism_that_takes_one_is_refused() -> None:
    with pytest.raises(ValueError, match="sasl.mechanism PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        java_config({"sasl.username": "u", "sasl.password": "p"})
    with pytest.raises(ValueError, match="kafka.sasl.jaas.config"):
        java_config({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "u"})


def test_settings_come_from_strata_kafka_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STRATA_KAFKA_OPTIONS", raising=False)
    assert settings.kafka_options() == {}
    monkeypatch.setenv("STRATA_KAFKA_OPTIONS", '{"sasl.password": "s3cret", "linger.ms": 5}')
    assert settings.kafka_options() == {"sasl.password": "s3cret", "linger.ms": 5}


@pytest.mark.parametrize("text", ["sasl.password=x", '["a"]', '{"a": {"b": 1}}'])
def test_strata_kafka_options_that_are_not_an_object_of_values_are_refused(
        monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("STRATA_KAFKA_OPTIONS", text)
    with pytest.raises(ValueError, match="STRATA_KAFKA_OPTIONS"):
        settings.kafka_options()
