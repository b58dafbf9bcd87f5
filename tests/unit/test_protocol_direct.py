"""Direct URLs on a store folded in process: Rerun's client, asking ``FindChunks`` for signed
direct URLs as it does, fetches chunk bytes itself from strata's HTTP server of layers' files with
``Range`` requests, and reads the same rows as through ``FetchChunks``; the server answers only
the files it handed out URLs of, exactly the range asked, and refuses a file that changed."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import rerun as rr

import protocol
from protocol import descriptors, direct
from protocol.chunk_keys import ChunkKeys, LayerRef
from protocol.dataframes import decode
from recordings import ObjectStoreConfig, chunk_index

from .conftest import register, rpc
from .in_process import InProcessStack
from .test_protocol_reads import header
from .test_protocol_reads import registered as registered  # a fixture

SIGNED = descriptors.enum_value("rerun.cloud.v1alpha1.DirectUrlMode", "DIRECT_URL_MODE_SIGNED")


@pytest.fixture
def through_grpc(stack: InProcessStack) -> Iterator[protocol.ProtocolServer]:
    """An endpoint on the same catalog without direct URLs."""
    with protocol.serve(stack.catalog, port=0, direct_urls=False) as server:
        yield server


def candidates(served: protocol.ProtocolServer, stack: InProcessStack, **fields: Any) -> pa.Table:
    request = descriptors.cloud("FindChunksRequest", **fields)
    found = rpc(served, "FindChunks", request, metadata=header(stack))
    return pa.concat_tables(decode(part.data) for part in found)


def get(url: str, **headers: str) -> tuple[int, bytes, Message]:
    """The status, body and headers (their names in any case) of a GET of ``url``."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(), answer.headers
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read(), refused.headers


def test_rerun_s_client_reads_by_direct_url_what_it_reads_through_fetch_chunks(
        fetch_chunks_calls, served, through_grpc, stack, registered) -> None:
    by_url = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    proxied = rr.catalog.CatalogClient(through_grpc.url).get_dataset("droid")
    reads = {
        "every index": lambda d: d.reader(index=None),
        "real_time": lambda d: d.reader(index="real_time"),
        "frame_nr, two layers": lambda d: d.reader(index="frame_nr"),
        "a segment's arm": lambda d: d.filter_segments(["ep_1"]).filter_contents(["/arm/**"]).reader(
            index="step"),
        "latest at": lambda d: d.filter_contents(["/arm/**", "/notes"]).reader(index="real_time",
                                                                             fill_latest_at=True),
    }
    for what, read in reads.items():
        before = len(fetch_chunks_calls)
        ours = read(by_url).to_arrow_table()
        assert len(fetch_chunks_calls) == before, what  # every chunk fetched by URL
        theirs = read(proxied).to_arrow_table()
        assert len(fetch_chunks_calls) > before, what  # the other endpoint's chunks through gRPC
        keys = [(c, "ascending") for c in ("rerun_segment_id", "real_time", "step", "frame_nr", "log_time")
                if c in ours.column_names]
        assert ours.num_rows > 0 and ours.sort_by(keys).equals(theirs.sort_by(keys)), what
    assert served.direct is not None and served.direct.ranges_served > 0


def test_a_query_gets_direct_urls_only_when_it_asks(served, stack, registered) -> None:
    plain = candidates(served, stack)
    assert plain.column("rerun_layer_direct_url").null_count == plain.num_rows > 0
    asked = candidates(served, stack, direct_url_mode=SIGNED)
    urls = asked.column("rerun_layer_direct_url").to_pylist()
    assert all(url.startswith(f"http://127.0.0.1:{served.direct.port}/layers/") for url in urls)
    assert len(set(urls)) == 3  # one per layer
    assert asked.column("rerun_layer_direct_url_expires_at").null_count == asked.num_rows
    index = chunk_index(registered["ep_1"])
    offsets = dict(zip(index.column("chunk_id").to_pylist(), index.column("chunk_byte_offset").to_pylist(),
                       strict=True))
    sizes = dict(zip(index.column("chunk_id").to_pylist(), index.column("chunk_byte_size").to_pylist(),
                     strict=True))
    rows = asked.filter(pa.compute.equal(asked.column("chunk_segment_id"), "ep_1")).to_pylist()
    assert len(rows) == index.num_rows
    for row in rows:
        key = descriptors.message_class("rerun.cloud.v1alpha1.ChunkKey").FromString(row["chunk_key"])
        where = descriptors.message_class("rerun.cloud.v1alpha1.RrdChunkLocation").FromString(key.location)
        assert where.url == row["rerun_layer_direct_url"]
        # The message's 16-byte header first, as Rerun's client decodes it.
        assert where.offset == offsets[row["chunk_id"]] - 16
        assert where.length == sizes[row["chunk_id"]] + 16
        assert key.etag and key.etag.startswith('"')


