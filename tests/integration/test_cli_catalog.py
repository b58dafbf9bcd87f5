"""The CLI for people: ``strata datasets``, ``segments``, ``register`` (with its progress bars on a
terminal, and of a directory with ``--prefix``), ``tag``, ``tags``, ``diff`` and ``watch`` on the
real stack."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import rerun as rr

import sdk
from projector.stores import normalize
from stack import Server
from terminal import strata as run_strata

pytestmark = pytest.mark.store_agnostic  # the commands' output: what they read is the SDK's


def strata(server: Server, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stack.cli", *args, "--store", normalize(server.store)],
                          capture_output=True, text=True, timeout=timeout)


def test_register_then_list_datasets_and_segments(server: Server, client: sdk.CatalogClient, dataset,
                                                  make_rrd) -> None:
    uris = [make_rrd(f"cli_{i}") for i in range(5)]
    local_path = Path(uris[4].removeprefix("file://"))
    done = strata(server, "register", dataset.name, *uris[:4], str(local_path), "--batch-size", "2",
                  "--bootstrap-servers", server.bootstrap_servers)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"cli_{i}\t{uri}" for i, uri in enumerate(uris)]
    assert "5 registered, 0 failed" in done.stderr
    assert dataset.segment_ids() == [f"cli_{i}" for i in range(5)]

    # A duplicate fails that recording only, names it and its reason, and exits 1.
    again = strata(server, "register", dataset.name, uris[0], make_rrd("cli_9"), "--layer", "base",
                   "--bootstrap-servers", server.bootstrap_servers)
    assert again.returncode == 1
    assert f"{uris[0]}: Segment \"cli_0\", layer \"base\": already exists" in again.stderr
    assert "1 registered, 1 failed" in again.stderr
    assert strata(server, "register", dataset.name, uris[0], "--layer", "extra",
                  "--bootstrap-servers", server.bootstrap_servers).returncode == 0

    listed = strata(server, "datasets")
    assert listed.returncode == 0, listed.stderr
    [row] = [line.split() for line in listed.stdout.splitlines() if line.startswith(dataset.name + " ")]
    assert row[:3] == [dataset.name, "6", "7"] and row[-1] == str(dataset.id)

    segments = strata(server, "segments", dataset.name)
    assert segments.returncode == 0, segments.stderr
    lines = segments.stdout.splitlines()
    assert lines[0].split()[:2] == ["SEGMENT", "LAYERS"]
    assert [line.split()[:2] for line in lines[1:-1]] == [
        ["cli_0", "base,extra"], *[[f"cli_{i}", "base"] for i in (1, 2, 3, 4, 9)]]
    assert lines[-1] == f"6 segments in {dataset.name}"


def test_register_draws_progress_bars_on_a_terminal_and_registers_a_prefix(
        server: Server, dataset, make_rrd, tmp_path) -> None:
    uris = [make_rrd(f"bar_{i}") for i in range(3)]
    stack = ("--bootstrap-servers", server.bootstrap_servers, "--store", normalize(server.store))
    shown = run_strata("register", dataset.name, *uris, "--batch-size", "2", *stack, terminal=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [f"bar_{i}\t{uri}" for i, uri in enumerate(uris)]
    assert "read: 100%" in shown.stderr and "registered: 100%" in shown.stderr and "3/3" in shown.stderr
    assert "3 registered, 0 failed" in shown.stderr

    (tmp_path / "episodes" / "more").mkdir(parents=True)
    made = [make_rrd("p_1", name="episodes/p_1"), make_rrd("p_0", name="episodes/more/p_0")]
    episodes = tmp_path / "episodes"
    piped = run_strata("register", dataset.name, "--prefix", str(episodes), *stack, terminal=False)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines() == [f"p_0\t{made[1]}", f"p_1\t{made[0]}"]  # in path order
    assert piped.stderr.splitlines()[0] == (f"strata register: the recordings under {episodes.as_uri()} "
                                            f"into {dataset.name}, layer base")
    assert len(piped.stderr.splitlines()) == 2 and "2 registered, 0 failed" in piped.stderr  # and no bar
    assert dataset.segment_ids() == ["bar_0", "bar_1", "bar_2", "p_0", "p_1"]


def test_bad_input_is_one_line(server: Server, dataset, make_rrd, tmp_path) -> None:
    missing = strata(server, "segments", "no-such-dataset")
    assert missing.returncode == 1 and missing.stderr.startswith("strata: no dataset named 'no-such-dataset'")
    for args, message in [
        (["register", "no-such-dataset", make_rrd("x")], "strata: error: "),
        (["register", dataset.name, str(tmp_path / "absent.rrd")], "strata: error: "),
        (["register", dataset.name, make_rrd("y"), "--batch-size", "0"], "--batch-size must be at least 1"),
    ]:
        done = strata(server, *args, "--bootstrap-servers", server.bootstrap_servers)
        assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert dataset.segment_ids() == []


def test_tag_then_list_the_segments_as_of_it(server: Server, dataset, make_rrd) -> None:
    dataset.register([make_rrd("before_0"), make_rrd("before_1")]).wait()
    tagged = strata(server, "tag", dataset.name, "trained", "--bootstrap-servers", server.bootstrap_servers)
    assert tagged.returncode == 0, tagged.stderr
    name, offset = tagged.stdout.strip().split("\t")
    assert name == "trained" and [(t.name, t.offset) for t in dataset.tags()] == [("trained", int(offset))]
    dataset.unregister(segments_to_drop=["before_1"]).wait()
    dataset.register([make_rrd("after_0")]).wait()

    for point in ("trained", offset):
        then = strata(server, "segments", dataset.name, "--as-of", point)
        assert then.returncode == 0, then.stderr
        assert [line.split()[0] for line in then.stdout.splitlines()[1:-1]] == ["before_0", "before_1"]
        assert then.stdout.splitlines()[-1] == f"2 segments in {dataset.name} as of {point}"
    changed = strata(server, "diff", dataset.name, "trained")
    assert changed.returncode == 0, changed.stderr
    assert [line.split()[:3] for line in changed.stdout.splitlines()[1:-1]] == [
        ["after_0", "-", "segment_added"], ["after_0", "base", "layer_added"],
        ["before_1", "-", "segment_removed"], ["before_1", "base", "layer_removed"]]
    assert changed.stdout.splitlines()[-1] == f"4 changes in {dataset.name} from trained to now"
    listed = strata(server, "tags", dataset.name)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == ["trained", offset]
    again = strata(server, "tag", dataset.name, "trained", "--bootstrap-servers", server.bootstrap_servers)
    assert again.returncode == 1 and "already exists: tag 'trained'" in again.stderr, again.stderr
    unknown = strata(server, "segments", dataset.name, "--as-of", "nope")
    assert unknown.returncode == 1 and "its tags: trained" in unknown.stderr, unknown.stderr
    assert "Traceback" not in again.stderr + unknown.stderr


def test_watch_prints_changes_as_they_happen(server: Server, client: sdk.CatalogClient, dataset,
                                             make_rrd) -> None:
    watcher = subprocess.Popen([sys.executable, "-m", "stack.cli", "watch", dataset.name,
                                "--store", normalize(server.store)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = watcher.stderr.readline()
        assert banner.startswith(f"strata watch: changes of dataset {dataset.name} from now")
        time.sleep(0.5)
        uri = make_rrd("watched")
        dataset.register([uri]).wait()
        first, second = watcher.stdout.readline().split(), watcher.stdout.readline().split()
    finally:
        watcher.terminate()
        watcher.wait(timeout=30)
    assert first[2:6] == ["layer_added", dataset.name, "watched/base", uri]
    assert second[2:5] == ["segment_added", dataset.name, "watched"]
    assert int(first[0]) == int(second[0]) > 0


@pytest.mark.own_store
def test_up_serves_the_dashboard_and_rerun_s_protocol_and_prints_their_urls(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "stack.cli", "up", "--data-dir", str(tmp_path), "--port", "0",
               "--viewer-port", "0", "--protocol-port", "0", "--protocol-web-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        printed = []
        for line in process.stdout:  # ends if up exits
            printed.append(line)
            if line.split()[:1] == ["viewer"]:
                break
        [shown] = [line for line in printed if line.split()[:1] == ["dashboard"]]
        url = shown.split()[1]
        with urllib.request.urlopen(f"{url}/api/stats", timeout=30) as response:
            stats = json.load(response)
        assert stats["kafka_error"] is None and stats["lag_records"] == 0
        assert stats["store"] == str(tmp_path / "store.db")

        [protocol_line, web_line, viewer_line] = printed[-3:]
        assert protocol_line.split()[:1] == ["protocol"], "".join(printed)
        protocol_url = protocol_line.split()[1]
        web_url = web_line.split()[1]
        assert web_line.split()[:1] == ["gRPC-web"] and web_url.startswith("rerun+http://127.0.0.1:")
        assert viewer_line.rstrip().endswith("(segment pages open their segment in it through the catalog)")
        assert protocol_url.startswith("rerun+http://127.0.0.1:")
        theirs = rr.catalog.CatalogClient(protocol_url)
        assert theirs.dataset_names() == []
        with sdk.CatalogClient.from_state_dir(tmp_path) as ours:
            ours.create_dataset("droid")
        assert theirs.dataset_names() == ["droid"]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(120)
    assert process.returncode == 0
    for url in (protocol_url, web_url):  # stopped with the stack
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", int(url.rsplit(":", 1)[1]))) != 0
