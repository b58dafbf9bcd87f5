"""Library code never prints: a ``print()`` or a write to ``sys.stdout``/``sys.stderr`` is the
command line's (``stack/cli.py`` and the ``stack.output`` it writes through), the demo's, a
benchmark's or a ``__main__`` module's. A library tells its caller through return values,
callbacks (progress) and logging."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAY_PRINT = {"stack/cli.py", "stack/output.py", "stack/demo.py"}
"""Besides ``bench/``, ``tests/``, ``scripts/``, ``examples/`` and ``__main__`` modules."""
OUTSIDE_THE_LIBRARY = ("bench", "tests", "scripts", "examples", "docs")


def prints(root: Path) -> list[str]:
    """Each ``print`` call and each use of ``sys.stdout`` or ``sys.stderr`` in the library code
    under ``root``: ``path:line``."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                            cwd=root, capture_output=True, text=True)
    if listed.returncode == 0 and (root / ".git").exists():
        files = [root / name for name in listed.stdout.splitlines() if (root / name).exists()]
    else:
        files = [p for p in root.rglob("*.py") if not any(part.startswith(".") for part in p.parts)]
    found = []
    for path in sorted(files):
        here = path.relative_to(root)
        if (here.parts[0] in OUTSIDE_THE_LIBRARY or len(here.parts) == 1 or here.name == "__main__.py"
                or str(here) in MAY_PRINT):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            called_print = (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                            and node.func.id == "print")
            standard_stream = (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                               and isinstance(node.value, ast.Name) and node.value.id == "sys")
            if called_print or standard_stream:
                found.append(f"{here}:{getattr(node, 'lineno', 0)}")
    return found


def test_library_code_never_prints() -> None:
    assert prints(ROOT) == []


def test_a_print_or_a_standard_stream_in_library_code_is_found(tmp_path: Path) -> None:
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "loud.py").write_text("import sys\n\nprint('x')\nsys.stderr.write('y')\n")
    (tmp_path / "room" / "__main__.py").write_text("print('a command may')\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "run.py").write_text("print('so may a benchmark')\n")
    assert prints(tmp_path) == ["room/loud.py:3", "room/loud.py:4"]
