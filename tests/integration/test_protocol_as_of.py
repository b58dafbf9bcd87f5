"""A point of the catalog's history served at a URL of its own (``python -m protocol --as-of``, as
``strata serve --as-of``): Rerun's client and training loaders open a dataset's tag there as
Rerun's server opens the files the dataset had then, while the catalog moves on; writes at that
URL are refused."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import rerun as rr

import loaders
import sdk
from projector.stores import normalize
from protocol.endpoint import url_of, web_url_of
from stack import Server
from stack.droid import write_episode

pytestmark = pytest.mark.store_agnostic


def _episode(directory: Path, name: str, recording_id: str, index: int, steps: int) -> Path:
    path = directory / f"{name}.rrd"
    write_episode(path, recording_id, index, steps=steps)
    return path


@pytest.fixture(scope="module")
def history(client: sdk.CatalogClient, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[sdk.DatasetEntry, list[Path]]:
    """A dataset tagged ``v1`` when it had ``ep_0`` and ``ep_1``, then given ``ep_2`` and a
    longer ``ep_0`` in place of the first, with a dataset created after the tag; and the files
    it had at the tag."""
    directory = tmp_path_factory.mktemp("as-of")
    tagged = [_episode(directory, "ep_0", "ep_0", 0, 40), _episode(directory, "ep_1", "ep_1", 1, 25)]
    dataset = client.create_dataset(f"history-{os.urandom(3).hex()}")
    dataset.register([path.as_uri() for path in tagged]).wait()
    dataset.create_tag("v1")
    client.create_dataset(f"{dataset.name}-later")
    dataset.register([_episode(directory, "ep_2", "ep_2", 2, 30).as_uri()]).wait()
    replacement = _episode(directory, "ep_0_again", "ep_0", 5, 60)
    dataset.register([replacement.as_uri()], on_duplicate="replace").wait()
    return dataset, tagged


@contextlib.contextmanager
def served_as_of(server: Server, point: str) -> Iterator[tuple[str, str | None]]:
    """``python -m protocol --as-of point`` on ``server``'s catalog: its URL and gRPC-web URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "protocol", "--store", normalize(server.store), "--bootstrap-servers",
         server.bootstrap_servers, "--port", "0", "--web-port", "0", "--as-of", point],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        url = url_of(line)
        assert url is not None, (line, process.stderr.read() if process.stderr else "")
        yield url, web_url_of(line)
    finally:
        process.terminate()
        process.wait(60)


def test_rerun_s_loaders_read_a_tag_at_its_url_as_rerun_s_server_reads_its_files(
        server: Server, history: tuple[sdk.DatasetEntry, list[Path]], rerun_client) -> None:
    dataset, tagged = history
    theirs = rerun_client.create_dataset(dataset.name)
    theirs.register([path.as_uri() for path in tagged]).wait()
    expected = loaders.epoch(loaders.loader_dataset("iterable", theirs), workers=2, seed=3)
    with served_as_of(server, f"{dataset.name}/v1") as (url, web_url):
        at_tag = rr.catalog.CatalogClient(url).get_dataset(dataset.name)
        assert sorted(at_tag.segment_ids()) == ["ep_0", "ep_1"]
        got = loaders.epoch(loaders.loader_dataset("iterable", at_tag), workers=2, seed=3)
        assert web_url is not None and web_url.startswith("rerun+http://127.0.0.1:")
    assert got == expected and len(expected) > 0
    assert sorted(dataset.segment_ids()) == ["ep_0", "ep_1", "ep_2"]  # the catalog moved on


def test_a_time_or_an_offset_serves_the_catalog_then_and_writes_there_are_refused(
        server: Server, client: sdk.CatalogClient, history: tuple[sdk.DatasetEntry, list[Path]]) -> None:
    dataset, _ = history
    [tag] = dataset.tags()
    for point in (str(tag.offset), tag.created_at.isoformat()):
        with served_as_of(server, point) as (url, _):
            theirs = rr.catalog.CatalogClient(url)
            assert sorted(theirs.get_dataset(dataset.name).segment_ids()) == ["ep_0", "ep_1"]
            names = theirs.dataset_names()
            assert dataset.name in names and f"{dataset.name}-later" not in names
            # (the tag's time is that of its own record, just after its offset)
            with pytest.raises(ValueError, match=r"the catalog as of log offset \d+, which is read-only"):
                theirs.create_dataset(f"late-{os.urandom(3).hex()}")
    assert f"{dataset.name}-later" in client.dataset_names()


@pytest.mark.parametrize(("point", "message"), [
    ("{name}/v9", "dataset '{name}' has no tag 'v9' (its tags: 'v1')"),
    ("no-such-dataset/v1", "there is no dataset 'no-such-dataset'"),
    ("2026-12-05T10:00:00", "has no time zone"),
    ("yesterday", "is neither a log offset"),
])
def test_a_point_the_catalog_does_not_have_is_one_line_saying_so(
        server: Server, history: tuple[sdk.DatasetEntry, list[Path]], point: str, message: str) -> None:
    dataset, _ = history
    done = subprocess.run(
        [sys.executable, "-m", "protocol", "--store", normalize(server.store), "--bootstrap-servers",
         server.bootstrap_servers, "--port", "0", "--as-of", point.format(name=dataset.name)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stdout == ""
    assert message.format(name=dataset.name) in done.stderr.strip().splitlines()[-1]  # after any usage
