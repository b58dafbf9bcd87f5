"""The house's rooms (DESIGN.md, the Layout of docs/architecture.md): arrows run only downwards,
no module takes part in an import cycle, no room reaches into another's private modules, the fold
stays pure and Spark stays a thin adapter.

The order of the rooms is the Layout table of docs/architecture.md, top room first: a room
imports only rooms listed below it. Every import statement counts, also those inside functions or
behind ``TYPE_CHECKING``: a cycle there is still two modules that cannot be understood apart.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
"""The page whose Layout table lists the rooms."""
KAFKA_AND_SPARK = ("pyspark", "confluent_kafka")

ALLOWED = {
    ("sdk/__init__.py", "stack/server.py"):
        "sdk.Server forwards to stack.Server on first use, as rerun.server sits beside rerun.catalog",
}
"""Import arrows that break the rules on purpose, each with its reason."""

Graph = dict[str, set[str]]
"""File (path relative to the tree's root) -> the files of the tree it imports."""


def python_files(root: Path) -> list[Path]:
    """The tree's Python files: in a git checkout those git does not ignore (a build directory
    left by ``pip install .`` is not the tree), elsewhere all but those in hidden directories."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                            cwd=root, capture_output=True, text=True)
    if listed.returncode == 0 and (root / ".git").exists():
        return sorted(root / name for name in listed.stdout.splitlines() if (root / name).exists())
    return sorted(p for p in root.rglob("*.py")
                  if not any(part.startswith(".") for part in p.relative_to(root).parts))


def module_names(root: Path, files: list[Path]) -> dict[str, str]:
    """Dotted module name -> file. Modules under ``tests/`` are also known by their name relative
    to it: pytest puts ``tests/`` on ``sys.path`` for the helpers beside its conftest."""
    names = {}
    for path in files:
        relative = path.relative_to(root)
        for base in (relative, *([relative.relative_to("tests")] if relative.parts[0] == "tests" else [])):
            parts = list(base.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts:
                names.setdefault(".".join(parts), str(relative))
    return names


def imported_modules(tree: ast.AST) -> Iterator[str]:
    """The dotted name of every module an import statement anywhere in ``tree`` may load, as
    written: ``import a.b`` gives ``a.b``, ``from a import b`` gives ``a.b`` (a module or a name
    in ``a``)."""
    for candidates in imported_names(tree):
        yield candidates[0]


def imported_names(tree: ast.AST) -> Iterator[tuple[str, ...]]:
    """For each module an import statement anywhere in ``tree`` loads, the names it may have, the
    most specific first: ``from a import b`` loads ``a.b`` if that is a module, else ``a``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name,) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from ((f"{node.module}.{alias.name}", node.module) for alias in node.names)


def resolve(candidates: tuple[str, ...], names: dict[str, str]) -> str | None:
    """The file of the first candidate that is a module of the tree, trying each one's parents
    after it (``import a.b.c`` of a tree holding only ``a``); None for a module from elsewhere."""
    for candidate in candidates:
        parts = candidate.split(".")
        for n in range(len(parts), 0, -1):
            name = ".".join(parts[:n])
            if name in names:
                return names[name]
    return None


def import_graph(root: Path) -> Graph:
    files = python_files(root)
    names = module_names(root, files)
    graph: Graph = {}
    for path in files:
        here = str(path.relative_to(root))
        targets = set()
        for candidates in imported_names(ast.parse(path.read_text(), filename=str(path))):
            found = resolve(candidates, names)
            if found is not None and found != here and (here, found) not in ALLOWED:
                targets.add(found)
        graph[here] = targets
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layout_rooms(page: str) -> list[str]:
    """The rooms of a page's Layout table (docs/architecture.md), top first: the first path of
    each row."""
    section = page.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [m[1] for m in re.finditer(r"^\| `([A-Za-z_]+)/`", section, re.M)]


def room_of(path: str) -> str:
    return path.split("/", 1)[0]


def private_imports(root: Path) -> list[str]:
    """Each import, outside ``tests/``, of a private module (a name starting with ``_``) of
    another top-level package of the tree: ``path: module``. A room's private modules are its
    own; other rooms use the names its ``__init__`` (or a public module) gives."""
    files = python_files(root)
    packages = {path.relative_to(root).parts[0] for path in files if len(path.relative_to(root).parts) > 1}
    bad = []
    for path in files:
        here = str(path.relative_to(root))
        if room_of(here) == "tests":
            continue
        for module in imported_modules(ast.parse(path.read_text(), filename=str(path))):
            top, *inner = module.split(".")
            if (top in packages and top != room_of(here)
                    and any(part.startswith("_") and not part.startswith("__") for part in inner)):
                bad.append(f"{here}: {module}")
    return sorted(bad)


def upward_imports(graph: Graph, rooms: list[str]) -> list[str]:
    """Each import from a room to one listed above it (or to a room the layout does not list)."""
    rank = {room: n for n, room in enumerate(rooms)}
    bad = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = room_of(source), room_of(target)
            if a != b and not (a in rank and b in rank and rank[a] < rank[b]):
                bad.append(f"{source} -> {target}")
    return bad


# -- the tree ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Graph:
    return import_graph(ROOT)


