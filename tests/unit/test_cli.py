"""The command line finds the store where the stack put it: ``--store``, the running stack's
own record of it, ``$STRATA_STORE``, then ``DATA_DIR/store.db``; its read commands need no Kafka
cluster, and go through the public SDK only; its parser builds every command's help from shared
option groups; progress bars are drawn on a terminal only, and not when told ``--quiet``."""

from __future__ import annotations

import ast
import base64
import json
import socket
import sys
import uuid
from pathlib import Path

import pytest

import sdk
from events import CreateTag, Event
from projector import apply_batch
from projector.stores.sqlite import SqliteStore
from settings import SERVER_FILE
from stack import catalog_commands, cli
from terminal import run, strata

from .conftest import T0, at, create, log_record, register, undecodable


def store_with_rejections(path: Path, count: int) -> Path:
    store = SqliteStore(path)
    apply_batch(store, [undecodable(b"\x00bad", offset) for offset in range(count)])
    store.close()
    return path


def listed(capsys: pytest.CaptureFixture, *args: str) -> str:
    assert cli.main(["rejections", *args]) == 0
    return capsys.readouterr().out.splitlines()[-1]


def test_rejections_reads_the_store_the_running_stack_names(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("STRATA_STORE", raising=False)
    data_dir = tmp_path / "state"
    data_dir.mkdir()
    store_with_rejections(data_dir / "store.db", 1)  # not the stack's store
    elsewhere = store_with_rejections(tmp_path / "other-disk" / "catalog.db", 3)
    (data_dir / SERVER_FILE).write_text(json.dumps({"bootstrap_servers": "127.0.0.1:1",
                                                    "store": str(elsewhere)}))
    assert listed(capsys, "--data-dir", str(data_dir)) == "3 rejected records"
    assert listed(capsys, "--data-dir", str(data_dir), "--store", str(data_dir / "store.db")) == \
        "1 rejected records"


def test_rejections_reads_strata_store_when_no_stack_runs(tmp_path, capsys, monkeypatch) -> None:
    data_dir = tmp_path / "state"
    store_with_rejections(data_dir / "store.db", 1)
    monkeypatch.setenv("STRATA_STORE", str(store_with_rejections(tmp_path / "env.db", 2)))
    assert listed(capsys, "--data-dir", str(data_dir)) == "2 rejected records"
    monkeypatch.delenv("STRATA_STORE")
    assert listed(capsys, "--data-dir", str(data_dir)) == "1 rejected records"


def test_a_missing_store_says_where_it_looked_and_what_to_do(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("STRATA_STORE", raising=False)
    with pytest.raises(SystemExit, match=r"nowhere.*store\.db: no store at this path.*--store"):
        cli.main(["rejections", "--data-dir", str(tmp_path / "nowhere")])
    assert not (tmp_path / "nowhere").exists()  # nothing was created


def test_token_prints_a_secret_then_tokens_signed_with_it(capsys, monkeypatch) -> None:
    import jwt

    assert cli.main(["token", "--new-secret"]) == 0
    secret = capsys.readouterr().out.strip()
    assert len(base64.b64decode(secret, validate=True)) == 32
    monkeypatch.delenv("STRATA_TOKEN_SECRET", raising=False)
    with pytest.raises(SystemExit, match="STRATA_TOKEN_SECRET is not set: .*'strata token --new-secret'"):
        cli.main(["token"])
    monkeypatch.setenv("STRATA_TOKEN_SECRET", secret)
    assert cli.main(["token", "--read-only", "--host", "catalog.example.com", "--days", "2",
                     "--subject", "ana"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), base64.b64decode(secret), algorithms=["HS256"],
                        audience="redap")
    assert claims["permissions"] == ["read"] and claims["sub"] == "ana"
    assert claims["allowed_hosts"] == ["catalog.example.com"]
    assert claims["exp"] - claims["iat"] == 2 * 86400
    assert cli.main(["token"]) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    assert (claims["permissions"], claims["allowed_hosts"]) == (["read-write"], ["127.0.0.1", "localhost"])
    with pytest.raises(SystemExit, match="--days is a positive number of days"):
        cli.main(["token", "--days", "0"])


def test_read_commands_refuse_bad_input_in_one_line(tmp_path, capsys) -> None:
    store = str(store_with_rejections(tmp_path / "store.db", 1))
    assert cli.main(["datasets", "--store", store]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 datasets"
    with pytest.raises(SystemExit, match="no dataset named 'droid' \\(datasets: none yet\\)"):
        cli.main(["segments", "droid", "--store", store])
    with pytest.raises(SystemExit, match="since must be a log offset"):
        cli.main(["watch", "--since", "-1", "--store", store])
    with pytest.raises(SystemExit, match="no store at this path"):
        cli.main(["datasets", "--store", str(tmp_path / "absent.db")])
    with pytest.raises(SystemExit, match="no store at this path"):
        cli.main(["dashboard", "--store", str(tmp_path / "absent.db")])


def test_the_dashboard_on_a_port_in_use_says_what_to_do(tmp_path, capsys) -> None:
    store = str(store_with_rejections(tmp_path / "store.db", 1))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert cli.main(["dashboard", "--store", store, "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"the dashboard cannot listen on 127.0.0.1:{port}" in err
    assert "pick another port with --port (0: any free port)" in err


def catalog_store(path: Path) -> str:
    """A store holding dataset ``droid`` (segments ep_0 with layers base and extra, ep_1), its tag
    ``trained`` at offset 3, and one rejected record."""
    droid = uuid.UUID(int=1)
    events = [create(droid, "droid"), register(droid, "ep_0", size_bytes=1000, when=at(1)),
              register(droid, "ep_1", size_bytes=2_500_000, when=at(2)),
              register(droid, "ep_0", "extra", size_bytes=500, when=at(3)),
              Event(droid, CreateTag("trained", 3), produced_at=T0)]
    store = SqliteStore(path)
    apply_batch(store, [*(log_record(e, offset) for offset, e in enumerate(events)), undecodable(b"bad", 5)])
    store.close()
    return str(path)


def test_read_commands_need_no_kafka_cluster(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("STRATA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("STRATA_STORE", raising=False)
    data_dir = tmp_path / "state"  # no running stack there: no Kafka cluster is known
    catalog_store(tmp_path / "state" / "store.db")
    where = ["--data-dir", str(data_dir)]

    def shown(*args: str) -> list[str]:
        assert cli.main([*args, *where]) == 0
        return capsys.readouterr().out.splitlines()

    assert shown("datasets")[1].split()[:4] == ["droid", "2", "3", "2.5"]
    assert [line.split()[:2] for line in shown("segments", "droid")] == [
        ["SEGMENT", "LAYERS"], ["ep_0", "base,extra"], ["ep_1", "base"], ["2", "segments"]]
    assert shown("segments", "droid", "--as-of", "trained")[-1] == "2 segments in droid as of trained"
    assert shown("tags", "droid")[1].split()[:2] == ["trained", "3"]
    assert shown("diff", "droid", "trained")[1].split() == ["ep_0", "extra", "layer_added", "-",
                                                           "file:///data/ep_0.extra.rrd"]
    assert shown("rejections")[-1] == "1 rejected records"
    # A write needs the cluster, and says where to give it.
    with pytest.raises(SystemExit, match="no running stack in .*state: start it with 'strata up', or pass "
                                         "--bootstrap-servers"):
        cli.main(["tag", "droid", "later", *where])


def test_register_takes_recordings_or_a_prefix(tmp_path) -> None:
    store = catalog_store(tmp_path / "store.db")
    kafka = ["--store", store, "--bootstrap-servers", "127.0.0.1:1"]
    with pytest.raises(SystemExit, match=r"register takes recordings \(URI ...\) or --prefix, one of them"):
        cli.main(["register", "droid", *kafka])
    with pytest.raises(SystemExit, match=r"register takes recordings \(URI ...\) or --prefix, not both"):
        cli.main(["register", "droid", "a.rrd", "--prefix", str(tmp_path), *kafka])
    with pytest.raises(SystemExit, match=r"--spark reads a --prefix's recordings on Spark executors"):
        cli.main(["register", "droid", "a.rrd", "--spark", *kafka])


def imports_of(module: object) -> list[tuple[str, str]]:
    """Each (module, name) the source of ``module`` imports, in functions too."""
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += [(node.module or "", alias.name) for alias in node.names]
    return found


def test_the_catalog_commands_use_the_public_sdk_only() -> None:
    imported = imports_of(catalog_commands)
    assert ("sdk", "CatalogClient") in imported and ("stack", "output") in imported  # the scan sees them
    rooms = {module.split(".")[0] for module, _ in imported}
    assert rooms <= {"__future__", "argparse", "datetime", "pathlib", "time", "typing", "sdk", "stack"}
    assert {module for module, _ in imported if module.split(".")[0] == "sdk"} == {"sdk"}  # no sdk._x
    assert all(name in sdk.__all__ for module, name in imported if module == "sdk" and name)
    assert {module for module, _ in imported if module.startswith("stack")} == {"stack", "stack.cli_options"}


@pytest.mark.parametrize("command", [c.name for c in cli.COMMANDS])
def test_every_command_has_help_with_its_option_groups(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    [spec] = [c for c in cli.COMMANDS if c.name == command]
    assert shown.startswith(f"usage: strata {command} ") and "environment:\n  STRATA_HOME" in shown
    assert all(f"\n{group.title}:\n" in shown for group in spec.groups if group.title)
    assert " ".join(spec.description.split()[:6]) in " ".join(shown.split())


def test_snapshot_draws_a_progress_bar_on_a_terminal_only(tmp_path) -> None:
    store = catalog_store(tmp_path / "store.db")
    on_terminal = strata("snapshot", "--store", store, "--to", str(tmp_path / "a"), terminal=True)
    assert on_terminal.returncode == 0, on_terminal.stderr
    assert "written: 100%" in on_terminal.stderr and "row" in on_terminal.stderr
    rows = int(on_terminal.stdout.split("\t")[1].split()[0])
    assert f"{rows}/{rows}" in on_terminal.stderr
    piped = strata("snapshot", "--store", store, "--to", str(tmp_path / "b"), terminal=False)
    assert piped.returncode == 0 and piped.stderr == ""
    assert piped.stdout.startswith(str(tmp_path / "b" / "snapshot-"))
    quiet = strata("snapshot", "--store", store, "--to", str(tmp_path / "c"), "--quiet", terminal=True)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.startswith(str(tmp_path / "c"))


def test_what_libraries_write_to_stderr_meanwhile_goes_to_a_log_not_the_terminal(tmp_path) -> None:
    log = tmp_path / "spark.log"
    script = f"""
import os, subprocess, sys
from stack import output
output.note("before")
with output.others_to({str(log)!r}), output.Progress("folded", "record", quiet=False) as folded:
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('a JVM starting\\\\n')"], check=True)
    os.write(2, b"a library's warning\\n")
    output.note("a note")
    folded(3, 3)
output.note("after")
os.write(2, b"stderr is the terminal's again\\n")
"""
    shown = run([sys.executable, "-c", script], terminal=True)
    assert shown.returncode == 0, shown.stderr
    for line in ("before", "a note", "folded: 100%", "3/3", "after", "stderr is the terminal's again"):
        assert line in shown.stderr
    assert "JVM" not in shown.stderr and "warning" not in shown.stderr
    assert log.read_text() == "a JVM starting\na library's warning\n"
