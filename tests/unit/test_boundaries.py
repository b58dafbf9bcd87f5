"""Package boundaries (DESIGN.md invariant 6): the fold stays pure and Spark stays a thin adapter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_AND_SPARK = ("pyspark", "confluent_kafka")


def imported_roots(package: str) -> dict[str, set[str]]:
    """Top-level module names each .py file under ``package`` imports (absolute imports only)."""
    found = {}
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {ROOT / package}"
    for path in files:
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    return {path: sorted(names & set(forbidden))
            for path, names in imported_roots(package).items() if names & set(forbidden)}


def test_importing_projector_loads_neither_spark_nor_kafka():
    code = ("import projector, sys; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('pyspark','confluent_kafka')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_check_above_would_see_a_kafka_import():
    # The subprocess check is only meaningful if the interpreter can import these at all.
    code = "import producers, sys; print('confluent_kafka' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_projector_source_imports_neither_spark_nor_kafka():
    assert offenders("projector", KAFKA_AND_SPARK) == {}


def test_spark_streaming_does_not_import_kafka_clients():
    # It reads Kafka through Spark's own connector; confluent_kafka belongs to producers.
    assert offenders("spark_streaming", ("confluent_kafka",)) == {}
    # And it is the Spark adapter: the scan does see its imports.
    assert any("pyspark" in names for names in imported_roots("spark_streaming").values())


@pytest.mark.parametrize("package, forbidden", [
    ("events", (*KAFKA_AND_SPARK, "projector", "producers", "sdk", "sqlite_utils")),
    ("producers", ("pyspark", "projector", "sdk", "spark_streaming")),
    ("changelog", ("pyspark", "sdk", "spark_streaming")),
    ("dashboard", ("pyspark", "spark_streaming")),
])
def test_lower_layers_do_not_import_upper_layers(package, forbidden):
    assert offenders(package, forbidden) == {}
