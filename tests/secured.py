"""Secured servers for tests: a certificate authority and server certificates made with the
``openssl`` command, and the embedded Kafka broker with a SASL_SSL listener (SCRAM-SHA-512)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from stack.broker import EmbeddedBroker

MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"
"""The broker's own SCRAM user, for its connections to its own listener."""


@dataclass(frozen=True)
class Certificates:
    """A test CA (``ca``, PEM) and a server certificate it signed (``cert``) with its
    unencrypted PKCS#8 ``key``; ``key_and_cert`` holds both, as Kafka's PEM key store wants."""

    ca: Path
    cert: Path
    key: Path
    key_and_cert: Path


def _openssl(*args: str | Path) -> None:
    result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr}")


def make_certificates(directory: Path, addresses: list[str]) -> Certificates:
    """A new CA, and a server certificate for ``addresses`` (IP addresses), valid for two days."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    key, request, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=strata test CA", "-keyout", ca_key, "-out", ca,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=strata test server",
             "-keyout", key, "-out", request)
    extensions = directory / "server.ext"
    extensions.write_text("subjectAltName=" + ",".join(f"IP:{a}" for a in addresses)
                          + "\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-set_serial", "1",
             "-days", "2", "-out", cert, "-extfile", extensions)
    key_and_cert = directory / "server-key-and-cert.pem"
    key_and_cert.write_text(key.read_text() + cert.read_text())
    return Certificates(ca=ca, cert=cert, key=key, key_and_cert=key_and_cert)


class SecuredBroker(EmbeddedBroker):
    """The embedded broker whose one listener is SASL_SSL with SCRAM-SHA-512 and the
    certificate of ``tls``; ``users`` (name to password) may connect."""

    def __init__(self, directory: Path, tls: Certificates, users: dict[str, str], *,
                 host: str = "127.0.0.1", port: int | None = None) -> None:
        super().__init__(directory, port=port, host=host)
        self.tls = tls
        self.users = {BROKER_USER: "broker-secret", **users}
        self.client_config = self.client_settings(BROKER_USER, self.users[BROKER_USER])

    def client_settings(self, user: str, password: str) -> dict[str, str]:
        """What a client of this broker sets, in librdkafka's names (strata's documented ones)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
                "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": str(self.tls.ca)}

    def listener_settings(self) -> list[str]:
        jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{BROKER_USER}" password="{self.users[BROKER_USER]}";')
        return [
            f"listeners=SASL_SSL://{self.host}:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=SASL_SSL://{self.host}:{self.port}",
            "inter.broker.listener.name=SASL_SSL",
            "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
            f"sasl.enabled.mechanisms={MECHANISM}",
            f"sasl.mechanism.inter.broker.protocol={MECHANISM}",
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.tls.key_and_cert}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.tls.ca}",
        ]

    def format_arguments(self) -> list[str]:
        return [argument for name, password in self.users.items()
                for argument in ("--add-scram", f"{MECHANISM}=[name={name},password={password}]")]
