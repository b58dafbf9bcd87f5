"""Direct URLs: registered layers' files served over HTTP, so that Rerun's client fetches chunk
bytes itself with ``Range`` requests instead of through ``FetchChunks``.

A query that asks for direct URLs (``FindChunks`` with ``direct_url_mode`` ``SIGNED`` or
``UNSIGNED``, ``QueryDataset`` with ``generate_direct_urls``) gets, for each candidate chunk of an ``.rrd``
layer, its layer's URL, ``http://HOST:PORT/layers/<token>``, where the token names the
registered file and an expiry (an hour at most, half an hour at least) and is signed with the
server's secret (``ChunkKeys.token``): nothing but a registered layer's file can be read, no
header is needed (Rerun's client sends none), and a URL kept past its expiry is refused.
An ``s3://`` layer's URL is the object's own, presigned for as long (``recordings.presigned``):
the client reads the object store directly. The object is checked to be the size registered
when its URL is made, and its ``ETag`` is then the object store's, so that a replaced object is
refused by the object store itself. Without presigning (``presign=False``, for clients that
cannot reach the object store), ``s3://`` layers are served as local files are, read by the
endpoint from the object store. The chunk's ``chunk_key`` is Rerun's own ``ChunkKey``: the URL,
the chunk's byte range with the 16-byte message header before it (what Rerun's client decodes),
and the file's ``ETag``, which the client sends back as ``If-Match``.

``DirectServer`` answers ``GET`` (and ``HEAD``) of one byte range of such a file: ``206`` with
exactly that range, ``412`` if the file is no longer the one registered (its size changed) or
``If-Match`` names another ``ETag``, ``403`` for a token this server did not sign or that
expired, ``404`` for a file gone, ``416`` for a range outside the file or larger than
``MAX_RANGE_BYTES``, ``502`` for an object store that fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import socket
import ssl
import time
from collections.abc import Callable, Sequence

import recordings
from protocol.asgi_server import App, AsgiServer, Receive, Scope, Send
from protocol.chunk_keys import ChunkKeys, InvalidChunkKeyError, LayerRef
from protocol.descriptors import cloud, common, enum_value
from protocol.layer_files import changed, read_ranges

PATH = "/layers/"
"""Where layers' files are served: ``PATH`` and a layer's token."""
MESSAGE_HEADER_BYTES = 16
"""The header before each message of an ``.rrd`` (kind and length), which Rerun's client reads
with the message when it fetches a chunk by URL."""
MAX_RANGE_BYTES = 64 << 20
"""The most one request reads (Rerun's client merges neighbouring chunks into ranges of up to
16 MB): a larger one is refused, so that no request holds a whole file in memory."""
INLINE_READ_BYTES = 1 << 20
"""A local file's range up to this size is read on the server's event loop, a larger one in a thread."""
LIFETIME_SECS = 3600
"""How long a direct URL is good for, at most: a client that holds one longer queries again."""
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_RRD = enum_value("rerun.cloud.v1alpha1.DataSourceKind", "DATA_SOURCE_KIND_RRD")


def etag(layer: LayerRef) -> str:
    """The ``ETag`` of a registered layer's file: it names the file and its registered size."""
    digest = hashlib.sha256(f"{layer.storage_url}\n{layer.size_bytes}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def direct_keys(url: str, tag: str, chunk_ids: Sequence[bytes], offsets: Sequence[int],
                sizes: Sequence[int]) -> list[bytes]:
    """Rerun's ``ChunkKey`` of each chunk of a layer (its id, the offset and size of its message
    in the file) fetched from ``url``, whose ``ETag`` is ``tag``: the range covers the message's
    header too."""
    made = []
    for chunk_id, offset, size in zip(chunk_ids, offsets, sizes, strict=True):
        location = cloud("RrdChunkLocation", url=url, offset=offset - MESSAGE_HEADER_BYTES,
                         length=size + MESSAGE_HEADER_BYTES)
        tuid = common("Tuid", time_ns=int.from_bytes(chunk_id[:8], "big"),
                      inc=int.from_bytes(chunk_id[8:], "big"))
        made.append(cloud("ChunkKey", chunk_id=tuid, data_source_kind=_RRD,
                          location=location.SerializeToString(), etag=tag).SerializeToString())
    return made


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _range(headers: dict[bytes, bytes], size: int) -> tuple[int, int]:
    """The first and last byte of the one range ``headers`` ask for in a file of ``size`` bytes."""
    found = _RANGE.fullmatch(headers.get(b"range", b"").decode("latin-1").strip())
    if found is None:
        raise _Refused(416, "send one byte range: Range: bytes=FIRST-LAST")
    first = int(found.group(1))
    last = min(int(found.group(2)) if found.group(2) else size - 1, size - 1)
    if first > last:
        raise _Refused(416, f"the range starts past the file's end ({size} bytes)")
    if last - first + 1 > MAX_RANGE_BYTES:
        raise _Refused(416, f"ask for at most {MAX_RANGE_BYTES} bytes a request")
    return first, last


