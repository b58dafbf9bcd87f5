"""The command line finds the store where the stack put it: ``--store``, the running stack's
own record of it, ``$STRATA_STORE``, then ``DATA_DIR/store.db``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from projector import apply_batch
from projector.stores.sqlite import SqliteStore
from settings import SERVER_FILE
from stack import cli

from .conftest import undecodable


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
