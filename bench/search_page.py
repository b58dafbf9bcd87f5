"""``python -m bench.search_page``: the live page's search in headless Chromium on 20 generated
DROID-like episodes with their embeddings layers: the time from the search button to the hits
shown (median of --runs), and with --screenshots DIR the page's search and Rerun's web viewer
opened from its first hit (``search-page.png``, ``search-viewer.png``, as the docs show them).
Nothing is asserted."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from dashboard import Dashboard
from stack import Server
from stack.droid import EMBEDDING_ENTITY, NARRATION_ENTITY, write_embeddings, write_episode

TEXT = f"{NARRATION_ENTITY}:TextDocument:text"
VECTOR = f"{EMBEDDING_ENTITY}:embedding"
EPISODES = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--words", default="red cup")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--screenshots", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    from tests.browser import chromium

    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        paths = []
        for n in range(EPISODES):
            paths.append(work / f"episode_{n:02d}.rrd")
            write_episode(paths[-1], f"episode_{n:02d}", n, steps=60)
            write_embeddings(work / f"emb_{n:02d}.rrd", f"episode_{n:02d}", n, steps=60)
        with Server(work / "stack", protocol_port=0, protocol_web_port=0,
                    datasets={"droid": paths}) as server:
            dataset = server.client().get_dataset("droid")
            dataset.register([(work / f"emb_{n:02d}.rrd").as_uri() for n in range(EPISODES)],
                             layer_name="embeddings").wait()
            dataset.create_fts_index(column=TEXT, time_index="real_time", store_position=True)
            dataset.create_vector_index(column=VECTOR, time_index="real_time", distance_metric="Cosine")
            with Dashboard(server.store, bootstrap_servers=server.bootstrap_servers, port=0, viewer_port=0,
                           catalog_url=server.protocol_web_url).start() as dashboard:
                browser = chromium()
                try:
                    browser.get(f"{dashboard.url}/datasets/droid")
                    WebDriverWait(browser, 60).until(
                        lambda b: not b.find_element(By.ID, "search-section").get_attribute("hidden"))
                    browser.find_element(By.ID, "search-words").send_keys(args.words)
                    shown = []
                    for _ in range(args.runs):
                        started = time.perf_counter()
                        browser.execute_script("performance.clearMarks('search-shown')")
                        browser.find_element(By.CSS_SELECTOR, "#search-form button").click()
                        WebDriverWait(browser, 60).until(lambda b: b.execute_script(
                            "return performance.getEntriesByName('search-shown').length"))
                        shown.append((time.perf_counter() - started) * 1000)
                    rows = browser.find_elements(By.CSS_SELECTOR, "#search-hits tbody tr")
                    print(f"{len(rows)} hits for {args.words!r}; search to hits shown, median of "
                          f"{args.runs}: {statistics.median(shown):.0f} ms")
                    if args.screenshots is not None:
                        args.screenshots.mkdir(parents=True, exist_ok=True)
                        browser.execute_script("document.getElementById('search-section').scrollIntoView()")
                        browser.save_screenshot(str(args.screenshots / "search-page.png"))
                        hit = rows[0].find_element(By.CSS_SELECTOR, "a.viewer-hit")
                        link = str(hit.get_attribute("href"))
                        browser.get(link)
                        time.sleep(20)  # the viewer reads the segment, then draws it
                        browser.save_screenshot(str(args.screenshots / "search-viewer.png"))
                        print(f"screenshots in {args.screenshots}; the viewer opened {link}")
                finally:
                    browser.quit()


if __name__ == "__main__":
    main()
