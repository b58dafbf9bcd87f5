"""The two catalogs under test behind one small interface: the embedded strata stack and Rerun's
OSS catalog server. Both clients share the calls the scenarios use: ``create_dataset(name)``,
``register(uris, layer_name=...).wait()``, ``segment_table()`` and ``manifest()``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias
from unittest import mock

import pyarrow as pa

import sdk
from bench import procs
from bench.recordings import LAYERS, RecordingPool, segment_id
from events import DefineSchema, Event, RegisterLayer
from producers import EventProducer
from projector import ProjectionReader, open_store, wait_for_positions
from recordings import read_recording
from sdk.layer_commands import layer_commands
from stack import Server, processes

if TYPE_CHECKING:  # rerun.catalog is imported when rerun's server is measured, not before
    import rerun.catalog

    Client: TypeAlias = sdk.CatalogClient | rerun.catalog.CatalogClient
    """A client of either system: the scenarios both run use what the two have in common."""
    Dataset: TypeAlias = sdk.DatasetEntry | rerun.catalog.DatasetEntry

SEND_CHUNK = 20_000
PRODUCER_ID = "strata-bench-pipeline"


class ProbedServer(Server):
    """The embedded strata stack whose projector also writes Spark's event log to
    ``event_log_dir`` (see ``bench.probe``); everything else is ``sdk.Server``, without the
    endpoint of Rerun's protocol (``protocol_port=None``): the scenarios read through strata's
    client, and the series stays comparable with earlier runs."""

    def __init__(self, data_dir: Path, event_log_dir: Path) -> None:
        self.event_log_dir = event_log_dir
        super().__init__(data_dir, protocol_port=None)

    def start_projector(self) -> None:
        start = processes.start

        def start_probe(args: list[str], log_path: Path, env: dict[str, str] | None = None
                        ) -> subprocess.Popen[bytes]:
            at = args.index("spark_streaming")
            args = [*args[:at], "bench.probe", "--event-log-dir", str(self.event_log_dir), *args[at + 1:]]
            return start(args, log_path, env=env)

        with mock.patch.object(processes, "start", start_probe):
            super().start_projector()

    def process_roots(self) -> dict[str, int]:
        """Pids of the broker and the projector, the roots of the stack's process trees.
        ``RuntimeError`` if either is not running."""
        broker = None if self.broker is None else self.broker._process
        if broker is None or self._projector is None:
            raise RuntimeError("the stack's broker and projector are not both running: no pids to measure")
        return {"broker": broker.pid, "projector": self._projector.pid}


class System(Protocol):
    """A catalog under test, started by ``start()`` and stopped by ``close()``."""

    name: str

    @property
    def client(self) -> Client: ...

    def start(self) -> float: ...

    def first_read_s(self) -> float: ...

    def memory(self) -> dict[str, float]: ...

    def fill(self, dataset: Dataset, pool: RecordingPool, segments: int) -> None: ...

    def close(self) -> None: ...


def _not_started(system: str) -> RuntimeError:
    return RuntimeError(f"the {system} system is not started: call start() first")


class StrataSystem:
    """The embedded strata stack under ``directory``."""

    name = "strata"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.event_log_dir = directory / "spark-events"
        self._server: Server | None = None
        self._client: sdk.CatalogClient | None = None
        self._store: ProjectionReader | None = None

    @property
    def server(self) -> Server:
        """The stack; ``RuntimeError`` before ``start()``."""
        if self._server is None:
            raise _not_started(self.name)
        return self._server

    @property
    def client(self) -> sdk.CatalogClient:
        """A client of the stack; ``RuntimeError`` before ``start()``."""
        if self._client is None:
            raise _not_started(self.name)
        return self._client

    @property
    def store(self) -> ProjectionReader:
        """The projection store, read-only: how far the projector got; ``RuntimeError`` before
        ``start()``."""
        if self._store is None:
            raise _not_started(self.name)
        return self._store

    def make_server(self) -> Server:
        return ProbedServer(self.directory / "stack", self.event_log_dir)

    def start(self) -> float:
        """Construct the server (which starts it) and a client: the seconds that took."""
        started = time.perf_counter()
        self._server = self.make_server()
        self._client = self._server.client()
        self._store = open_store(self._server.store, read_only=True)
        return time.perf_counter() - started

    def first_read_s(self) -> float:
        """Stop the stack, then construct a ``Server`` on its directory as a Rerun user does (with
        Rerun's endpoint): the seconds until rerun-sdk's client has its first answer
        (``dataset_names()``). The stack is started again as before after."""
        from rerun.catalog import CatalogClient

        self.close()
        started = time.perf_counter()
        with Server(self.directory / "stack") as server:
            CatalogClient(server.url()).dataset_names()
            took = time.perf_counter() - started
            server.ready()
        self.start()
        return took

    def memory(self) -> dict[str, float]:
        """RSS of the broker's and the projector's process trees, and their total (MiB).
        ``TypeError`` for a server that does not say its pids (not a ``ProbedServer``)."""
        server = self.server
        if not isinstance(server, ProbedServer):
            raise TypeError(f"the memory of a {type(server).__name__} is not measured: use a ProbedServer")
        roots = server.process_roots()
        parts = {name: procs.mib(procs.tree_rss_bytes([pid])) for name, pid in roots.items()}
        return {**parts, "total": round(sum(parts.values()), 1)}

    def fill(self, dataset: Dataset, pool: RecordingPool, segments: int) -> None:
        """Register ``segments`` x 3 layers through the producers API, as a pipeline would: the
        events carry what the SDK reads from the same files (schemas by reference, properties).
        ``TypeError`` for a dataset of another system."""
        if not isinstance(dataset, sdk.DatasetEntry):
            raise TypeError(f"strata fills datasets of its own, not a {type(dataset).__name__}")
        definitions, templates = layer_templates({layer: pool.uris(layer, 1)[0] for layer in LAYERS})
        producer = EventProducer(self.server.bootstrap_servers)
        try:
            last = producer.send([schema_event(dataset.id, d) for d in definitions])[-1]
            for start in range(0, segments, SEND_CHUNK):
                events = [layer_event(dataset.id, templates[layer], i, pool.path(layer, i).as_uri())
                          for i in range(start, min(start + SEND_CHUNK, segments)) for layer in LAYERS]
                last = producer.send(events)[-1]
        finally:
            producer.close()
        wait_for_positions(self.store, [last], timeout_secs=1800)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._server is not None:
            self._server.close()


def layer_templates(uris: Mapping[str, str]) -> tuple[list[DefineSchema], dict[str, RegisterLayer]]:
    """Per layer, the RegisterLayer the SDK produces for that layer's file in ``uris``, and the
    DefineSchema commands for the schemas they name, which a pipeline produces once, first."""
    definitions: dict[str, DefineSchema] = {}
    templates: dict[str, RegisterLayer] = {}
    for layer, uri in uris.items():
        templates[layer], named = layer_commands(read_recording(uri), layer)
        definitions.update((definition.sha256, definition) for definition in named)
    return list(definitions.values()), templates


def schema_event(dataset_id: uuid.UUID, definition: DefineSchema) -> Event:
    return Event(entry_id=dataset_id, producer_id=PRODUCER_ID, command=definition)


def layer_event(dataset_id: uuid.UUID, template: RegisterLayer, index: int, uri: str) -> Event:
    """``template`` for segment ``index`` stored at ``uri``, as one event."""
    return Event(entry_id=dataset_id, producer_id=PRODUCER_ID,
                 command=dataclasses.replace(template, segment_id=segment_id(index), storage_url=uri))


class RerunSystem:
    """Rerun's OSS catalog server (rerun-sdk), in a child process."""

    name = "rerun"

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._client: rerun.catalog.CatalogClient | None = None

    @property
    def process(self) -> subprocess.Popen[str]:
        """The server's process; ``RuntimeError`` before ``start()``."""
        if self._process is None:
            raise _not_started(self.name)
        return self._process

    @property
    def client(self) -> rerun.catalog.CatalogClient:
        """A client of the server; ``RuntimeError`` before ``start()``."""
        if self._client is None:
            raise _not_started(self.name)
        return self._client

    def start(self) -> float:
        from rerun.catalog import CatalogClient

        started = time.perf_counter()
        self._process = subprocess.Popen([sys.executable, "-m", "bench.rerun_server"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None  # stdout=PIPE
        url = self._process.stdout.readline().strip()
        if not url:
            raise RuntimeError(f"rerun's server exited with code {self._process.wait()}")
        self._client = CatalogClient(url)
        return time.perf_counter() - started

    def first_read_s(self) -> float:
        """Restart the server (it keeps nothing): the seconds until its client has its first
        answer (``dataset_names()``)."""
        self.close()
        started = time.perf_counter()
        self.start()
        self.client.dataset_names()
        return time.perf_counter() - started

    def memory(self) -> dict[str, float]:
        return {"total": procs.mib(procs.tree_rss_bytes([self.process.pid]))}

    def fill(self, dataset: Dataset, pool: RecordingPool, segments: int, *, batch: int = 2_000) -> None:
        """Register ``segments`` x 3 layer files, ``batch`` files per call (rerun's server keeps
        every file of a call open: 10,000 per call ran out of 20,000 file descriptors)."""
        for layer in LAYERS:
            for start in range(0, segments, batch):
                count = min(batch, segments - start)
                dataset.register(pool.uris(layer, count, start=start), layer_name=layer).wait()
            print(f"  rerun: registered {segments:,} files of layer {layer}", flush=True)

    def close(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        if process.stdin is not None:
            process.stdin.close()
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def manifest(dataset: Dataset) -> pa.Table:
    """``manifest()`` as an Arrow table; rerun marks it deprecated (debugging use), strata not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return dataset.manifest().to_arrow_table()
