"""Debian's chromium, driven by selenium through Debian's chromedriver (never a downloaded
browser): for the dashboard's browser tests and its page latency benchmark."""

from __future__ import annotations

import os
import shutil

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def chromium(*, width: int = 1400, height: int = 1000, network_log: bool = False,
             webgpu: bool = False) -> webdriver.Chrome:
    """A headless chromium; fails with what to install if the Debian packages are missing. With
    ``network_log``, its DevTools events are kept for ``get_log("performance")`` (the requests a
    page makes, whose bodies ``Network.getResponseBody`` then reads). With ``webgpu``, pages draw
    with WebGPU on chromium's software Vulkan (SwiftShader), as Chrome on Windows and macOS draws
    with the GPU's; without it, WebGPU is off (Debian's chromium does not enable it on Linux) and
    Rerun's viewer falls back to WebGL, several times slower per frame here."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver "
                           "(scripts/test-deps.sh does)")
    os.environ["SE_OFFLINE"] = "true"  # selenium never looks for a browser or driver to download
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    gpu = ("--enable-unsafe-webgpu",) if webgpu else ("--disable-gpu",)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", *gpu,
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    if network_log:
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    # A script runs on the page's main thread, which Rerun's viewer may hold for long stretches on
    # a loaded machine: WebDriver's default of 30 s failed a check there ("script timeout").
    browser.set_script_timeout(120)
    return browser
