"""The stack the integration and reliability tiers share (fixture ``server``, started on first
use on the store backend of ``tests/conftest.py``'s ``new_store``) and its lifetime: the test modules
that use it run first, in their order, and (in one process) it stops after the last test that
uses it, so that it does not idle beside the stacks of their own that the later tests start. An
idle stack costs about a third of a core (its projector asks the broker for the log's end every
25 ms)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from stack import Server

SHARED_FIXTURE = "server"
STACKS: list[Server] = []
"""The running shared stack."""
LAST_USER = pytest.StashKey[str]()


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
    modules = {item.nodeid.split("::")[0] for item in items if uses_shared_stack(item)}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in modules)  # stable
    users = [item.nodeid for item in items if uses_shared_stack(item)]
    if users:
        config.stash[LAST_USER] = users[-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    # A process of pytest-xdist gets whole files in an order of xdist's own (by their number of
    # tests), so a module using the stack may come after the last one collected: there it stops
    # with the process.
    if hasattr(item.config, "workerinput"):
        return
    if item.nodeid == item.config.stash.get(LAST_USER, None):
        while STACKS:
            STACKS.pop().close()
