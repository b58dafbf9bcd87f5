"""Rerun's web viewer (rerun-sdk's own, as the dashboard serves it) on a stack's catalog, through
the gRPC-web endpoint ``strata up`` starts beside its gRPC one, in headless Chromium.

The viewer draws on a canvas, so what it shows is read from what it was answered: the browser's
own record of the viewer's calls (DevTools' network events) and their bodies, decoded with the
protocol's messages. Each test checks those answers against strata's own reads of the catalog."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.support.ui import WebDriverWait

import sdk
from browser import chromium
from dashboard import Dashboard
from protocol import descriptors
from protocol.dataframes import decode
from protocol.grpc_web import FRAME, TRAILERS
from stack import Server
from stack.droid import write_episode, write_tracking_error

pytestmark = pytest.mark.store_agnostic  # the viewer reads through the endpoint, as on either store


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A stack serving Rerun's protocol over gRPC and gRPC-web, with a dataset of 3 DROID-like
    episodes, the second with its tracking error as a second layer."""
    work = tmp_path_factory.mktemp("viewer")
    paths = []
    for index in range(3):
        paths.append(work / f"episode_{index}.rrd")
        write_episode(paths[-1], f"episode_{index}", index, steps=30)
    write_tracking_error(work / "episode_1_error.rrd", "episode_1", 1, steps=30)
    with Server(work / "stack", protocol_port=0, protocol_web_port=0, datasets={"droid": paths}) as running:
        running.client().get_dataset("droid").register(
            [(work / "episode_1_error.rrd").as_uri()], layer_name="tracking_error").wait()
        yield running


@pytest.fixture(scope="module")
def dashboard(stack: Server) -> Iterator[Dashboard]:
    """The stack's dashboard as ``strata up`` makes it: its viewer opening segments through the
    catalog."""
    with Dashboard(stack.store, bootstrap_servers=stack.bootstrap_servers, port=0, viewer_port=0,
                   catalog_url=stack.protocol_web_url).start() as running:
        yield running


