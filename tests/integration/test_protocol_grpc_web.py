"""gRPC-web on strata's endpoint, what Rerun's web viewer speaks: the same answers as over gRPC,
binary and base64 (``grpc-web-text``), errors in the trailers with gRPC's status, the browser's
CORS preflight, ``WatchEvents`` live over one response, and Rerun's web viewer in Chromium
listing the catalog and opening a segment through it."""

from __future__ import annotations

import base64
import os
import re
import struct
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
import rerun as rr
from google.protobuf.message import Message
from selenium.webdriver.support.ui import WebDriverWait

import sdk
from browser import chromium
from dashboard.viewer import web_viewer
from endpoints import web_endpoint
from protocol import descriptors
from stack import Server
from stack.droid import write_episode

pytestmark = pytest.mark.store_agnostic


@pytest.fixture(scope="module")
def urls(server: Server) -> Iterator[tuple[str, str]]:
    """The endpoint's gRPC URL and its gRPC-web base URL (``http://HOST:PORT``)."""
    with web_endpoint(server, writes=True) as (url, web_url):
        assert web_url.startswith("rerun+http://127.0.0.1:")
        yield url, web_url.removeprefix("rerun+")


def _request(method: str, **fields: Any) -> Message:
    found = descriptors.service().methods_by_name[method]
    return descriptors.message_class(found.input_type.full_name)(**fields)


def _decode(method: str, data: bytes) -> Message:
    found = descriptors.service().methods_by_name[method]
    return descriptors.message_class(found.output_type.full_name).FromString(data)


def _frames(body: bytes) -> tuple[list[bytes], dict[str, str]]:
    """The messages of a gRPC-web answer and its trailers (a frame not whole yet left out)."""
    messages, trailers = [], {}
    while len(body) >= 5 and len(body) >= 5 + struct.unpack_from(">I", body, 1)[0]:
        flag, length = struct.unpack_from(">BI", body)
        data, body = body[5:5 + length], body[5 + length:]
        if flag & 0x80:
            for line in data.decode().strip().split("\r\n"):
                name, _, value = line.partition(":")
                trailers[name.strip()] = urllib.parse.unquote(value.strip())
        else:
            messages.append(data)
    return messages, trailers


def _web_call(base: str, method: str, request: Message, *, text: bool = False,
              headers: dict[str, str] | None = None) -> tuple[list[Message], dict[str, str]]:
    body = struct.pack(">BI", 0, request.ByteSize()) + request.SerializeToString()
    kind = "application/grpc-web-text" if text else "application/grpc-web+proto"
    answer = requests.post(f"{base}/{descriptors.SERVICE}/{method}",
                           data=base64.b64encode(body) if text else body, timeout=60,
                           headers={"content-type": kind, "x-grpc-web": "1", **(headers or {})})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "*"
    # In grpc-web-text each piece sent may be encoded on its own, padding and all.
    raw = (b"".join(base64.b64decode(piece) for piece in re.findall(rb"[A-Za-z0-9+/]+=*", answer.content))
           if text else answer.content)
    messages, trailers = _frames(raw)
    return [_decode(method, data) for data in messages], trailers


def _grpc_call(url: str, method: str, request: Message, metadata: tuple = ()) -> Message:
    with grpc.insecure_channel(url.removeprefix("rerun+http://")) as channel:
        call = channel.unary_unary(f"/{descriptors.SERVICE}/{method}",
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=lambda data: _decode(method, data))
        return call(request, metadata=metadata, timeout=60)


@pytest.mark.parametrize("text", [False, True])
def test_a_call_over_grpc_web_answers_what_grpc_answers(client: sdk.CatalogClient, urls, text: bool) -> None:
    url, base = urls
    client.create_dataset(f"web-{os.urandom(3).hex()}")
    request = _request("FindEntries")
    messages, trailers = _web_call(base, "FindEntries", request, text=text)
    assert trailers["grpc-status"] == "0"
    assert len(messages) == 1 and len(messages[0].entries) > 0
    assert messages[0] == _grpc_call(url, "FindEntries", request)


