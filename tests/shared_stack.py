"""The stack the integration and reliability tiers share (fixture ``server``, started on first
use on the store backend of ``tests/conftest.py``'s ``new_store``) and its lifetime: the test modules
that use it run first, in their order, and it stops after the last of them (in each process,
with pytest-xdist), so that it does not idle beside the stacks of their own that the later tests
start. An idle stack costs about a third of a core (its projector asks the broker for the log's
end every 25 ms)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from stack import Server

SHARED_FIXTURE = "server"
STACKS: list[Server] = []
"""The running shared stack."""
USER_MODULES = pytest.StashKey[set[str]]()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str | None,
           new_store: Callable[[], str | None]) -> Iterator[Server]:
    with Server(tmp_path_factory.mktemp("stack"), bootstrap_servers=kafka_bootstrap,
                store=new_store()) as running:
        STACKS.append(running)
        yield running


def uses_shared_stack(item: pytest.Item) -> bool:
    return SHARED_FIXTURE in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after selection (-m, -k) and pytest's own reordering
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    modules = {module(item) for item in items if uses_shared_stack(item)}
    # Then the reliability tier's modules, the longest (crashes under load, several hosts): two
    # processes given whole files in order would otherwise end with one of them running alone.
    items.sort(key=lambda item: (module(item) not in modules,
                                 not module(item).startswith("tests/reliability/")))  # stable
    config.stash[USER_MODULES] = modules


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Once the next test to run here is of a module that does not use the shared stack (the
    modules that do came first, and pytest-xdist hands a process its tests in that order), or
    there is none, the stack stops."""
    yield
    users = item.config.stash.get(USER_MODULES, set())
    if nextitem is None or module(nextitem) not in users:
        while STACKS:
            STACKS.pop().close()


def module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]
