"""``python -m bench.viewer``: how soon Rerun's web viewer, in Debian's chromium, shows a large
dataset's segment table, on Rerun's server and on strata's catalog in the same run.

One dataset of --segments small recordings, one file per segment (``bench.recordings``),
registered on Rerun's server (which serves gRPC-web on its own port) and on a stack serving
gRPC-web (``strata up``'s endpoint). The web viewer rerun-sdk ships, served as the dashboard
serves it, is opened fresh --runs times on ``<catalog>/entry/<dataset id>``; the page's own
resource timings (``performance.getEntriesByType("resource")``) give, for each open, when the
viewer's first call to the catalog started and when the dataset's segment table had arrived (the
end of its last ``ScanSegmentTable`` response before it showed the table), from navigation
(which includes loading the viewer itself) and from that first call. A run counts once the
viewer has made no new catalog call for --quiet-ms; the medians are printed. Nothing is asserted.
The viewer draws with WebGPU on chromium's software Vulkan, or with --webgl as it does in a
browser without WebGPU: it makes its calls a frame apart, so the frame's time counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import sdk
from bench.recordings import RecordingPool
from dashboard.viewer import web_viewer
from protocol.descriptors import SERVICE

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

REGISTER_BATCH = 10_000
CALLS = """
const calls = performance.getEntriesByType("resource").filter(e => e.name.includes(arguments[0]));
return calls.map(e => [e.name.slice(e.name.lastIndexOf("/") + 1), e.startTime, e.responseEnd]);
"""


class Opened(TypedDict):
    table_from_navigation_ms: float
    table_from_first_call_ms: float
    catalog_ms: float
    """The calls' own time: from each call's start to its response's end, summed."""
    calls: int


def open_once(browser: WebDriver, page: str, quiet_ms: float, timeout_secs: float = 120) -> Opened:
    """Open ``page`` (the viewer on a dataset) fresh and time its segment table. What the viewer
    keeps in the browser is cleared first: it would otherwise reconnect to the catalogs of earlier
    opens (another server's, shut down) while it opens this one."""
    browser.get("about:blank")
    origin = urllib.parse.urlsplit(page)
    browser.execute_cdp_cmd("Storage.clearDataForOrigin", {"origin": f"{origin.scheme}://{origin.netloc}",
                                                           "storageTypes": "local_storage,indexeddb"})
    browser.get(page)
    deadline = time.monotonic() + timeout_secs
    seen, settled_at = -1, time.monotonic()
    while True:
        calls = browser.execute_script(CALLS, f"/{SERVICE}/")
        tables = [end for method, _, end in calls if method == "ScanSegmentTable" and end > 0]
        if len(calls) != seen:
            seen, settled_at = len(calls), time.monotonic()
        elif tables and (time.monotonic() - settled_at) * 1000 >= quiet_ms:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the viewer showed no segment table in {timeout_secs} s: {page}")
        time.sleep(0.05)
    first = min(start for _, start, _ in calls)
    table = max(tables)
    before = [(start, end) for _, start, end in calls if 0 < end <= table]
    return {"table_from_navigation_ms": table, "table_from_first_call_ms": table - first,
            "catalog_ms": sum(end - start for start, end in before), "calls": len(before)}


def measure(browser: WebDriver, viewer_port: int, catalog: str, dataset_id: str,
            args: argparse.Namespace) -> dict[str, float]:
    """The medians of ``args.runs`` opens of the viewer on ``catalog``'s dataset, after one unmeasured."""
    entry = f"{catalog}/entry/{dataset_id}"
    page = f"http://127.0.0.1:{viewer_port}/?url={urllib.parse.quote(entry, safe='')}"
    opens = [open_once(browser, page, args.quiet_ms) for _ in range(args.runs + 1)][1:]
    browser.get("about:blank")  # the viewer's open calls end: a server waits for them to stop
    for opened in opens:
        print(f"  segment table after {opened['table_from_navigation_ms']:.0f} ms from navigation, "
              f"{opened['table_from_first_call_ms']:.0f} ms from the first call; {opened['calls']} calls "
              f"before it took {opened['catalog_ms']:.0f} ms",
              flush=True)
    return {key: statistics.median(o[key] for o in opens)
            for key in ("table_from_navigation_ms", "table_from_first_call_ms", "catalog_ms")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.viewer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=10_000,
                        help="segments of the dataset (default 10,000)")
    parser.add_argument("--runs", type=int, default=5, help="measured opens per server (default 5)")
    parser.add_argument("--quiet-ms", type=float, default=1500,
                        help="an open ends when the viewer has made no catalog call for this long "
                             "(default 1500)")
    parser.add_argument("--webgl", action="store_true",
                        help="draw with WebGL, as the viewer does where the browser has no WebGPU (default: "
                             "WebGPU on chromium's software Vulkan)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="where the recordings and the stack's state go (default: a temporary directory)")
    args = parser.parse_args(argv)
    import rerun as rr

    from tests.browser import chromium

    with tempfile.TemporaryDirectory(prefix="strata-viewer-bench-") as scratch:
        work = args.work_dir or Path(scratch)
        pool = RecordingPool(work / "recordings")
        pool.ensure("base", args.segments)
        uris = [pool.path("base", i).as_uri() for i in range(args.segments)]
        viewer_port = web_viewer(0)
        browser = chromium(webgpu=not args.webgl)
        results: dict[str, dict[str, float]] = {}
        try:
            print(f"Rerun's web viewer on a dataset of {args.segments:,} segments", flush=True)
            theirs = rr.server.Server()
            try:
                dataset = theirs.client().create_dataset("many")
                for first in range(0, len(uris), REGISTER_BATCH):
                    dataset.register(uris[first:first + REGISTER_BATCH]).wait()
                print("Rerun's server", flush=True)
                results["Rerun's server"] = measure(browser, viewer_port, theirs.url(), str(dataset.id), args)
            finally:
                theirs.shutdown()
            with sdk.Server(work / "stack", protocol_port=0, protocol_web_port=0) as server:
                dataset = server.client().create_dataset("many")
                operations = [dataset.register(uris[first:first + REGISTER_BATCH])
                              for first in range(0, len(uris), REGISTER_BATCH)]
                for operation in operations:
                    operation.wait(timeout_secs=3600)
                assert server.protocol_web_url is not None
                print("strata's catalog (strata up's gRPC-web endpoint)", flush=True)
                results["strata"] = measure(browser, viewer_port, server.protocol_web_url, dataset.id.hex,
                                            args)
        finally:
            browser.quit()
    rerun = results["Rerun's server"]
    keys = ("table_from_navigation_ms", "table_from_first_call_ms", "catalog_ms")
    print("\n| server | segment table from navigation, ms | vs Rerun's | from the viewer's first call, ms "
          "| vs Rerun's | the catalog calls' own time, ms | vs Rerun's |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, result in results.items():
        cells = [f"{result[key]:.0f} | {result[key] / rerun[key]:.2f}x" for key in keys]
        print(f"| {name} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
