"""A single-node Apache Kafka broker in KRaft mode, run as a child process."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

import settings
from producers.kafka_config import client_config
from stack import processes

LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
"""


JVM_OPTIONS = ["-Xms32m", "-Xmx256m", "-XX:+UseSerialGC"]
"""The broker's heap and collector: a small local broker."""


def broker_classpath() -> str:
    directory = settings.jars_dir() / "kafka-broker"
    if not any(directory.glob("*.jar")):
        raise FileNotFoundError(
            f"no Kafka broker jars in {directory}: run scripts/setup.sh first "
            "(or set STRATA_JARS_DIR to the directory that holds kafka-broker/)")
    return str(directory / "*")


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("Java 17 or newer is needed to run the embedded Kafka broker; "
                                "install it or pass --bootstrap-servers of a running cluster")
    return found


def random_cluster_id() -> str:
    """A random KRaft cluster id (a URL-safe base64 UUID). Like Kafka's own ``Uuid.randomUuid``,
    never one that starts with "-", which the storage tool would take for an option: otherwise
    one first start in 64 fails."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class EmbeddedBroker:
    """Kafka with its log, configuration and ports under ``directory``.

    The ports are chosen once and kept in ``ports.json``, so a restart on the same directory
    comes back at the same address.
    """

    def __init__(self, directory: Path, *, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.directory = Path(directory)
        self.host = host
        """The address clients reach it at: its client listener's, and the one it advertises."""
        self.client_config: dict[str, str] = {}
        """The Kafka client settings its listener needs (none for plaintext)."""
        self.log_path = self.directory / "broker.log"
        self._requested_port = port
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.controller_port = 0

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs."""
        return None if self._process is None else self._process.pid

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def _choose_ports(self) -> None:
        path = self.directory / "ports.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        port = self._requested_port or saved.get("port")
        if not port or not processes.port_is_free(port, self.host):
            if self._requested_port:
                raise OSError(f"port {self._requested_port} for the Kafka broker is in use")
            port = processes.free_port(self.host)
        controller = saved.get("controller_port")
        if not controller or controller == port or not processes.port_is_free(controller):
            controller = processes.free_port()
        self.port, self.controller_port = port, controller
        path.write_text(json.dumps({"port": port, "controller_port": controller}))

    def listener_settings(self) -> list[str]:
        """The client listener's lines of ``server.properties`` (overridden for SASL or TLS)."""
        return [f"listeners=PLAINTEXT://{self.host}:{self.port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
                f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"]

    def format_arguments(self) -> list[str]:
        """Extra arguments of the storage tool's ``format`` (SCRAM users, say)."""
        return []

    def _write_config(self) -> None:
        config = self.directory / "server.properties"
        config.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            *self.listener_settings(),
            "controller.listener.names=CONTROLLER",
            f"log.dirs={self.directory / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "group.initial.rebalance.delay.ms=0",
            # The log cleaner compacts only Kafka's own small topics here (strata's are never
            # compacted): a 16 MiB buffer instead of the 128 MiB it takes on the heap by default.
            "log.cleaner.dedupe.buffer.size=16777216",
            # The log is the source of truth: never delete it by age or size.
            "log.retention.ms=-1",
            "log.retention.bytes=-1",
            "",
        ]))
        (self.directory / "log4j2.properties").write_text(LOG4J2)

    def prepare(self) -> None:
        """Choose the ports and write the configuration: ``bootstrap_servers`` is known from here
        on, before the broker runs (``start`` prepares again: the same ports, if they are free)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._choose_ports()
        self._write_config()

    def start(self, *, timeout_secs: float = 90.0) -> None:
        """Start the broker and wait until it answers. Raises ``RuntimeError`` with the end of
        its log if it exits or does not answer within ``timeout_secs``."""
        self.prepare()  # the ports prepare() chose, or saved ones, while they are free
        config = self.directory / "server.properties"
        java_args = [java(), *JVM_OPTIONS, *settings.class_data_options("broker"),
                     f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
                     "-cp", broker_classpath()]
        if not (self.directory / "data" / "meta.properties").exists():
            cluster_id = random_cluster_id()
            formatted = subprocess.run(
                [*java_args, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                 "-c", str(config), *self.format_arguments()], capture_output=True, text=True)
            if formatted.returncode != 0:
                raise RuntimeError(f"formatting the Kafka log directory failed:\n"
                                   f"{formatted.stdout}{formatted.stderr}")
        self._process = processes.start([*java_args, "kafka.Kafka", str(config)], self.log_path)
        self._wait_ready(timeout_secs)

    def _wait_ready(self, timeout_secs: float) -> None:
        deadline = time.monotonic() + timeout_secs
        admin = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited with code {self._process.returncode}; "
                                   f"end of {self.log_path}:\n{processes.tail(self.log_path)}")
            # Ask Kafka only once the port accepts connections, so the client logs no refusals.
            if admin is None and processes.port_accepts(self.port, self.host):
                admin = AdminClient(client_config(self.bootstrap_servers, self.client_config))
            if admin is not None:
                try:
                    if admin.list_topics(timeout=2).brokers:
                        return
                except KafkaException:
                    pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Kafka broker did not answer within {timeout_secs:g} s; end of "
                           f"{self.log_path}:\n{processes.tail(self.log_path)}")

    def stop(self) -> None:
        processes.stop(self._process)
        self._process = None
