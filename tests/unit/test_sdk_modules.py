"""The SDK's modules, one job each: ``register()`` runs one way, the command core's
(``commands.register``: the request's rules, the recordings read, the commands built and checked,
one ``CommandLog.submit``), only the connection tracks writes in the client's ledger, and no SDK
module takes a name from the fold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .test_boundaries import ROOT, Graph, import_graph, imported_modules

SDK = ROOT / "sdk"
ENTRIES = {"sdk/_dataset.py", "sdk/_entry.py", "sdk/_table_entry.py", "sdk/_client.py"}
"""The client and its entries: what calls the modules of one job, never what they import."""


def reachable(graph: Graph, start: str) -> set[str]:
    """The files ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def calls_of(path: Path, method: str) -> list[str]:
    """Where ``path`` calls ``<something>.ledger.<method>(...)``: ``path:line``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "ledger"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(ROOT)


def test_registration_reaches_the_log_the_recordings_and_the_rules_and_no_client(graph: Graph) -> None:
    below = reachable(graph, "commands/registration.py")
    assert {"commands/log.py", "commands/layer_commands.py", "recordings/__init__.py",
            "projector/registration.py"} <= below
    assert not {path for path in below if path.startswith(("sdk/", "protocol/"))}


def test_the_connection_reaches_no_module_that_writes_through_it(graph: Graph) -> None:
    below = reachable(graph, "sdk/_connection.py")
    assert "producers/__init__.py" in below
    users = {str(p.relative_to(ROOT)) for p in SDK.glob("*.py")} - below - {"sdk/_connection.py"}
    assert {"sdk/_operations.py", "sdk/_dataset.py"} <= users


def test_the_entries_modules_of_one_job_are_below_the_entries(graph: Graph) -> None:
    for module in ("_history", "_assets", "_blueprints", "_dataset_reads", "_file_schemas", "_table_writes"):
        below = reachable(graph, f"sdk/{module}.py")
        assert below & ENTRIES == set(), module


def test_only_the_connection_tracks_writes_in_the_ledger() -> None:
    tracked = [call for path in sorted(SDK.glob("*.py")) for call in calls_of(path, "track")]
    assert tracked and all(call.startswith("sdk/_connection.py:") for call in tracked), tracked


def test_no_sdk_module_imports_from_the_fold() -> None:
    imported = {str(path.relative_to(ROOT)): set(imported_modules(ast.parse(path.read_text())))
                for path in sorted(SDK.glob("*.py"))}
    assert any("projector.views" in names for names in imported.values())  # the scan sees imports
    assert {path: sorted(n for n in names if n.startswith("projector.fold"))
            for path, names in imported.items() if any(n.startswith("projector.fold") for n in names)} == {}