def test_the_http_server_answers_exactly_the_range_asked_of_the_files_it_handed_out(
        served, stack, registered, monkeypatch) -> None:
    asked = candidates(served, stack, direct_url_mode=SIGNED)
    ep_1 = asked.filter(pa.compute.equal(asked.column("chunk_segment_id"), "ep_1"))
    url = ep_1.column("rerun_layer_direct_url")[0].as_py()
    data = Path(registered["ep_1"][len("file://"):]).read_bytes()
    status, body, headers = get(url, Range="bytes=10-99")
    assert (status, body) == (206, data[10:100])
    assert headers["Content-Range"] == f"bytes 10-99/{len(data)}"
    tag = headers["ETag"]
    assert get(url, Range="bytes=0-3", **{"If-Match": tag})[:2] == (206, data[:4])
    assert get(url, Range=f"bytes={len(data) - 2}-")[:2] == (206, data[-2:])
    status, body, _ = get(url, Range="bytes=0-3", **{"If-Match": '"other"'})
    assert status == 412 and tag.encode() in body
    assert get(url)[0] == 416  # a whole file is not what this server is for
    assert get(url, Range=f"bytes={len(data)}-{len(data) + 5}")[0] == 416
    monkeypatch.setattr(direct, "MAX_RANGE_BYTES", 50)
    status, body, _ = get(url, Range="bytes=0-99")
    assert status == 416 and b"at most 50 bytes" in body
    forged = url[:-4] + ("AAAA" if not url.endswith("AAAA") else "BBBB")
    status, body, _ = get(forged, Range="bytes=0-3")
    assert status == 403 and b"not a layer this server handed out" in body
    base = f"http://127.0.0.1:{served.direct.port}"
    assert get(f"{base}/layers/..%2F..%2Fetc%2Fpasswd", Range="bytes=0-3")[0] == 403
    assert get(f"{base}/etc/passwd", Range="bytes=0-3")[0] == 404
    layer = LayerRef(registered["ep_1"], "ep_1", "base", len(data))
    assert get(served.direct.url(layer, served.direct.period()), Range="bytes=0-3")[:2] == (206, data[:4])
    status, body, _ = get(served.direct.url(layer, served.direct.period() - 2), Range="bytes=0-3")
    assert status == 403 and b"expired" in body


def test_a_hundred_connections_opened_at_once_all_wait_to_be_served() -> None:
    # Rerun's client opens a connection for each range it fetches at once, a hundred or more in a
    # scan. Those the server has not accepted yet wait in the listening socket's queue; a short
    # queue would drop their handshakes, which TCP retries only after 1, 3, 7, 15, 31 s.
    server = direct.DirectServer(ChunkKeys(), ObjectStoreConfig(), "127.0.0.1")
    busy = threading.Event()
    server.server.call_soon(lambda: (busy.set(), time.sleep(3)))  # the event loop accepts nothing
    busy.wait(10)
    opened = []
    try:
        for _ in range(100):
            opened.append(socket.create_connection(("127.0.0.1", server.port), timeout=0.5))
    finally:
        for connection in opened:
            connection.close()
        server.stop()
    assert len(opened) == 100


def test_a_file_changed_or_gone_since_registration_is_refused_by_url(served, stack, registered) -> None:
    asked = candidates(served, stack, direct_url_mode=SIGNED)
    base = asked.filter(pa.compute.equal(asked.column("rerun_segment_layer"), "base"))
    urls = {row["chunk_segment_id"]: row["rerun_layer_direct_url"] for row in base.to_pylist()}
    changed = Path(registered["ep_1"][len("file://"):])
    changed.write_bytes(changed.read_bytes() + b"\0")
    status, body, _ = get(urls["ep_1"], Range="bytes=0-3")
    assert status == 412 and b'segment "ep_1", layer "base"' in body and b"were registered" in body
    Path(registered["ep_0"][len("file://"):]).unlink()
    status, body, _ = get(urls["ep_0"], Range="bytes=0-3")
    assert status == 404 and b"no longer exists" in body
    client = rr.catalog.CatalogClient(served.url)  # kept: its reads need it alive
    reader = client.get_dataset("droid").filter_segments(["ep_1"])
    # Rerun's client reads the 412 as a file changed since registration, and does not retry it.
    with pytest.raises(Exception, match="the source object changed; re-register it"):
        reader.reader(index="step").to_arrow_table()


def test_a_layer_whose_file_holds_another_recording_id_is_read_through_fetch_chunks(
        fetch_chunks_calls, served, stack, registered) -> None:
    # A pipeline may register a file under a segment id of its own: Rerun's client takes a chunk's
    # segment from the chunk it fetches by URL, so such a layer gets no direct URL.
    size = Path(registered["ep_1"][len("file://"):]).stat().st_size
    stack.apply([register(stack.droid, "renamed", url=registered["ep_1"], size_bytes=size)])
    asked = candidates(served, stack, direct_url_mode=SIGNED)
    renamed = asked.filter(pa.compute.equal(asked.column("chunk_segment_id"), "renamed"))
    assert renamed.num_rows > 0 and renamed.column("rerun_layer_direct_url").null_count == renamed.num_rows
    client = rr.catalog.CatalogClient(served.url)  # kept: its reads need it alive
    table = client.get_dataset("droid").filter_segments(["renamed"]).reader(index="step").to_arrow_table()
    assert set(table.column("rerun_segment_id").to_pylist()) == {"renamed"} and table.num_rows == 6
    assert fetch_chunks_calls