class ViewerCalls:
    """The catalog's answers to the viewer in ``browser``, decoded as they arrive: for each call
    finished, its method and its response messages."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self._methods: dict[str, str] = {}
        self.answers: list[tuple[str, list[Any]]] = []

    def poll(self) -> list[tuple[str, list[Any]]]:
        for entry in self.browser.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            params = message["params"]
            if message["method"] == "Network.requestWillBeSent":
                request = params["request"]
                # POSTs, the calls: not their CORS preflights
                if f"/{descriptors.SERVICE}/" in request["url"] and request["method"] == "POST":
                    self._methods[params["requestId"]] = request["url"].rsplit("/", 1)[1]
            elif message["method"] == "Network.loadingFinished" and params["requestId"] in self._methods:
                method = self._methods.pop(params["requestId"])
                body = self.browser.execute_cdp_cmd("Network.getResponseBody",
                                                    {"requestId": params["requestId"]})
                data = base64.b64decode(body["body"]) if body["base64Encoded"] else body["body"].encode()
                self.answers.append((method, _messages(method, data)))
        return self.answers

    def of(self, method: str) -> list[Any]:
        """Every response message of ``method`` received so far."""
        return [message for called, messages in self.poll() if called == method for message in messages]


def _messages(method: str, data: bytes) -> list[Any]:
    """The response messages of a gRPC-web body (its trailers left out)."""
    response = descriptors.message_class(f"{descriptors.SERVICE.rsplit('.', 1)[0]}.{method}Response")
    messages, at = [], 0
    while at < len(data):
        flag, length = FRAME.unpack_from(data, at)
        if not flag & TRAILERS:
            messages.append(response.FromString(data[at + FRAME.size:at + FRAME.size + length]))
        at += FRAME.size + length
    return messages


@contextlib.contextmanager
def viewer_on(stack: Server, dashboard: Dashboard, dataset: sdk.DatasetEntry) -> Iterator[ViewerCalls]:
    """The dashboard's web viewer in a new Chromium, opened on ``dataset`` through the stack's
    gRPC-web endpoint: its calls, until the browser is closed at the end of the block."""
    assert stack.protocol_web_url is not None and dashboard.viewer_port is not None
    url = f"{stack.protocol_web_url}/entry/{dataset.id.hex}"
    browser = chromium(network_log=True)
    try:
        calls = ViewerCalls(browser)
        browser.get(f"http://127.0.0.1:{dashboard.viewer_port}/?url={urllib.parse.quote(url, safe='')}")
        yield calls
    finally:
        browser.quit()


def _segment_ids(calls: ViewerCalls) -> list[list[str]]:
    """The segment ids of each segment table the viewer was sent."""
    tables = [decode(message.data) for message in calls.of("ScanSegmentTable") if message.HasField("data")]
    return [table.column("rerun_segment_id").to_pylist() for table in tables
            if "rerun_segment_id" in table.column_names]


def _entry_names(calls: ViewerCalls) -> list[set[str]]:
    return [{entry.name for entry in message.entries} for message in calls.of("FindEntries")]


def _until(calls: ViewerCalls, check: Any, timeout_secs: float = 120) -> Any:
    return WebDriverWait(calls.browser, timeout_secs, poll_frequency=0.5).until(lambda _: check(calls))


def test_the_viewer_lists_the_datasets_and_shows_the_segment_table_segment_table_shows(
        stack: Server, dashboard: Dashboard) -> None:
    client = stack.client()
    dataset = client.get_dataset("droid")
    with viewer_on(stack, dashboard, dataset) as calls:
        expected = sorted(dataset.segment_table().to_arrow_table().column("rerun_segment_id").to_pylist())
        shown = _until(calls, lambda c: [ids for ids in _segment_ids(c) if ids])
        names = _until(calls, _entry_names)
    assert expected == ["episode_0", "episode_1", "episode_2"]
    assert all(sorted(ids) == expected for ids in shown)
    assert set(client.dataset_names()) <= names[-1]


def test_a_segment_page_opens_its_segment_of_two_layers_in_the_viewer_through_the_catalog(
        stack: Server, dashboard: Dashboard) -> None:
    dataset = stack.client().get_dataset("droid")
    page = f"{dashboard.url}/api/datasets/droid/segments/episode_1"
    with urllib.request.urlopen(page, timeout=30) as answer:
        entities = {entity["path"] for entity in json.load(answer)["entities"]}
    browser = chromium(network_log=True)
    try:
        browser.get(f"{dashboard.url}/datasets/droid/segments/episode_1")
        link = WebDriverWait(browser, 30).until(lambda b: b.execute_script(
            "const a = document.getElementById('viewer'); return a.hidden ? null : a.href"))
        opened = f"{stack.protocol_web_url}/dataset/{dataset.id.hex}?segment_id=episode_1"
        assert link == f"http://127.0.0.1:{dashboard.viewer_port}/?url={urllib.parse.quote(opened, safe='')}"
        calls = ViewerCalls(browser)
        browser.get(link)
        manifests = _until(calls, lambda c: c.of("GetRrdManifest"))
        _until(calls, lambda c: sum(len(m.chunks) for m in c.of("FetchChunks")) >= 10)
    finally:
        browser.quit()
    manifest = manifests[0].rrd_manifest
    assert manifest.store_id.recording_id == "episode_1"
    paths = set(decode(manifest.data).column("chunk_entity_path").to_pylist())
    # Every entity of the segment's two layers, as the dashboard reads it, and its properties,
    # which the dashboard shows apart.
    assert {"/derived/tracking_error", "/observation/joint_positions"} <= entities
    assert entities and {path for path in paths if not path.startswith("/__properties")} == entities
    assert "/__properties/episode" in paths


def test_a_dataset_created_and_a_segment_registered_while_the_viewer_is_open_appear_in_it(
        stack: Server, dashboard: Dashboard, tmp_path: Path) -> None:
    """Rerun's protocol has events for entries only (``WatchEvents``): a new dataset reaches the
    viewer at once, and the viewer reads its catalog again on it, segment tables included; a
    segment registered alone shows at the viewer's next read (an entry's event, or its ↻), as
    on Rerun's server."""
    client = stack.client()
    dataset = client.get_dataset("droid")
    try:
        with viewer_on(stack, dashboard, dataset) as calls:
            _until(calls, lambda c: [ids for ids in _segment_ids(c) if len(ids) == 3])
            write_episode(tmp_path / "late.rrd", "late_episode", 9, steps=30)
            dataset.register([(tmp_path / "late.rrd").as_uri()]).wait()
            time.sleep(2)  # the viewer does not read again on a registration: no event says it
            assert not any("late_episode" in ids for ids in _segment_ids(calls))
            created = f"created-{os.urandom(3).hex()}"
            client.create_dataset(created)
            names = _until(calls, lambda c: [n for n in _entry_names(c) if created in n])
            shown = _until(calls, lambda c: [ids for ids in _segment_ids(c) if "late_episode" in ids])
    finally:
        dataset.unregister(segments_to_drop=["late_episode"], layers_to_drop=[]).wait()
    assert set(client.dataset_names()) <= names[-1]
    assert sorted(shown[-1]) == ["episode_0", "episode_1", "episode_2", "late_episode"]
