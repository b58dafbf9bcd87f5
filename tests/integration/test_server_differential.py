"""``sdk.Server`` against ``rr.server.Server``, written as Rerun's snippets write it: constructed
(which starts it) with ``datasets=`` and ``tables=``, used through ``client()`` and through
Rerun's own ``rr.catalog.CatalogClient(server.url())``, stopped with ``shutdown()``; the same
answers from both, a script of Rerun's shape that gives the same output with only its server
line changed, and a second strata server on the same directory resuming where the first
stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import rerun as rr

import sdk
import settings
from stack import demo
from stack.droid import write_episode

TABLE = pa.table({"episode": ["a", "b", "c"], "score": [0.5, 0.25, 1.0]})


def _lifecycle(server, dataset: str, table: str) -> dict:
    """What the snippets' lines give on a freshly constructed server; then it is shut down."""
    assert server.is_running()
    client = server.client()
    # Rerun's other way to connect: a client of the server's URL, the server's own kind and
    # rerun-sdk's (strata's URL is its endpoint's, rerun+http://, which both take).
    by_url = type(client)(server.url())
    assert client.url.split("?")[0] == server.url().split("?")[0]  # the catalog's URL (query aside)
    assert server.url().startswith("rerun+http://127.0.0.1:")
    expected = sorted(client.get_dataset(name=dataset).segment_ids())
    assert sorted(by_url.get_dataset(name=dataset).segment_ids()) == expected
    assert sorted(rr.catalog.CatalogClient(server.url()).get_dataset(name=dataset).segment_ids()) == expected
    if isinstance(by_url, sdk.CatalogClient):  # Rerun's client has nothing to close
        by_url.close()
    seen = {
        "segments": sorted(client.get_dataset(name=dataset).segment_ids()),
        "table": pa.table(client.get_table(name=table).reader()).sort_by("episode").to_pylist(),
        "version": client.version_info(),
    }
    server.shutdown()
    assert not server.is_running()
    with pytest.raises(RuntimeError, match="server is not running"):
        server.client()
    with pytest.raises(ValueError, match="not running or has already been shut down"):
        server.shutdown()
    return seen


def test_a_server_starts_when_constructed_and_resumes(tmp_path: Path, new_store) -> None:
    import lance

    episodes = tmp_path / "episodes"
    demo.write_base(episodes)
    lance.write_dataset(TABLE, tmp_path / "scores.lance")
    datasets, tables = {"droid": episodes}, {"scores": tmp_path / "scores.lance"}
    store = new_store()

    ours = _lifecycle(sdk.Server(tmp_path / "stack", datasets=datasets, tables=tables, store=store),
                      "droid", "scores")
    theirs = _lifecycle(rr.server.Server(host="127.0.0.1", datasets=datasets, tables=tables),
                        "droid", "scores")

    assert ours["segments"] == theirs["segments"] == sorted(demo.SEGMENT_IDS)
    assert ours["table"] == theirs["table"] == TABLE.sort_by("episode").to_pylist()
    for info in (ours["version"], theirs["version"]):
        assert isinstance(info.version, str) and info.version
        assert info.cloud_provider is None and info.cloud_region is None
    assert ours["version"].version.startswith("strata/")

    # The same directory again, in the with form and without Rerun's protocol: what the first
    # server held is there, and a recording added to the dataset's directory meanwhile is
    # registered at start. Its URL is the stack's, which strata's client takes and Rerun's not.
    write_episode(episodes / "added.rrd", "added_later", 7)
    with sdk.Server(tmp_path / "stack", datasets=datasets, tables=tables, store=store,
                    protocol_port=None) as again:
        assert again.url().startswith("strata://127.0.0.1:") and again.protocol_url is None
        client = again.client()
        assert client.url == again.url()
        with pytest.raises(ValueError, match="Invalid URI"):
            rr.catalog.CatalogClient(again.url())
        assert sorted(client.get_dataset(name="droid").segment_ids()) == sorted(
            [*demo.SEGMENT_IDS, "added_later"])
        assert client.table_names() == ["scores"]
    assert not again.is_running()


SNIPPET = """\
import sys

import rerun as rr
from datafusion import col

server = rr.server.Server(datasets={"droid": sys.argv[1]})
client = rr.catalog.CatalogClient(server.url())
dataset = client.get_dataset("droid")
print(sorted(dataset.segment_ids()))
table = dataset.segment_table().select("rerun_segment_id", "rerun_layer_names", "property:episode:success")
print(table.sort(col("rerun_segment_id")).to_arrow_table().to_pylist())
joints = dataset.filter_segments([sys.argv[2]]).filter_contents(["/observation/joint_positions"])
rows = joints.reader(index="real_time").to_arrow_table()
print(rows.num_rows, rows.column_names)
print(rows.column("/observation/joint_positions:Scalars:scalars").to_pylist()[:3])
server.shutdown()
"""
"""A script shaped as Rerun's catalog snippets are: its server constructed without ``with``, then
read through Rerun's own client of ``server.url()``."""


def test_a_rerun_snippet_gives_the_same_output_with_only_its_server_line_changed(
        tmp_path: Path, new_store) -> None:
    episodes = tmp_path / "episodes"
    demo.write_base(episodes)
    ours = "import sdk\n" + SNIPPET.replace("rr.server.Server(", "sdk.Server(")
    assert ours.count("sdk.Server(") == 1 and "rr.server" not in ours
    store = new_store()
    env = {**os.environ, "STRATA_HOME": str(tmp_path / "strata"),  # sdk.Server()'s data_dir
           **({"STRATA_STORE": store} if store else {})}
    printed = {}
    for system, script in (("rerun", SNIPPET), ("strata", ours)):
        done = subprocess.run([sys.executable, "-c", script, str(episodes), demo.SEGMENT_IDS[2]],
                              capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
        assert done.returncode == 0, f"{system}: {done.stderr}"
        printed[system] = done.stdout
    assert printed["strata"] == printed["rerun"]
    assert printed["strata"].splitlines()[0] == str(sorted(demo.SEGMENT_IDS))
    assert printed["strata"].splitlines()[2].startswith("120 ")  # the episode's steps
    assert (tmp_path / "strata" / "protocol.log").exists()  # served by strata's endpoint


def test_bad_construction_arguments_are_refused_before_anything_starts(tmp_path: Path) -> None:
    file = tmp_path / "one.rrd"
    write_episode(file, "one", 2)
    for arguments, message in (({"datasets": {"d": file}}, "must be a directory"),
                               ({"datasets": {"d": [tmp_path]}}, "must be a RRD file")):
        with pytest.raises(ValueError, match=message):
            rr.server.Server(host="127.0.0.1", **arguments)
        with pytest.raises(ValueError, match=message):
            sdk.Server(tmp_path / "stack", **arguments)
    with pytest.raises(ValueError, match="give the name or IP address"):
        sdk.Server(tmp_path / "stack", host="0.0.0.0")  # noqa: S104 - refused, not bound
    assert not (tmp_path / "stack").exists()


def test_a_script_that_never_shuts_down_stops_its_stack_at_exit(tmp_path: Path) -> None:
    """As with Rerun's server, a script may end without ``shutdown()``: the stack stops cleanly
    at exit (the state record it leaves while running is gone, nothing is printed)."""
    script = ("import sys, sdk\n"
              "server = sdk.Server(sys.argv[1])\n"
              "server.client().create_dataset('left_running')\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "stack")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
    assert not (tmp_path / "stack" / settings.SERVER_FILE).exists()
    with sdk.Server(tmp_path / "stack", protocol_port=None) as again:  # and what it wrote is there
        assert again.client().dataset_names() == ["left_running"]