def _ranges_app(keys: ChunkKeys, objects: recordings.ObjectStoreConfig, served: Callable[[], None]) -> App:
    """The ASGI app of layers' files: a local file's range of up to ``INLINE_READ_BYTES`` is read
    on the event loop (from the page cache, faster than handing it to a thread), a larger one and
    an object's in a thread, so that one large read does not hold up the other connections."""

    async def answer(scope: Scope) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        path = scope["raw_path"].decode("latin-1")
        if not path.startswith(PATH):
            raise _Refused(404, f"not found: layers' files are under {PATH}")
        try:
            layer = keys.layer(path[len(PATH):], now=time.time())
        except InvalidChunkKeyError as exc:
            raise _Refused(403, str(exc)) from None
        tag = etag(layer)
        headers = dict(scope["headers"])
        wanted = headers.get(b"if-match")
        if wanted is not None and wanted.decode("latin-1").strip() not in (tag, "*"):
            raise _Refused(412, f"the file's ETag is {tag}, not {wanted.decode('latin-1')}")
        first, last = _range(headers, layer.size_bytes)
        length = last - first + 1
        try:
            if recordings.is_object_url(layer.storage_url) or length > INLINE_READ_BYTES:
                [data] = await asyncio.to_thread(read_ranges, layer, [(first, length)], objects)
            else:
                [data] = read_ranges(layer, [(first, length)], objects)
        except recordings.RecordingChangedError as exc:
            raise _Refused(412, str(exc)) from None
        except recordings.NotFoundError as exc:
            raise _Refused(404, str(exc)) from None
        except recordings.ObjectStoreError as exc:
            raise _Refused(502, str(exc)) from None
        if len(data) != length:
            raise _Refused(412, f"{layer.storage_url} ends before byte {last}: it changed since it was "
                                "registered")
        served()
        return 206, [(b"content-type", b"application/octet-stream"),
                     (b"content-range", f"bytes {first}-{last}/{layer.size_bytes}".encode()),
                     (b"etag", tag.encode())], data

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            status, headers, body = await answer(scope)
        except _Refused as refused:
            status, headers = refused.status, [(b"content-type", b"text/plain; charset=utf-8")]
            body = f"{refused}\n".encode()
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


class DirectServer:
    """The HTTP server of direct URLs, on ``host`` at a free port, in a background thread; its
    tokens are ``keys``' and its object store reads use ``objects``. A URL is good for at least
    ``lifetime_secs / 2`` after it is handed out, and at most ``lifetime_secs``. With ``tls``, a
    server context, it serves HTTPS. With ``presign``, ``s3://`` layers' URLs are presigned
    URLs of the object store. ``stop()`` ends it."""

    def __init__(self, keys: ChunkKeys, objects: recordings.ObjectStoreConfig, host: str, *,
                 lifetime_secs: int = LIFETIME_SECS, tls: ssl.SSLContext | None = None,
                 presign: bool = True) -> None:
        self.ranges_served = 0
        """Ranges answered (for tests and measurements)."""
        self.server = AsgiServer(_ranges_app(keys, objects, self._served), host, 0, name="strata-direct-urls",
                                 tls=tls)
        self.port = self.server.port
        self._keys = keys
        self._objects = objects
        self._presign = presign
        self._half_life = max(1, lifetime_secs // 2)
        advertised = socket.gethostname() if host in ("", "0.0.0.0", "::") else host  # noqa: S104
        scheme = "https" if tls else "http"
        self.base = f"{scheme}://{f'[{advertised}]' if ':' in advertised else advertised}:{self.port}{PATH}"

    def _served(self) -> None:  # on the server's one thread
        self.ranges_served += 1

    def period(self) -> int:
        """The period the URLs handed out now belong to: the URLs of one period are the same (so a
        layer's rows can be kept for it), and expire a period after it ends."""
        return int(time.time()) // self._half_life

    def url(self, layer: LayerRef, period: int) -> str:
        """The URL of ``layer``'s file on this server for ``period``."""
        return self.base + self._keys.token(layer, (period + 2) * self._half_life)

    def locate(self, layer: LayerRef, period: int) -> tuple[str, str]:
        """The direct URL of ``layer``'s file for ``period`` and its ``ETag``: for an ``s3://``
        layer when presigning, the object's presigned URL and the object store's ``ETag``, else
        ``url()`` and ``etag()``. Raises ``RecordingChangedError`` for an object that is not the
        size registered, what ``Presigner.presign`` raises for one that cannot be read."""
        if not (self._presign and recordings.is_object_url(layer.storage_url)):
            return self.url(layer, period), etag(layer)
        expires_at = (period + 2) * self._half_life
        signed = recordings.presigner(self._objects).presign(layer.storage_url, expires_at - int(time.time()))
        if signed.size != layer.size_bytes:
            raise changed(layer, signed.size)
        return signed.url, signed.etag

    def stop(self) -> None:
        self.server.stop()
