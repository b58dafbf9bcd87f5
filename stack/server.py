"""The embedded strata stack: Kafka broker, topics, Spark projector and SQLite store, with their
state under one directory. Any part can instead be an existing cluster."""

from __future__ import annotations

import atexit
import json
import logging
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

import settings
from events import import_extra
from events.names import RECORDING_SUFFIXES
from producers import ensure_topics
from projector import open_store
from projector.stores import normalize
from sdk import CatalogClient
from stack import processes
from stack.broker import EmbeddedBroker

log = logging.getLogger("strata.server")


class Server:
    """Runs strata on one machine, as ``rerun.server.Server`` runs Rerun's catalog: it starts
    when it is constructed and stops with ``shutdown()`` (or at the end of a ``with`` block, or
    when it goes out of scope; its processes never outlive the interpreter). A Rerun snippet runs
    with only its ``rr.server.Server(`` changed to ``sdk.Server(``.

    Examples:
        >>> server = Server(datasets={"droid": "/data/droid"})  # doctest: +SKIP
        >>> client = server.client()  # doctest: +SKIP
        >>> rerun_client = rr.catalog.CatalogClient(server.url())  # rerun+http://...  # doctest: +SKIP
        >>> with Server(data_dir="/tmp/strata", protocol_port=None) as server:  # doctest: +SKIP
        ...     dataset = server.client().create_dataset("droid")

    On a directory that holds a catalog, the constructor returns once reads are answered: the
    endpoint of Rerun's catalog protocol starts first and answers from the store (in about 1.5 s
    on a 2-core machine), then the embedded Kafka broker, its topics and the Spark projector start
    behind it, side by side. A write made meanwhile is taken once the broker is up, and its wait
    ends once the projector has caught up; ``ready()`` waits for both and raises what stopped
    them. On a new directory, and with ``datasets`` or ``tables`` to register, all parts start at
    once and the constructor returns once they run (about 10 s on 2 cores). What it holds is kept
    in ``data_dir``: a second ``Server`` there resumes where the first stopped, and registers
    only what is new of ``datasets``.

    ``datasets`` registers recordings at start, as Rerun does: a directory (every recording under
    it) or a list of ``.rrd`` files per dataset name, on layer ``base``. ``tables`` registers Lance
    tables by name (``register_table``). ``port`` and ``host`` are the embedded broker's (default:
    a free port, chosen once per ``data_dir``; ``127.0.0.1``).

    ``bootstrap_servers`` uses an existing Kafka cluster instead of the embedded broker,
    ``spark_master`` an existing Spark master instead of ``local[*]``; ``kafka_options`` (SASL,
    TLS, ...; librdkafka's names, see ``producers.kafka_config``) are passed to every Kafka
    client, the projector's included. ``store`` puts the SQLite store elsewhere than
    ``data_dir/store.db`` (another disk, say), or names a PostgreSQL database
    (``postgresql://user@host/database``) that clients on other hosts can read. Each defaults to
    its ``STRATA_*`` environment variable (see ``settings``). The topics are created to keep every
    record forever; an existing topic that may delete records is refused (``ValueError``) unless
    ``allow_finite_retention``. ``max_offsets_per_trigger`` caps the records of one projector
    micro-batch (default: the projector's, 20,000). With ``snapshot_every``, the projector writes
    a snapshot each time that many more records are folded, into ``snapshots`` (a directory or an
    ``s3://`` prefix; default ``data_dir/snapshots``), for ``strata replay --from-snapshot``.

    Rerun's catalog protocol is served on ``host`` at ``protocol_port`` (default 0: a free port),
    and ``url()`` is that endpoint's, so rerun-sdk's own ``rr.catalog.CatalogClient(server.url())``
    reaches the catalog. The endpoint runs in a process of its own beside the projector
    (``python -m protocol``, on the server's store and Kafka cluster, with direct URLs, its log in
    ``data_dir/protocol.log``), because Rerun's client holds Python's global lock while it waits
    on some calls (``reader(using_index_values=...)``), which an endpoint in the client's own
    process would then never answer. It starts in 1.5 to 3 s on a 2-core machine, holds about 260 MiB
    idle (and its worker processes, about 215 MiB each, once a client that may write has called
    it), and needs ``strata[protocol]``.
    ``protocol_port=None`` serves none: ``url()`` is then ``strata://HOST:PORT?store=...``, which
    only strata's client takes. With ``protocol_tls``, a certificate chain and its private key
    (PEM files), the endpoint serves over TLS (``rerun+https://``, its direct URLs over
    ``https://``), as ``strata serve --tls-cert/--tls-key``: its clients, ``client()`` among
    them, trust the certificate through their CA roots (the system's, or the file
    ``SSL_CERT_FILE`` names). With ``protocol_web_port``, the endpoint also serves the protocol
    over gRPC-web at that port (0: a free one) for Rerun's web viewer (``protocol_web_url``).

    Raises ``RuntimeError`` with the end of the failing part's log if the endpoint does not start
    (the broker's and the projector's failures are logged and raised by ``ready()``),
    ``MissingExtraError`` without ``strata[projector]`` (the projector runs Spark) or, unless
    ``protocol_port=None``, without ``strata[protocol]``, ``ValueError`` for a ``datasets`` path
    that is neither a directory nor a recording, for ``protocol_tls`` or ``protocol_web_port``
    with ``protocol_port=None``, or for ``protocol_tls`` naming a file that is not there, all
    before anything starts (``RuntimeError`` too if ``protocol_port`` cannot be bound, or the
    files of ``protocol_tls`` are not a certificate and its key: the endpoint's process says so at
    the end of its log).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        datasets: Mapping[str, str | PathLike[str] | Sequence[str | PathLike[str]]] | None = None,
        tables: Mapping[str, str | PathLike[str]] | None = None,
        bootstrap_servers: str | None = None,
        spark_master: str | None = None,
        kafka_options: Mapping[str, str] | None = None,
        store: str | Path | None = None,
        allow_finite_retention: bool = False,
        max_offsets_per_trigger: int | None = None,
        snapshot_every: int = 0,
        snapshots: str | Path | None = None,
        startup_timeout_secs: float = 240.0,
        protocol_port: int | None = 0,
        protocol_tls: tuple[str | PathLike[str], str | PathLike[str]] | None = None,
        protocol_web_port: int | None = None,
    ) -> None:
        if host in ("0.0.0.0", "::"):  # noqa: S104 - refused, not bound
            raise ValueError(
                f"host={host!r}: the embedded broker tells its clients the address it listens on, "
                "so give the name or IP address they reach this machine at (or the default "
                "127.0.0.1 for this machine only)")
        self.protocol_tls = _tls_files(protocol_tls, protocol_port)
        if protocol_web_port is not None and protocol_port is None:
            raise ValueError("protocol_web_port serves Rerun's catalog protocol over gRPC-web beside "
                             "its gRPC endpoint, which protocol_port=None does not serve")
        self._datasets = {name: _recording_paths(name, paths) for name, paths in (datasets or {}).items()}
        self._tables = {name: str(path) for name, path in (tables or {}).items()}
        self.data_dir = Path(data_dir) if data_dir is not None else settings.home()
        self.store = normalize(store if store is not None else settings.store(self.data_dir))
        self.spark_master = spark_master or settings.spark_master()
        self.kafka_options = {**settings.kafka_options(), **(kafka_options or {})}
        self.allow_finite_retention = allow_finite_retention
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.snapshot_every = snapshot_every
        self.snapshots = str(snapshots if snapshots is not None else self.data_dir / "snapshots")
        self.startup_timeout_secs = startup_timeout_secs
        external = bootstrap_servers or settings.bootstrap_servers()
        self.broker = None if external else EmbeddedBroker(self.data_dir / "kafka", port=port, host=host)
        self._external_bootstrap = external
        self._projector: subprocess.Popen[bytes] | None = None
        self._bind_host = host
        self.protocol_port = protocol_port
        self.protocol_web_port = protocol_web_port
        self._protocol: subprocess.Popen[bytes] | None = None
        self._protocol_url: str | None = None
        self._protocol_web_url: str | None = None
        self._clients: list[CatalogClient] = []
        self._running = False
        self._starting: threading.Thread | None = None
        self._closing = threading.Event()
        self._started = threading.Event()
        self._released = threading.Event()
        self._start_error: Exception | None = None
        self._returned_early = False
        self.start()

    @property
    def bootstrap_servers(self) -> str:
        if self.broker is not None:
            return self.broker.bootstrap_servers
        assert self._external_bootstrap is not None  # no broker of its own: an existing cluster's
        return self._external_bootstrap

    @property
    def checkpoint_dir(self) -> Path:
        return self.data_dir / "checkpoint"

    @property
    def projector_log(self) -> Path:
        return self.data_dir / "projector.log"

    def url(self) -> str:
        """Where clients reach this server, as Rerun's ``url()``: its endpoint of Rerun's catalog
        protocol, ``rerun+http://HOST:PORT`` (``rerun+https://`` with ``protocol_tls``), which both
        rerun-sdk's ``rr.catalog.CatalogClient(url)`` and strata's ``CatalogClient(url)`` take.
        With ``protocol_port=None`` (or once it is closed), its Kafka bootstrap servers and its
        store, ``strata://HOST:PORT?store=...``, which only strata's takes. Kafka credentials, if
        any, still go in ``kafka_config``.

            >>> rr.catalog.CatalogClient(server.url()).dataset_names()  # doctest: +SKIP
        """
        if self._protocol_url is not None:
            return self._protocol_url
        return settings.stack_url(self.bootstrap_servers, self.store)

    def host(self) -> str:
        """The host the Kafka broker of this server listens on."""
        return self.bootstrap_servers.split(",")[0].rsplit(":", 1)[0]

    def is_running(self) -> bool:
        """Whether the server runs: started, not shut down, and its projector process alive."""
        return self._running and self._projector is not None and self._projector.poll() is None

    def start(self) -> Server:
        """Start the stack again after ``shutdown()``; the constructor already started it, and
        on a running server this does nothing. Raises as the constructor does."""
        if self._running:
            return self
        import_extra("pyspark", "projector", "running the projector")
        import_extra("sqlite_utils", "projector", "running the projector")
        if self.protocol_port is not None:
            import_extra("grpc", "protocol",
                         "serving Rerun's catalog protocol, which Server does unless protocol_port=None,")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.broker is None:  # a cluster already up: topics it cannot keep fail here, before anything
            self._ensure_topics()
        # The store's tables exist before anything reads them, so the endpoint answers reads at
        # once (a new catalog's: empty), while Kafka and Spark start behind it. An unreachable
        # PostgreSQL server fails here, in one line.
        store = open_store(self.store)
        try:
            holds_a_catalog = bool(store.next_offsets())
        finally:
            store.close()
        for event in (self._closing, self._started, self._released):
            event.clear()
        self._start_error = None
        self._returned_early = holds_a_catalog and not (self._datasets or self._tables)
        try:
            if self.broker:
                self.broker.prepare()  # its address, for the endpoint and the projector
            if holds_a_catalog:
                # Reads first: the endpoint starts alone (1.5 s on 2 cores, 3 s beside two
                # starting JVMs), then Kafka and Spark behind it.
                self._start_protocol()
            # The projector needs a minute part of its start for the broker (it waits for the
            # topics), the broker none of the projector's: both start at once.
            self._launch_projector()
            self._running = True
            _RUNNING.add(self)
            self._starting = threading.Thread(target=self._start_behind, name="strata-server-start",
                                              daemon=True)
            self._starting.start()
            if not holds_a_catalog:
                self._start_protocol()
            if not self._returned_early:
                # Nothing to read yet, or something to register: the stack, whole.
                self.ready()
                self._register_datasets()
                self._register_tables()
        except BaseException:
            self.close()
            raise
        settings.write_running_stack(self.data_dir, self.bootstrap_servers, self.store, self.spark_master)
        return self

    def _finish_starting(self) -> None:
        """Wait for the start behind the constructor to end (at once once closing: each of its
        waits ends then, the broker's once it answers)."""
        if self._starting is not None and self._starting is not threading.current_thread():
            self._started.wait()

    def _start_behind(self) -> None:
        """The broker, the topics, then the projector's query; what fails is kept for
        ``ready()`` and logged. The thread then lives until the server closes: a process dies
        with the thread that started it (``processes.start``), and it started the broker."""
        try:
            if self.broker:
                self.broker.start()
                if not self._closing.is_set():
                    self._ensure_topics()
            self._wait_for_projector()
        except Exception as exc:  # noqa: BLE001 - kept for ready(), which raises it
            if not self._closing.is_set():
                self._start_error = exc
                if self._returned_early:  # no constructor raises it: say it
                    log.error("strata's server did not start: %s", exc)
        finally:
            self._started.set()
        self._released.wait()

    def _ensure_topics(self) -> None:
        ensure_topics(self.bootstrap_servers, config=self.kafka_options,
                      allow_finite_retention=self.allow_finite_retention)

    def ready(self, timeout_secs: float | None = None) -> Server:
        """Block until Kafka and the projector run (the constructor returns before, once reads are
        answered; writes are taken once the broker is up, and their waits end once the projector
        has caught up). Raises what stopped them from starting (``RuntimeError`` with the end of
        the failing part's log, ``ValueError`` for a topic strata cannot use), ``TimeoutError``
        if they still start after ``timeout_secs``."""
        if self._starting is not None:
            if not self._started.wait(timeout_secs):
                raise TimeoutError(f"strata's server is still starting after {timeout_secs:g} s; see "
                                   f"{self.projector_log} and the broker's log")
        if self._start_error is not None:
            raise self._start_error
        return self

    @property
    def protocol_log(self) -> Path:
        """Where the endpoint's process writes what it says (its errors; nothing when all goes
        well)."""
        return self.data_dir / "protocol.log"

    def _start_protocol(self) -> None:
        """Start the endpoint's process and wait until it serves."""
        if self.protocol_port is None:
            return
        args = [sys.executable, "-m", "protocol", "--data-dir", str(self.data_dir), "--store", self.store,
                "--bootstrap-servers", self.bootstrap_servers, "--host", self._bind_host,
                "--port", str(self.protocol_port),
                # Its writes wait for the broker as long as it may take to start: on a catalog
                # already there, the endpoint answers before the broker is up.
                "--delivery-timeout", str(self.startup_timeout_secs)]
        if self.protocol_web_port is not None:
            args += ["--web-port", str(self.protocol_web_port)]
        if self.protocol_tls is not None:
            cert, key = self.protocol_tls
            args += ["--tls-cert", str(cert), "--tls-key", str(key)]
        # Kafka settings in the environment, not on the command line, as the projector's.
        env = {"STRATA_KAFKA_OPTIONS": json.dumps(self.kafka_options)}
        self._protocol = processes.start(args, self.protocol_log, env=env, stdout_pipe=True)
        self._wait_for_protocol()

    def _wait_for_protocol(self) -> None:
        """Read the endpoint's ready line; ``RuntimeError`` with the end of its log if it exits
        or does not serve in time."""
        if self._protocol is None:
            return
        from protocol.endpoint import url_of, web_url_of

        deadline = time.monotonic() + self.startup_timeout_secs
        while self._protocol_url is None:
            line = processes.read_line(self._protocol, timeout_secs=0.2)
            if line is not None and (url := url_of(line)) is not None:
                self._protocol_url, self._protocol_web_url = url, web_url_of(line)
                break
            if line is None and self._protocol.poll() is not None:
                failure = f"exited with code {self._protocol.returncode}"
            elif time.monotonic() > deadline:
                failure = f"did not serve within {self.startup_timeout_secs:g} s"
            else:
                continue
            raise RuntimeError(f"Rerun's catalog protocol endpoint {failure}; end of {self.protocol_log}:\n"
                               f"{processes.tail(self.protocol_log)}")

    def _stop_protocol(self) -> None:
        processes.stop(self._protocol, timeout_secs=30)
        self._protocol = None
        self._protocol_url = None
        self._protocol_web_url = None

    @property
    def protocol_url(self) -> str | None:
        """Where rerun-sdk's own ``rr.catalog.CatalogClient`` reaches this server,
        ``rerun+http://HOST:PORT`` (``rerun+https://`` with ``protocol_tls``); None with
        ``protocol_port=None``, and once it is closed."""
        return self._protocol_url

    @property
    def protocol_web_url(self) -> str | None:
        """Where Rerun's web viewer reaches this server's catalog (its ``?url=``), the gRPC-web
        endpoint ``rerun+http://HOST:PORT``; None unless it was started with
        ``protocol_web_port``, and once it is closed."""
        return self._protocol_web_url

    @property
    def protocol_pid(self) -> int | None:
        """The process id of the endpoint's process; None if none runs."""
        return None if self._protocol is None else self._protocol.pid

    def _register_datasets(self) -> None:
        if not self._datasets:
            return
        client = self.client()
        for name, paths in self._datasets.items():
            try:
                dataset = client.get_dataset(name=name)
            except LookupError:
                dataset = client.create_dataset(name, exist_ok=True)
            known = set(dataset.manifest().select("rerun_storage_url").to_pydict()["rerun_storage_url"])
            uris = [uri for uri in (path.as_uri() for path in paths()) if uri not in known]
            if uris:
                dataset.register(uris, on_duplicate="skip").wait(self.startup_timeout_secs)

    def _register_tables(self) -> None:
        if not self._tables:
            return
        client = self.client()
        known = set(client.table_names())
        for name, path in self._tables.items():
            if name not in known:
                client.register_table(name, path if "://" in path else Path(path).absolute().as_uri())

    def start_projector(self) -> None:
        """Start the projector alone (the broker runs) and wait until it runs."""
        self._finish_starting()
        self._launch_projector()
        self._wait_for_projector()
        self._start_error = None

    def _ready_file(self) -> Path:
        return self.data_dir / "projector.ready"

    def _launch_projector(self) -> None:
        ready = self._ready_file()
        ready.unlink(missing_ok=True)
        args = [sys.executable, "-m", "spark_streaming",
                "--bootstrap-servers", self.bootstrap_servers,
                "--store", self.store, "--checkpoint", str(self.checkpoint_dir),
                "--spark-master", self.spark_master, "--ready-file", str(ready)]
        if self.max_offsets_per_trigger is not None:
            args += ["--max-offsets-per-trigger", str(self.max_offsets_per_trigger)]
        if self.snapshot_every:
            args += ["--snapshot-every", str(self.snapshot_every), "--snapshots", self.snapshots]
        # In the environment, not on the command line, where any user's ps would show passwords.
        env = {"PYSPARK_PYTHON": sys.executable,
               "STRATA_KAFKA_OPTIONS": json.dumps(self.kafka_options)}
        if self.spark_master.startswith("local"):
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
        self._projector = processes.start(args, self.projector_log, env=env)

    def _wait_for_projector(self) -> None:
        assert self._projector is not None
        ready = self._ready_file()
        deadline = time.monotonic() + self.startup_timeout_secs
        while not ready.exists() and not self._closing.is_set():
            if self._projector.poll() is not None:
                raise RuntimeError(
                    f"the Spark projector exited with code {self._projector.returncode}; end of "
                    f"{self.projector_log}:\n{processes.tail(self.projector_log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Spark projector did not start within {self.startup_timeout_secs:g} s; "
                    f"end of {self.projector_log}:\n{processes.tail(self.projector_log)}")
            time.sleep(0.05)

    def stop_projector(self) -> None:
        self._finish_starting()
        processes.stop(self._projector, timeout_secs=60)
        self._projector = None

    def client(self, **kwargs: Any) -> CatalogClient:
        """A client of this server; closed with it. Unless ``protocol_port=None``, it is made
        from ``url()``, so its ``url`` is the endpoint's too (which Rerun's helpers that read
        ``dataset.catalog.url`` need), with a token of its own if ``STRATA_TOKEN_SECRET`` makes
        the endpoint ask for one. Its writes wait for Kafka's acknowledgement as long as the
        server's start may take (``startup_timeout_secs``; ``delivery_timeout_secs=`` sets it),
        since a server on a catalog already there answers before its broker is up. Raises
        ``RuntimeError`` if the server is not running, as Rerun's does, or what stopped the
        server from starting."""
        if not self._running:
            raise RuntimeError("Cannot create client: server is not running.")
        if self._start_error is not None:
            raise self._start_error
        # Its writes wait for the broker as long as the server's start may take (the server answers
        # reads on a catalog already there before its broker is up), unless told otherwise.
        kwargs.setdefault("delivery_timeout_secs", self.startup_timeout_secs)
        if self._protocol_url is not None:
            secret = settings.token_secret()
            if secret is not None and "token" not in kwargs:  # its endpoint asks for one: its own
                from protocol.tokens import mint

                kwargs["token"] = mint(secret, hosts=[self._bind_host], subject="strata-server")
            client = CatalogClient(self._protocol_url, kafka_config=self.kafka_options, **kwargs)
        else:
            client = CatalogClient(self.bootstrap_servers, self.store, kafka_config=self.kafka_options,
                                   **kwargs)
        self._clients.append(client)
        return client

    def shutdown(self) -> None:
        """Stop the server: its clients, the projector, then the broker. What it holds stays in
        ``data_dir`` for the next ``Server`` there. Raises ``ValueError`` if it is not running,
        as Rerun's does (``close()`` is the form that may be called twice)."""
        if not self._running:
            raise ValueError("Server is not running or has already been shut down")
        self.close()

    def close(self) -> None:
        """Close its clients (each flushes its writes while the projector runs), stop the
        projector, then the broker; then raise the first error a client's flush raised (a
        ``WriteRefusedError``, say). Safe to call twice."""
        self._running = False
        _RUNNING.discard(self)
        self._closing.set()
        self._finish_starting()
        self._stop_protocol()
        projecting = self._projector is not None and self._projector.poll() is None
        failures: list[Exception] = []
        for client in self._clients:
            try:
                client.close(flush=projecting)
            except Exception as exc:  # noqa: BLE001 - raised below, once everything is stopped
                failures.append(exc)
        self._clients.clear()
        self.stop_projector()
        if self.broker:
            self.broker.stop()
        self._released.set()
        if self._starting is not None and self._starting is not threading.current_thread():
            self._starting.join()
            self._starting = None
        (self.data_dir / settings.SERVER_FILE).unlink(missing_ok=True)
        if failures:
            raise failures[0]

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Like Rerun's, a server that goes out of scope stops.
        if getattr(self, "_running", False):
            self.close()


_RUNNING: weakref.WeakSet[Server] = weakref.WeakSet()
"""Servers started and not yet closed: those still running at interpreter exit stop then, in
order (projector before broker), while the modules they need are still there."""


@atexit.register
def _close_running() -> None:
    for server in list(_RUNNING):
        server.close()


def _tls_files(files: tuple[str | PathLike[str], str | PathLike[str]] | None,
               protocol_port: int | None) -> tuple[Path, Path] | None:
    """``protocol_tls`` as absolute paths, checked now: ``ValueError`` with ``protocol_port=None``
    or for a file that is not there."""
    if files is None:
        return None
    if protocol_port is None:
        raise ValueError("protocol_tls serves Rerun's catalog protocol over TLS, which protocol_port=None "
                         "does not serve")
    cert, key = (Path(path).absolute() for path in files)
    for what, path in (("certificate", cert), ("private key", key)):
        if not path.is_file():
            raise ValueError(f"protocol_tls: no {what} file at {path}")
    return cert, key


def _recording_paths(name: str, paths: str | PathLike[str] | Sequence[str | PathLike[str]]
                     ) -> Callable[[], list[Path]]:
    """What lists a dataset's recordings at start (a directory is listed then), checked now."""
    if isinstance(paths, str | PathLike):
        directory = Path(paths).absolute()
        if not directory.is_dir():
            raise ValueError(f"Prefix path '{directory}' for dataset '{name}' must be a directory.")
        return lambda: sorted(p for p in directory.rglob("*")
                              if p.is_file() and p.suffix.lower() in RECORDING_SUFFIXES)
    files = [Path(p).absolute() for p in paths]
    for file in files:
        if not file.is_file():
            raise ValueError(f"Path '{file}' for dataset '{name}' must be a RRD file.")
    return lambda: files
