"""Markers by directory, and the real stack shared by the integration and reliability tiers.

Everything under tests/integration is an integration test; everything under tests/reliability
is a reliability test (slow: crashes, restarts, faults, load). The stack fixtures start a KRaft
Kafka broker and the Spark projector once per session, on first use. The property tests' profile
(``profiles``: ``ci`` or ``dev``) is loaded here.
"""

from __future__ import annotations

import os
import sys
import tempfile

# Before anything imports grpc: a test process talks gRPC and also starts the stack's children,
# whose fork (preexec_fn) would run grpc's fork handlers, and those can restart grpc's poller in
# the child after Popen closed its descriptors; the child then aborts before exec ("epoll_wait
# error: Bad file descriptor", grpc/grpc#43055). The children exec at once and need no handlers.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import profiles
import sdk
from postgres import EmbeddedPostgres
from producers import ensure_topics
from s3 import EmbeddedS3
from stack import Server
from stack.broker import EmbeddedBroker

pytest_plugins = ["shared_stack"]  # the shared stack (fixture ``server``), stopped after its last test

profiles.load()  # before the test modules, whose @settings read the profile when imported

TESTS_DIR = Path(__file__).parent
MARKERS_BY_DIRECTORY = {
    TESTS_DIR / "contract": pytest.mark.contract,
    TESTS_DIR / "integration": pytest.mark.integration,
    TESTS_DIR / "reliability": pytest.mark.reliability,
}


STORE_BACKEND = os.environ.get("STRATA_TEST_STORE", "sqlite")
"""The store backend of the stacks the integration and reliability tiers start: ``sqlite`` (the
embedded default) or ``postgresql`` (a database of the session's PostgreSQL server per stack)."""
if STORE_BACKEND == "postgresql":
    # A PostgreSQL store's search indexes are where STRATA_SEARCH_URL says, for the projectors
    # (which inherit it) and the clients alike, as a team sets it (docs/search.md).
    os.environ.setdefault("STRATA_SEARCH_URL", tempfile.mkdtemp(prefix="strata-search-"))


ONCE_MARKERS = ("sqlite_only", "own_store", "store_agnostic")
"""Markers of tests run on the embedded store only (see ``pytest_collection_modifyitems``)."""
STORE_FIXTURES = ("new_store", "postgres")
"""The fixtures through which a test's stacks get this run's backend: a test using neither (its
``Server`` on its own default store, or no store at all) would run the same again."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parents = Path(item.fspath).parents
        for directory, marker in MARKERS_BY_DIRECTORY.items():
            if directory in parents:
                item.add_marker(marker)
    if STORE_BACKEND != "sqlite":
        # Faults of SQLite's own (a full disk under its file, its write-ahead log), tests whose
        # stacks choose their own store or none, and tests whose subject is not the store (what
        # they read from it, the contract tier checks on every backend): not run again on another
        # backend, and reported as deselected, not as passed.
        def once(item: pytest.Item) -> bool:
            if any(item.get_closest_marker(name) for name in ONCE_MARKERS):
                return True
            return not any(name in getattr(item, "fixturenames", ()) for name in STORE_FIXTURES)

        deselected = [item for item in items if once(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if not once(item)]


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str | None]:
    """An external broker if the environment names one, a testcontainers broker if asked to use
    Docker, else None: the stack then starts its own embedded broker."""
    if os.environ.get("STRATA_TEST_BOOTSTRAP_SERVERS"):
        yield os.environ["STRATA_TEST_BOOTSTRAP_SERVERS"]
    elif os.environ.get("STRATA_TEST_DOCKER") == "1":
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer("apache/kafka:4.2.0").with_kraft() as kafka:
            yield kafka.get_bootstrap_server()
    else:
        yield None


@pytest.fixture(scope="session")
def postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server for the session (Debian's package); tests create databases on it."""
    with EmbeddedPostgres() as server:
        yield server


@pytest.fixture(scope="session")
def s3() -> Iterator[EmbeddedS3]:
    """An S3-compatible server for the session (S3Proxy); tests put recordings in its buckets."""
    with EmbeddedS3() as server:
        yield server


