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

import hashlib
import http.server
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence

import recordings
from protocol.chunk_keys import ChunkKeys, InvalidChunkKeyError, LayerRef
from protocol.descriptors import cloud, common, enum_value
from protocol.layer_files import changed, opened, read_ranges

PATH = "/layers/"
"""Where layers' files are served: ``PATH`` and a layer's token."""
MESSAGE_HEADER_BYTES = 16
"""The header before each message of an ``.rrd`` (kind and length), which Rerun's client reads
with the message when it fetches a chunk by URL."""
MAX_RANGE_BYTES = 64 << 20
"""The most one request reads (Rerun's client merges neighbouring chunks into ranges of up to
16 MB): a larger one is refused, so that no request holds a whole file in memory."""
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


def _handler(keys: ChunkKeys, objects: recordings.ObjectStoreConfig,
             served: Callable[[], None]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: a client fetches many ranges of one file

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass  # no line per request on the endpoint's output

        def _refuse(self, status: int, message: str) -> None:
            body = f"{message}\n".encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802 - the base class's name
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            if not self.path.startswith(PATH):
                return self._refuse(404, f"not found: layers' files are under {PATH}")
            try:
                layer = keys.layer(self.path[len(PATH):], now=time.time())
            except InvalidChunkKeyError as exc:
                return self._refuse(403, str(exc))
            tag = etag(layer)
            wanted = self.headers.get("If-Match")
            if wanted is not None and wanted.strip() not in (tag, "*"):
                return self._refuse(412, f"the file's ETag is {tag}, not {wanted}")
            found = _RANGE.fullmatch((self.headers.get("Range") or "").strip())
            if found is None:
                return self._refuse(416, "send one byte range: Range: bytes=FIRST-LAST")
            first = int(found.group(1))
            last = int(found.group(2)) if found.group(2) else layer.size_bytes - 1
            last = min(last, layer.size_bytes - 1)
            if first > last:
                return self._refuse(416, f"the range starts past the file's end ({layer.size_bytes} bytes)")
            if last - first + 1 > MAX_RANGE_BYTES:
                return self._refuse(416, f"ask for at most {MAX_RANGE_BYTES} bytes a request")
            length = last - first + 1
            try:
                if recordings.is_object_url(layer.storage_url):
                    [data] = read_ranges(layer, [(first, length)], objects)
                    if len(data) != length:
                        return self._refuse(412, f"{layer.storage_url} ends before byte {last}: it changed "
                                                 "since it was registered")
                    self._send_headers(layer, tag, first, last)
                    if self.command != "HEAD":
                        self.wfile.write(data)
                else:
                    with opened(layer) as descriptor:
                        self._send_headers(layer, tag, first, last)
                        self._send_file(descriptor, first, length)
            except recordings.RecordingChangedError as exc:
                return self._refuse(412, str(exc))
            except recordings.NotFoundError as exc:
                return self._refuse(404, str(exc))
            except recordings.ObjectStoreError as exc:
                return self._refuse(502, str(exc))
            return None

        def _send_headers(self, layer: LayerRef, tag: str, first: int, last: int) -> None:
            served()
            self.send_response(206)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Range", f"bytes {first}-{last}/{layer.size_bytes}")
            self.send_header("Content-Length", str(last - first + 1))
            self.send_header("ETag", tag)
            self.end_headers()

        def _send_file(self, descriptor: int, offset: int, length: int) -> None:
            """``length`` bytes of the file at ``offset``: by ``sendfile``, from the file to the
            socket without passing through Python, unless the connection is TLS."""
            if self.command == "HEAD":
                return
            if isinstance(self.connection, ssl.SSLSocket):
                self.wfile.write(os.pread(descriptor, length, offset))
                return
            end = offset + length
            while offset < end:
                sent = os.sendfile(self.connection.fileno(), descriptor, offset, end - offset)
                if sent == 0:
                    return  # the file ended: it was cut short while it was sent
                offset += sent

    return Handler


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = socket.SOMAXCONN
    """Connections waiting to be accepted. Rerun's client opens one per range it fetches at once,
    a hundred or more for a scan; with the default five the kernel drops the others' handshakes,
    and each is retried after 1, 3, 7, 15, 31 s."""


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
        self._count_lock = threading.Lock()
        self._server = _HTTPServer((host, 0), _handler(keys, objects, self._served))
        if tls is not None:  # each connection's handshake in its own thread, at its first read
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self.port = self._server.server_address[1]
        self._keys = keys
        self._objects = objects
        self._presign = presign
        self._half_life = max(1, lifetime_secs // 2)
        advertised = socket.gethostname() if host in ("", "0.0.0.0", "::") else host  # noqa: S104
        scheme = "https" if tls else "http"
        self.base = f"{scheme}://{f'[{advertised}]' if ':' in advertised else advertised}:{self.port}{PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="strata-direct-urls",
                                        daemon=True)
        self._thread.start()

    def _served(self) -> None:
        with self._count_lock:
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
        self._server.shutdown()
        self._server.server_close()
