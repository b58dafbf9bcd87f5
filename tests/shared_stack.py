"""The stack the integration and reliability tiers share (fixture ``server``, started on first
use on the store backend of ``tests/conftest.py``'s ``new_store``), the order of the test modules
and the stack's lifetime.

The modules that use the stack run first, then the others; within each group the slowest modules
known (``SLOWEST``) come first, so that in two processes (pytest-xdist with ``--dist loadfile
--no-loadscope-reorder``, which hands out whole files in this order) neither process is left alone
with a long module at the end. A process stops its stack when its next test is in a module that
does not use it: every later module it gets comes after that one, so none uses the stack. An idle
stack costs about a third of a core (its projector asks the broker for the log's end every 25 ms),
which the tests that start stacks of their own need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from stack import Server

SHARED_FIXTURE = "server"
STACKS: list[Server] = []
"""The running shared stack."""
SLOWEST = (
    "tests/integration/test_replay.py",
    "tests/reliability/test_projector_crash.py",
    "tests/integration/test_dashboard.py",
    "tests/reliability/test_pipelined_writes.py",
    "tests/reliability/test_broker_restart.py",
    "tests/reliability/test_store_faults.py",
    "tests/reliability/test_several_hosts.py",
    "tests/integration/test_restart.py",
    "tests/integration/test_server_differential.py",
    "tests/integration/test_secured.py",
    "tests/integration/test_workers.py",
    "tests/integration/test_cli_catalog.py",
    "tests/integration/test_seed_how_to.py",
    "tests/integration/test_tables.py",
)
"""The modules that took longest (each 30 s to 2.5 min, in ``pytest --durations``), slowest first."""
USER_MODULES = pytest.StashKey[set[str]]()
"""The modules with a test that uses the stack."""


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str | None,
           new_store: Callable[[], str | None]) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("stack"), bootstrap_servers=kafka_bootstrap,
                store=new_store(), protocol_port=None) as running:
        STACKS.append(running)
        yield running


def uses_shared_stack(item: pytest.Item) -> bool:
    return SHARED_FIXTURE in getattr(item, "fixturenames", ())


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.hookimpl(trylast=True)  # after selection (-m, -k) and pytest's own reordering
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    users = config.stash[USER_MODULES] = {module_of(item) for item in items if uses_shared_stack(item)}

    def rank(item: pytest.Item) -> tuple[bool, int]:
        module = module_of(item)
        slowness = SLOWEST.index(module) if module in SLOWEST else len(SLOWEST)
        return module not in users, slowness

    items.sort(key=rank)  # stable: modules otherwise in collection order, tests in theirs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    if nextitem is not None and module_of(nextitem) not in item.config.stash[USER_MODULES]:
        while STACKS:
            STACKS.pop().close()