@pytest.fixture(scope="session")
def new_store(request: pytest.FixtureRequest) -> Callable[[], str | None]:
    """Makes the store of a new stack on this run's backend: None on SQLite (the stack's own file
    in its data directory), else a new database of the session's PostgreSQL server."""
    if STORE_BACKEND == "sqlite":
        return lambda: None
    if STORE_BACKEND != "postgresql":
        raise ValueError(f"STRATA_TEST_STORE={STORE_BACKEND!r}: use sqlite or postgresql")
    return request.getfixturevalue("postgres").create_database


@pytest.fixture(scope="session")
def client(server: Server) -> sdk.CatalogClient:
    return server.client()


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory,
               new_store: Callable[[], str | None]) -> Iterator[Server]:
    """A stack of the test's own (broker, projector, a store on this run's backend; its data
    directory outside the test's ``tmp_path``), for a test that rebuilds its stack's whole log:
    the shared stack's log grows with every test before it, and so would the test's time."""
    with Server(tmp_path_factory.mktemp("own-stack"), store=new_store(), protocol_port=None) as running:
        yield running


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bootstrap servers of a Kafka broker of the module's own (strata's topics created), for
    projectors that read its whole log: its log holds only what the module's tests write."""
    broker = EmbeddedBroker(tmp_path_factory.mktemp("own-broker"))
    broker.start()
    try:
        ensure_topics(broker.bootstrap_servers)
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session", params=[0, 2], ids=["in-process", "2-workers"])
def reading_client(server: Server, request: pytest.FixtureRequest) -> sdk.CatalogClient:
    """A client reading in its own process (``workers=0``), then one reading with two worker
    processes: the differential reads run on both."""
    return server.client(workers=request.param)


@pytest.fixture(scope="session")
def rerun_client() -> Iterator:
    """A client of Rerun's own catalog server, for differential tests."""
    import rerun as rr

    server = rr.server.Server()
    try:
        yield server.client()
    finally:
        server.shutdown()


@pytest.fixture
def dataset(client: sdk.CatalogClient, request: pytest.FixtureRequest) -> sdk.DatasetEntry:
    """A fresh dataset per test, named after it."""
    return client.create_dataset(f"{request.node.name}-{os.urandom(4).hex()}")


RrdMaker = Callable[..., str]


@pytest.fixture
def make_rrd(tmp_path: Path) -> RrdMaker:
    """Writes a small .rrd with rerun-sdk and returns its file:// URI."""
    import numpy as np
    import rerun as rr

    def make(recording_id: str, *, name: str | None = None, properties: dict | None = None,
             points: int = 3) -> str:
        path = tmp_path / f"{name or recording_id}.rrd"
        rec = rr.RecordingStream("strata-test", recording_id=recording_id)
        rec.save(path)
        rec.log("points", rr.Points3D(np.arange(points * 3, dtype=np.float32).reshape(points, 3)))
        for entity, values in (properties or {}).items():
            rec.send_property(entity, rr.AnyValues(**values))
        rec.flush()
        del rec
        return path.as_uri()

    return make


@pytest.fixture
def make_parquet(tmp_path: Path) -> Callable[..., str]:
    """Writes a one-row Parquet recording whose columns have exactly the given Arrow types, and
    returns its file:// URI: the way to give a layer a chosen schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def make(recording_id: str, types: dict[str, pa.DataType], *, name: str | None = None) -> str:
        schema = pa.schema(list(types.items()), metadata={"recording_id": recording_id})
        path = tmp_path / f"{name or recording_id}.parquet"
        pq.write_table(pa.Table.from_pylist([], schema=schema), path)
        return path.as_uri()

    return make


@pytest.fixture
def fetch_chunks_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per ``FetchChunks`` call of the protocol endpoints started after it."""
    from protocol import service

    calls: list[int] = []
    fetch = service.STREAMING["FetchChunks"]
    monkeypatch.setitem(service.STREAMING, "FetchChunks",
                        lambda request: (calls.append(1), fetch(request))[1])
    return calls


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    """A local Spark session of two cores, as a user's notebook makes one, for the module."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("strata-test")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