def test_no_module_takes_part_in_an_import_cycle(graph: Graph) -> None:
    assert cycles(graph) == []


def test_every_room_imports_only_rooms_listed_below_it_in_the_layout(graph: Graph) -> None:
    rooms = layout_rooms(ARCHITECTURE.read_text())
    assert {"stack", "sdk", "dashboard", "projector", "events"} <= set(rooms)
    code_rooms = {room_of(path) for path in graph if "/" in path}
    assert code_rooms <= set(rooms), f"rooms missing from the Layout: {code_rooms - set(rooms)}"
    assert upward_imports(graph, rooms) == []


def test_no_room_imports_another_room_s_private_module() -> None:
    assert private_imports(ROOT) == []


def test_the_allowed_exceptions_are_still_there(graph: Graph) -> None:
    # An exception that is no longer needed is removed, not kept as a hole for later.
    names = module_names(ROOT, python_files(ROOT))
    for source, target in ALLOWED:
        tree = ast.parse((ROOT / source).read_text())
        assert any(resolve(candidates, names) == target for candidates in imported_names(tree)), \
            (source, target)


# -- the checks themselves, on a tree made for them ---------------------------------------------


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "low/__init__.py": "",
        "low/a.py": "from low.b import thing\n",
        "low/b.py": "def thing():\n    from low import c\n",
        "low/c.py": "import low.a\n",
        "low/d.py": "from low import a\n",
    })
    assert cycles(import_graph(root)) == [["low/a.py", "low/b.py", "low/c.py"]]


def test_an_import_of_a_room_listed_above_is_found(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "top/__init__.py": "from low import x\n",
        "low/__init__.py": "x = 1\n",
        "low/y.py": "import top\n",
        "loose/z.py": "import low\n",
    })
    page = "# t\n\n## Layout\n\n| path | what |\n| --- | --- |\n| `top/` | a |\n| `low/` | b |\n\n## Next\n"
    rooms = layout_rooms(page)
    assert rooms == ["top", "low"]
    assert upward_imports(import_graph(root), rooms) == ["loose/z.py -> low/__init__.py",
                                                          "low/y.py -> top/__init__.py"]


def test_an_import_of_another_room_s_private_module_is_found(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {
        "top/__init__.py": "",
        "top/a.py": "from low._inner import thing\n",
        "top/b.py": "def later():\n    from low import _inner\n",
        "top/c.py": "import low._inner.deeper\n",
        "top/d.py": "from low import thing\nfrom low.public import other\nfrom top import _own\n",
        "top/_own.py": "from low.__main__ import run\n",
        "low/__init__.py": "from low._inner import thing\n",
        "low/_inner.py": "thing = 1\n",
        "low/public.py": "from low._inner import thing as other\n",
        "tests/test_low.py": "from low._inner import thing\n",
        "loose.py": "from low._inner import thing\n",
    })
    assert private_imports(root) == ["loose.py: low._inner.thing", "top/a.py: low._inner.thing",
                                     "top/b.py: low._inner", "top/c.py: low._inner.deeper"]


# -- third-party boundaries -------------------------------------------------------------------


def imported_roots(package: str) -> dict[str, set[str]]:
    """Top-level module names each .py file under ``package`` imports (absolute imports only)."""
    found = {}
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {ROOT / package}"
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        found[str(path.relative_to(ROOT))] = {candidates[-1].split(".")[0]
                                              for candidates in imported_names(tree)}
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    return {path: sorted(names & set(forbidden))
            for path, names in imported_roots(package).items() if names & set(forbidden)}


def test_projector_source_imports_neither_spark_nor_kafka() -> None:
    assert offenders("projector", KAFKA_AND_SPARK) == {}


def test_spark_streaming_does_not_import_kafka_clients() -> None:
    # It reads Kafka through Spark's own connector; confluent_kafka belongs to producers.
    assert offenders("spark_streaming", ("confluent_kafka",)) == {}
    # And it is the Spark adapter: the scan does see its imports.
    assert any("pyspark" in names for names in imported_roots("spark_streaming").values())


@pytest.mark.parametrize("package, forbidden", [
    ("events", (*KAFKA_AND_SPARK, "sqlite_utils", "psycopg")),
    ("producers", ("pyspark", "sqlite_utils", "psycopg")),
    ("changelog", ("pyspark",)),
    ("dashboard", ("pyspark", "sdk", "stack", "protocol")),  # the projector's views and the recordings only
    ("sdk", ("uvicorn", "starlette", "sse_starlette", "sqlite_utils", "psycopg", "selenium",
             "dashboard", "changelog", "spark_streaming", "protocol", "grpc")),
    ("commands", ("sdk", "protocol", "stack", "dashboard", "changelog", "spark_streaming", "pyspark")),
    ("protocol", ("sdk", "stack", "dashboard", "changelog", "spark_streaming", "pyspark")),  # on commands
    ("recordings", ("sdk", "dashboard", "changelog", "stack", "spark_streaming", "pyspark",
                    "confluent_kafka")),
])
def test_rooms_do_not_import_what_they_must_not_run(package: str, forbidden: tuple[str, ...]) -> None:
    assert offenders(package, forbidden) == {}