def test_an_error_is_grpc_s_status_in_the_trailers(urls) -> None:
    url, base = urls
    request = _request("ReadDatasetEntry")
    headers = {"x-rerun-entry-id": "0" * 32}
    messages, trailers = _web_call(base, "ReadDatasetEntry", request, headers=headers)
    with pytest.raises(grpc.RpcError) as raised:
        _grpc_call(url, "ReadDatasetEntry", request, metadata=tuple(headers.items()))
    assert messages == []
    assert trailers["grpc-status"] == str(raised.value.code().value[0])
    assert trailers["grpc-message"] == raised.value.details()


def test_a_stream_of_requests_is_refused_with_a_reason(urls) -> None:
    _, base = urls
    messages, trailers = _web_call(base, "WriteTable", _request("WriteTable"))
    assert messages == []
    assert trailers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])
    assert "stream of requests" in trailers["grpc-message"]


def test_a_browser_s_preflight_is_allowed(urls) -> None:
    _, base = urls
    answer = requests.options(f"{base}/{descriptors.SERVICE}/FindEntries", timeout=30, headers={
        "origin": "http://viewer.example", "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-grpc-web,x-rerun-entry-id"})
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == "*"
    assert "POST" in answer.headers["access-control-allow-methods"]


def test_watch_events_streams_an_entry_created_after_it_starts(client: sdk.CatalogClient, urls) -> None:
    _, base = urls
    request = _request("WatchEvents")
    body = struct.pack(">BI", 0, request.ByteSize()) + request.SerializeToString()
    name = f"watched-{os.urandom(3).hex()}"
    with requests.post(f"{base}/{descriptors.SERVICE}/WatchEvents", data=body, stream=True, timeout=60,
                       headers={"content-type": "application/grpc-web+proto"}) as answer:
        assert answer.status_code == 200
        timer = threading.Timer(2.0, lambda: client.create_dataset(name))
        timer.start()
        received = b""
        try:
            for piece in answer.iter_content(chunk_size=None):
                received += piece
                if _frames(received)[0]:  # a whole event
                    break
        finally:
            timer.cancel()
    [event] = [_decode("WatchEvents", data) for data in _frames(received)[0]]
    [entries], _ = _web_call(base, "FindEntries", _request("FindEntries"))
    [created] = [entry for entry in entries.entries if entry.name == name]
    assert event.entry_created.id == created.id


def test_rerun_s_web_viewer_opens_a_segment_through_grpc_web(client: sdk.CatalogClient, urls,
                                                             tmp_path: Path) -> None:
    url, base = urls
    dataset = client.create_dataset(f"viewed-{os.urandom(3).hex()}")
    write_episode(tmp_path / "ep.rrd", "viewed_episode", 0, steps=30)
    dataset.register([(tmp_path / "ep.rrd").as_uri()]).wait()
    segment = rr.catalog.CatalogClient(url).get_dataset(dataset.name).segment_url("viewed_episode")
    on_web = segment.replace(url, f"rerun+{base}", 1)
    browser = chromium()
    try:
        browser.get(f"http://127.0.0.1:{web_viewer(0)}/?url={urllib.parse.quote(on_web, safe='')}")
        # The bytes of the viewer's calls, by method, as the browser received them: answers, not
        # errors (a call that fails is its trailers alone, some tens of bytes), for the segment's
        # manifest and then its chunks. The status is not read: a stream the viewer stops reading
        # once it has its message (as it may the manifest's) is recorded with status 0.
        received = WebDriverWait(browser, 120, poll_frequency=0.5).until(lambda b: b.execute_script(
            "const bytes = {};"
            "for (const e of performance.getEntriesByType('resource')) {"
            "  if (!e.name.startsWith(arguments[0]) || !e.responseEnd) continue;"
            "  const method = e.name.split('/').pop();"
            "  bytes[method] = (bytes[method] || 0) + e.encodedBodySize;"
            "}"
            "return bytes.GetRrdManifest > 1000 && bytes.FetchChunks > 10000 ? bytes : null",
            f"{base}/{descriptors.SERVICE}/"))
    finally:
        browser.quit()
    assert {"WhoAmI", "GetRrdManifest", "FetchChunks"} <= set(received)
