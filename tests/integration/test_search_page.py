"""The live page's searches in headless Chromium: a dataset page's search box over its full-text
indexes lists the segments the SDK's ``search_fts`` finds, and a hit's link opens Rerun's web
viewer on that segment at that time, through the stack's gRPC-web endpoint; a segment page finds
the frames nearest the frame it shows. Also their JSON routes."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pyarrow as pa
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from test_viewer_on_catalog import ViewerCalls, _until

from browser import chromium
from dashboard import Dashboard
from stack import Server
from stack.droid import EMBEDDING_ENTITY, NARRATION_ENTITY, write_embeddings, write_episode

pytestmark = pytest.mark.store_agnostic  # the page reads through the store's reads, as on either store

TEXT = f"{NARRATION_ENTITY}:TextDocument:text"
VECTOR = f"{EMBEDDING_ENTITY}:embedding"
EPISODES = 4


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """DROID-like episodes with an embeddings layer (the "red cup" in episode_1's narration), a
    full-text and a vector index, and a stack serving Rerun's protocol over gRPC-web."""
    work = tmp_path_factory.mktemp("search-page")
    paths = []
    for n in range(EPISODES):  # every fifth episode: each handles another object
        paths.append(work / f"episode_{n}.rrd")
        write_episode(paths[-1], f"episode_{n}", 5 * n, steps=30)
        write_embeddings(work / f"episode_{n}_emb.rrd", f"episode_{n}", 5 * n, steps=30, dimension=16)
    with Server(work / "stack", protocol_port=0, protocol_web_port=0, datasets={"droid": paths}) as running:
        dataset = running.client().get_dataset("droid")
        dataset.register([(work / f"episode_{i}_emb.rrd").as_uri() for i in range(EPISODES)],
                         layer_name="embeddings").wait()
        dataset.create_fts_index(column=TEXT, time_index="real_time")
        dataset.create_vector_index(column=VECTOR, time_index="real_time", distance_metric="Cosine")
        yield running


@pytest.fixture(scope="module")
def dashboard(stack: Server) -> Iterator[Dashboard]:
    with Dashboard(stack.store, bootstrap_servers=stack.bootstrap_servers, port=0, viewer_port=0,
                   catalog_url=stack.protocol_web_url).start() as running:
        yield running


def get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.load(answer)


def test_the_search_route_finds_what_the_sdk_finds_with_viewer_links_at_each_hits_time(
        stack: Server, dashboard: Dashboard) -> None:
    dataset = stack.client().get_dataset("droid")
    expected = pa.table(dataset.search_fts("red cup", TEXT, limit=10)).to_pylist()
    query = urllib.parse.urlencode({"column": TEXT, "q": "red cup", "limit": 10})
    hits = get(f"{dashboard.url}/api/datasets/droid/search?{query}")
    assert isinstance(hits, list) and hits
    assert [(h["segment"], h["score"]) for h in hits] == \
        [(e["rerun_segment_id"], pytest.approx(e["_score"])) for e in expected]
    first = hits[0]
    opened = (f"{stack.protocol_web_url}/dataset/{dataset.id.hex}?segment_id={first['segment']}"
              f"#when=real_time@{first['time']}")
    viewer = f"http://127.0.0.1:{dashboard.viewer_port}/?url="
    assert first["viewer"] == viewer + urllib.parse.quote(opened, safe="")
    indexes = get(f"{dashboard.url}/api/datasets/droid/indexes")
    assert {(i["column"], i["kind"]) for i in indexes} == {(TEXT, "full_text"), (VECTOR, "vector")}
    with pytest.raises(urllib.error.HTTPError) as refused:
        get(f"{dashboard.url}/api/datasets/droid/search?column={urllib.parse.quote(VECTOR)}&q=cup")
    assert refused.value.code == 400 and "no full_text index" in json.load(refused.value)["error"]


def test_a_text_search_on_the_page_lists_the_segments_and_a_hit_opens_the_viewer_there(
        stack: Server, dashboard: Dashboard) -> None:
    dataset = stack.client().get_dataset("droid")
    expected = pa.table(dataset.search_fts("red cup", TEXT, limit=20)).column("rerun_segment_id").to_pylist()
    browser = chromium(network_log=True)
    try:
        browser.get(f"{dashboard.url}/datasets/droid")
        WebDriverWait(browser, 30).until(lambda b: not b.find_element(By.ID, "search-section").get_attribute(
            "hidden"))
        browser.find_element(By.ID, "search-words").send_keys("red cup")
        browser.find_element(By.CSS_SELECTOR, "#search-form button").click()
        rows = WebDriverWait(browser, 30).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#search-hits tbody tr"))
        assert [r.get_attribute("data-segment") for r in rows] == expected
        first = rows[0]
        link = first.find_element(By.CSS_SELECTOR, "a.viewer-hit").get_attribute("href")
        at = first.get_attribute("data-time")
        opened = urllib.parse.unquote(link.split("?url=", 1)[1])
        assert opened.endswith(f"segment_id={expected[0]}#when=real_time@{at}")
        calls = ViewerCalls(browser)
        browser.get(link)
        manifests = _until(calls, lambda c: c.of("GetRrdManifest"))
    finally:
        browser.quit()
    assert manifests[0].rrd_manifest.store_id.recording_id == expected[0]


def test_a_segment_page_finds_the_frames_nearest_the_one_it_shows(stack: Server,
                                                                  dashboard: Dashboard) -> None:
    dataset = stack.client().get_dataset("droid")
    browser = chromium()
    try:
        browser.get(f"{dashboard.url}/datasets/droid/segments/episode_2")
        WebDriverWait(browser, 60).until(lambda b: b.execute_script(
            "return document.getElementById('frame').dataset.time || null"))
        WebDriverWait(browser, 30).until(lambda b: not b.find_element(By.ID, "nearest-form").get_attribute(
            "hidden"))
        at = int(browser.execute_script("return document.getElementById('frame').dataset.time"))
        browser.find_element(By.CSS_SELECTOR, "#nearest-form button").click()
        rows = WebDriverWait(browser, 30).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#nearest-hits tbody tr"))
        shown = [(r.get_attribute("data-segment"), int(r.get_attribute("data-time"))) for r in rows]
    finally:
        browser.quit()
    own = pa.table(dataset.filter_segments(["episode_2"]).filter_contents([EMBEDDING_ENTITY]).reader(
        index="real_time"))
    times = own.column("real_time").cast(pa.int64()).to_pylist()
    vector = own.column(VECTOR)[max(i for i, t in enumerate(times) if t <= at)].as_py()[0]
    expected = pa.table(dataset.search_vector(vector, VECTOR, top_k=10))
    assert shown == list(zip(expected.column("rerun_segment_id").to_pylist(),
                             expected.column("real_time").cast(pa.int64()).to_pylist(), strict=True))
    assert shown[0][0] == "episode_2"
