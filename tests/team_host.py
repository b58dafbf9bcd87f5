"""The server host of the several-hosts test (``tests/reliability/test_several_hosts.py``), run in its
own network namespace: a Kafka broker with a SASL_SSL listener, PostgreSQL taking TLS connections
with a password, an S3-compatible server, a Spark standalone master with four workers of which an
application takes two unless it asks for more (the projector takes two, a registration on the
executors the other two), and the projector on that master, all on ``--address``. Once up, it
writes ``DIR/ready.json``: what a client host needs (bootstrap servers, the read-only store URL,
Kafka and object-store settings) and the projector's process id. Like a service manager, it starts
the projector again whenever it dies, counting restarts in ``ready.json``. Stops on SIGTERM.

    python tests/team_host.py --address 10.213.0.1 --dir DIR
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pyspark

from postgres import EmbeddedPostgres
from s3 import EmbeddedS3
from secured import SecuredBroker, make_certificates
from stack import Server, processes

PASSWORDS = {"projector": "projector-kafka-secret", "team": "team-kafka-secret",
             "postgres": "postgres-secret", "reader": "reader-secret"}
BUCKET = "recordings"


def write_json(path: Path, value: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, indent=2))
    partial.replace(path)


SPARK_WORKERS = 4
APP_CORES = 2
"""The cores an application takes unless it asks (``spark.deploy.defaultCores``): without it, the
projector's streaming query would hold every core, and no other application would ever start."""


def start_spark_cluster(address: str, directory: Path) -> tuple[str, list[subprocess.Popen]]:
    """A Spark standalone master and ``SPARK_WORKERS`` workers of one core each on ``address``,
    from pyspark's own jars, an application getting ``APP_CORES`` of them; the master's URL and
    the processes. The projector gets an executor on each of two workers."""
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    port = processes.free_port(address)
    master = f"spark://{address}:{port}"
    started = [processes.start([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", address,
                                "--port", str(port), "--webui-port", str(processes.free_port(address))],
                               directory / "spark-master.log",
                               env={"SPARK_MASTER_OPTS": f"-Dspark.deploy.defaultCores={APP_CORES}"})]
    logs = [directory / f"spark-worker-{n}.log" for n in range(SPARK_WORKERS)]
    for n, log in enumerate(logs):
        started.append(processes.start(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", master, "--host", address,
             "--cores", "1", "--memory", "2g", "--webui-port", str(processes.free_port(address)),
             "--work-dir", str(directory / f"work-{n}")], log))
    deadline = time.monotonic() + 120
    for log in logs:
        while "Successfully registered with master" not in processes.tail(log, 200):
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                raise RuntimeError(f"the Spark cluster did not start:\n{processes.tail(log)}")
            time.sleep(0.5)
    return master, started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True, help="this host's IP address")
    parser.add_argument("--dir", type=Path, required=True, help="state and ready.json")
    args = parser.parse_args()
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    # The projector's driver listens here, for the executors: this host's address, not 127.0.0.1.
    os.environ["SPARK_LOCAL_IP"] = args.address
    spark_master, spark_processes = start_spark_cluster(args.address, args.dir / "spark")
    tls = make_certificates(args.dir / "tls", [args.address])
    broker = SecuredBroker(args.dir / "kafka", tls, {"projector": PASSWORDS["projector"],
                                                     "team": PASSWORDS["team"]}, host=args.address)
    with EmbeddedPostgres(host=args.address, password=PASSWORDS["postgres"], tls=tls) as pg, \
            EmbeddedS3(host=args.address) as s3:
        broker.start()
        pg.create_database("strata")
        s3.create_bucket(BUCKET)
        server = None
        try:
            server = Server(args.dir / "stack", bootstrap_servers=broker.bootstrap_servers,
                            store=pg.url("strata"), spark_master=spark_master,
                            kafka_options=broker.client_settings("projector", PASSWORDS["projector"]),
                            protocol_port=None)
            with pg.admin("strata") as conn:  # a role that may only read, for the client hosts
                conn.execute(f"create role reader login password '{PASSWORDS['reader']}'")
                conn.execute("grant select on all tables in schema public to reader")
            ready = {
                "bootstrap_servers": broker.bootstrap_servers,
                "store": pg.url("strata", user="reader", password=PASSWORDS["reader"]),
                "kafka_options": broker.client_settings("team", PASSWORDS["team"]),
                "aws": {"AWS_ENDPOINT_URL": s3.endpoint_url, **{
                    k: v for k, v in s3.environment().items() if k != "AWS_ENDPOINT_URL"}},
                "bucket": BUCKET,
                "spark_master": spark_master,
                "projector_pid": server._projector.pid,
                "restarts": 0,
            }
            write_json(args.dir / "ready.json", ready)
            while not stopping:
                if server._projector.poll() is not None:
                    server.start_projector()
                    ready.update(projector_pid=server._projector.pid, restarts=ready["restarts"] + 1)
                    write_json(args.dir / "ready.json", ready)
                time.sleep(0.2)
        finally:
            if server is not None:
                server.close()
            broker.stop()
            for process in spark_processes:
                processes.stop(process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
