"""The projection store's modules (``projector/stores``) each say their one job in a docstring, and
none reaches into another's private names: not by importing them, not through another object
(``store._query``), and not through ``self`` in a class whose private name comes from a base class
of another module (a backend using its base's ``self._lock``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STORES = Path(__file__).resolve().parents[2] / "projector" / "stores"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes, class attributes, and the
    attributes its code assigns to ``self``."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id == "self"):
            defined.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    return {name for name in defined if _private(name)}


def reaches_into_others(source: str) -> list[str]:
    """Each use in ``source`` of a private name that is not its own, as ``line: text``."""
    tree = ast.parse(source)
    own = _defined(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{node.lineno}: from {node.module} import {alias.name}"
                      for alias in node.names if _private(alias.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            if not is_self or node.attr not in own:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", sorted(STORES.glob("*.py")), ids=lambda path: path.name)
def test_a_store_module_says_its_job_and_uses_only_public_names_of_the_others(path: Path) -> None:
    source = path.read_text()
    assert ast.get_docstring(ast.parse(source)), f"{path.name} has no module docstring"
    assert reaches_into_others(source) == [], path.name


@pytest.mark.parametrize("source, found", [
    ("class PointReader:\n    def __init__(self, store):\n        self._store = store\n"
     "    def f(self):\n        return self._store._query('select 1')\n",
     ["5: self._store._query"]),
    ("from projector.stores.sql_rows import _layer\n", ["1: from projector.stores.sql_rows import _layer"]),
    ("class SqliteDatabase(Database):\n    def f(self):\n        with self._lock:\n            pass\n",
     ["3: self._lock"]),
    ("class A:\n    def __init__(self):\n        self._conn = None\n"
     "    def f(self):\n        return self._conn\n", []),
], ids=["through-another-object", "imported", "a-base-class-s", "its-own"])
def test_the_check_finds_a_private_name_used_from_elsewhere(source: str, found: list[str]) -> None:
    assert reaches_into_others(source) == found
