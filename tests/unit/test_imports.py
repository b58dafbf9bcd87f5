"""What importing a room loads, each in a fresh interpreter, and what using a part without its extra
says: the client installs and imports without the stack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sdk
import sdk.errors

ROOT = Path(__file__).resolve().parents[2]
STACK_ONLY = ("pyspark", "py4j", "uvicorn", "starlette", "sse_starlette", "psycopg", "sqlite_utils", "lance",
              "selenium", "stack", "spark_streaming", "changelog", "dashboard", "protocol", "grpc")
"""What a client that only reads and writes the catalog has no use for."""


def loaded_after(statement: str, blocked: tuple[str, ...] = ()) -> tuple[set[str], str]:
    """The top-level modules loaded in a fresh interpreter after ``statement``, with the modules
    ``blocked`` made unimportable (as if not installed); and its stderr."""
    block = "".join(f"sys.modules[{name!r}] = None; " for name in blocked)
    code = (f"import sys; {block}{statement}; "
            "print(' '.join(sorted({m.split('.')[0] for m in sys.modules if sys.modules[m] is not None})))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split()), result.stderr


def failure_of(statement: str, blocked: tuple[str, ...]) -> str:
    """The last line of stderr of ``statement``, which must fail, with ``blocked`` unimportable."""
    block = "".join(f"sys.modules[{name!r}] = None; " for name in blocked)
    result = subprocess.run([sys.executable, "-c", f"import sys; {block}\n{statement}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0, result.stdout
    return result.stderr.strip().splitlines()[-1]


def test_import_sdk_loads_none_of_the_stack() -> None:
    loaded, _ = loaded_after("import sdk")
    assert "sdk" in loaded and "confluent_kafka" in loaded  # the check sees what is imported
    assert loaded & set(STACK_ONLY) == set()


def test_import_sdk_works_with_the_stack_uninstalled() -> None:
    loaded, _ = loaded_after("import sdk; from sdk import CatalogClient, ContentFilter", blocked=STACK_ONLY)
    assert "rerun" in loaded


def test_import_projector_loads_neither_spark_nor_kafka() -> None:
    loaded, _ = loaded_after("import projector")
    assert "projector" in loaded and "pyarrow" in loaded
    assert loaded & {"pyspark", "confluent_kafka", "sqlite_utils", "psycopg"} == set()


def test_import_recordings_loads_no_room_above_it_nor_kafka_nor_rerun_s_engine() -> None:
    loaded, _ = loaded_after("import recordings")
    assert {"recordings", "projector", "pyarrow"} <= loaded
    assert loaded & {"sdk", "stack", "dashboard", "changelog", "spark_streaming", "producers",
                     "confluent_kafka", "pyspark", "rerun"} == set()


def test_import_sdk_leaves_rerun_s_engine_to_first_use() -> None:
    loaded, _ = loaded_after("import sdk")
    assert "recordings" in loaded and "rerun" not in loaded


def test_import_dashboard_loads_neither_sdk_nor_spark() -> None:
    loaded, _ = loaded_after("import dashboard")
    assert "starlette" in loaded
    assert loaded & {"sdk", "stack", "pyspark"} == set()


def test_sdk_server_forwards_to_the_stack_on_first_use() -> None:
    loaded, _ = loaded_after("import sdk; sdk.Server")
    assert "stack" in loaded
    assert sdk.Server is __import__("stack").Server


@pytest.mark.parametrize("statement, blocked, extra", [
    ("import sdk; sdk.CatalogClient('127.0.0.1:1', 'postgresql://reader@127.0.0.1:1/strata')",
     ("psycopg",), "postgres"),
    ("from commands.lance import lance_table; lance_table('file:///nowhere')", ("lance",), "lance"),
    ("import sdk; sdk.Server(data_dir='/nonexistent').start()", ("pyspark",), "projector"),
])
def test_a_part_used_without_its_extra_names_the_extra_in_one_line(statement: str, blocked: tuple[str, ...],
                                                                     extra: str) -> None:
    line = failure_of(statement, blocked)
    assert line.startswith("events.errors.MissingExtraError: ")
    assert line.endswith(f"which is not installed: pip install 'strata[{extra}]'")


def test_a_server_without_grpc_names_the_extra_and_how_to_run_without_its_endpoint(tmp_path: Path) -> None:
    line = failure_of(f"import sdk; sdk.Server({str(tmp_path / 'stack')!r})", ("grpc",))
    assert line == ("events.errors.MissingExtraError: serving Rerun's catalog protocol, which Server does "
                    "unless protocol_port=None, needs grpc, which is not installed: pip install "
                    "'strata[protocol]'")
    assert not (tmp_path / "stack").exists()  # said before anything starts


def test_the_cli_without_the_web_stack_says_which_extra_to_install(tmp_path: Path) -> None:
    from projector.stores.sqlite import SqliteStore

    SqliteStore(tmp_path / "store.db").close()
    result = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['uvicorn'] = None; from stack.cli import main; "
                               f"sys.exit(main(['dashboard', '--store', '{tmp_path / 'store.db'}']))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr == ("strata: error: the dashboard needs uvicorn, which is not installed: "
                             "pip install 'strata[dashboard]'\n")


def test_the_public_names_are_pinned() -> None:
    assert sdk.__all__ == [
        "AlreadyExistsError", "CatalogClient", "Change", "ChangeKind", "ContentFilter", "DatasetEntry",
        "DatasetInfo", "DatasetSelection", "DatasetView", "DeliveryError", "EndpointRefusedError",
        "EndpointUnavailableError",
        "EntryId", "EntryKind", "Layer", "LayerInfo", "MissingExtraError", "NotFoundError",
        "ObjectStoreError", "OnDuplicate", "OnDuplicateSegmentLayer", "Operation", "ProjectionTimeoutError",
        "RecordingChangedError", "RegistrationOperation", "RegistrationResult", "Rejection",
        "RevisionConflictError", "Segment",
        "SegmentRegistrationResult", "Server", "StoreUnavailableError", "StrataError", "TableEntry", "Tag",
        "VersionInfo", "WorkerError", "WriteOutcome", "WriteRefusedError",
    ]
    assert sdk.errors.__all__ == [
        "AlreadyExistsError", "DeliveryError", "EndpointRefusedError", "EndpointUnavailableError",
        "MissingExtraError",
        "NotFoundError", "ObjectStoreError",
        "ProjectionTimeoutError", "RecordingChangedError", "RevisionConflictError", "StoreUnavailableError",
        "StrataError",
        "WorkerError", "WriteRefusedError",
    ]
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None
    for name in sdk.errors.__all__:
        assert issubclass(getattr(sdk.errors, name), sdk.StrataError)


def test_code_written_for_rerun_catches_strata_s_errors() -> None:
    import rerun.catalog

    for ours, theirs in ((sdk.NotFoundError, rerun.catalog.NotFoundError),
                         (sdk.AlreadyExistsError, rerun.catalog.AlreadyExistsError)):
        try:
            raise ours("an entry")
        except theirs as caught:  # as a notebook written for rerun.catalog has it
            assert isinstance(caught, sdk.StrataError)
    assert issubclass(sdk.NotFoundError, LookupError)
