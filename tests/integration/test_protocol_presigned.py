"""Direct URLs of ``s3://`` layers on a real S3-compatible server (S3Proxy): strata's endpoint
hands out the objects' presigned URLs, and Rerun's unmodified client reads the chunks from the
object store itself, neither through the endpoint's HTTP server nor through ``FetchChunks``. The
``ETag`` it is given is the object store's, so an object replaced after its URL was handed out is
refused by the object store; an object already replaced when a URL would be made gets none.
Without presigning, the endpoint serves the same objects itself."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import rerun as rr

import protocol
import sdk
from commands import Catalog
from protocol import direct
from protocol.chunk_keys import LayerRef
from stack import Server
from stack.droid import write_episode

pytestmark = pytest.mark.store_agnostic

STEPS = 30


@pytest.fixture
def remote(server: Server, client: sdk.CatalogClient, s3, tmp_path: Path) -> tuple[str, str, Path]:
    """A dataset of one episode registered from the object store: its name, segment id and the
    local copy of the file."""
    tag = os.urandom(3).hex()
    path = tmp_path / "remote.rrd"
    write_episode(path, f"remote_{tag}", 7, steps=STEPS)
    url = s3.put(f"presigned-{tag}", "droid/remote.rrd", path)
    name = f"presigned-{tag}"
    client.create_dataset(name).register([url], object_store_config=s3.config()).wait()
    return name, f"remote_{tag}", path


@pytest.fixture
def catalog(server: Server, s3) -> Iterator[Catalog]:
    """The shared stack's catalog, reading the object store, for an endpoint to serve."""
    reader = Catalog(server.bootstrap_servers, server.store, object_store_config=s3.config())
    try:
        yield reader
    finally:
        reader.close()


def _read(url: str, name: str) -> int:
    client = rr.catalog.CatalogClient(url)
    return client.get_dataset(name).reader(index="real_time").to_arrow_table().num_rows


def test_rerun_s_client_reads_an_s3_layer_from_the_object_store_by_presigned_url(
        fetch_chunks_calls, catalog, remote, s3) -> None:
    name, segment_id, path = remote
    with protocol.serve(catalog, port=0) as served:
        assert _read(served.url, name) == STEPS
        assert served.direct is not None and served.direct.ranges_served == 0  # not through the endpoint
        assert not fetch_chunks_calls  # nor through gRPC
        layer = LayerRef(f"s3://{name}/droid/remote.rrd", segment_id, "base", path.stat().st_size)
        url, tag = served.direct.locate(layer, served.direct.period())
    assert url.startswith(f"{s3.endpoint_url}/{name}/droid/remote.rrd?")
    query = parse_qs(urlparse(url).query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Signature"]
    assert direct.LIFETIME_SECS // 2 <= int(query["X-Amz-Expires"][0]) <= direct.LIFETIME_SECS
    assert tag.startswith('"') and tag != direct.etag(layer)  # the object store's own


def test_an_object_replaced_after_its_url_was_handed_out_is_refused_by_the_object_store(
        catalog, remote, s3, tmp_path: Path) -> None:
    name, segment_id, path = remote
    with protocol.serve(catalog, port=0) as served:
        client = rr.catalog.CatalogClient(served.url)  # kept: its reads need it alive
        dataset = client.get_dataset(name)
        assert dataset.reader(index="real_time").to_arrow_table().num_rows == STEPS  # URLs handed out
        replacement = tmp_path / "replacement.rrd"
        write_episode(replacement, segment_id, 8, steps=STEPS)  # another episode, the same id
        s3.put(name, "droid/remote.rrd", replacement)
        # The endpoint keeps the layer's URL and ETag for their period; the object store refuses
        # the ranges of the replaced object (412), which Rerun's client reports as a changed source.
        with pytest.raises(Exception, match="the source object changed; re-register it"):
            dataset.reader(index="real_time").to_arrow_table()


def test_an_object_that_is_not_the_size_registered_gets_no_url(catalog, remote, s3, tmp_path: Path) -> None:
    name, segment_id, path = remote
    s3.put(name, "droid/remote.rrd", path)  # the same bytes again: still the file registered
    with protocol.serve(catalog, port=0) as served:
        assert _read(served.url, name) == STEPS
    longer = tmp_path / "longer.rrd"
    write_episode(longer, segment_id, 7, steps=STEPS + 10)
    assert longer.stat().st_size != path.stat().st_size
    s3.put(name, "droid/remote.rrd", longer)
    with protocol.serve(catalog, port=0) as served:  # a new endpoint: no URL kept
        with pytest.raises(Exception, match="were registered"):
            _read(served.url, name)


def test_without_presigning_the_endpoint_serves_s3_layers_itself(
        fetch_chunks_calls, catalog, remote, s3) -> None:
    name, _, _ = remote
    with protocol.serve(catalog, port=0, presigned_urls=False) as served:
        assert _read(served.url, name) == STEPS
        assert served.direct is not None and served.direct.ranges_served > 0
        assert not fetch_chunks_calls
