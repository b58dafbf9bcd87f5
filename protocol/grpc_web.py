"""gRPC-web for Rerun's web viewer: the same RPCs as the gRPC server, answered over HTTP/1.1 to a
browser, which cannot speak gRPC itself.

A gRPC-web call is a ``POST`` of ``/<service>/<method>`` whose body is the request message in a
5-byte frame (a flag byte, 0, and the message's length, big-endian), base64-encoded when its
``Content-Type`` is ``application/grpc-web-text``. The answer is a ``200`` whose body is each
response message in such a frame, then one frame of flag ``0x80`` holding the call's status as
HTTP header lines (``grpc-status``, ``grpc-message``). ``GrpcWeb`` is the ASGI application that
runs each call with the method handlers of the gRPC server's own ``grpc.GenericRpcHandler``\\s,
in a worker thread, so every RPC behaves as it does over gRPC: its admission by token, its
catalog for its caller, its errors as statuses. A stream's responses are sent as they are made
(``WatchEvents`` keeps a viewer's list of entries live), and a stream whose browser went away
ends at its next check of ``is_active``. Every answer allows any origin (CORS): what a call may
do is the token's to say, as over gRPC. RPCs of a stream of requests (``WriteTable``) are not
served over gRPC-web: browsers cannot stream a request body.

``WebServer`` serves it with uvicorn on a port of its own, beside the gRPC server.
"""

from __future__ import annotations

import base64
import ssl
import struct
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import anyio
import grpc

from protocol.asgi_server import AsgiServer, Receive, Scope, Send

FRAME = struct.Struct(">BI")
"""A gRPC-web frame's header: its flag (0 a message, 0x80 the trailers) and its length."""
TRAILERS = 0x80
CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"POST, OPTIONS"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-expose-headers", b"grpc-status, grpc-message"),
    (b"access-control-max-age", b"86400"),
    (b"timing-allow-origin", b"*"),  # the page may read each call's timings and sizes
]


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str, metadata: Sequence[tuple[str, str | bytes]]) -> None:
        self.method = method
        self.invocation_metadata = metadata


class CallEnded(Exception):
    """Raised by ``_Context.abort``: the call ends with the status the context holds."""


class _Context(grpc.ServicerContext):
    """What a method handler sees of a gRPC-web call: its headers, its status, and whether the
    browser still waits."""

    def __init__(self, metadata: Sequence[tuple[str, str | bytes]], deadline: float | None) -> None:
        self._metadata = tuple(metadata)
        self._deadline = deadline
        self.code = grpc.StatusCode.OK
        self.details = ""
        self.active = True

    def invocation_metadata(self) -> Sequence[tuple[str, str | bytes]]:
        return self._metadata

    def abort(self, code: grpc.StatusCode, details: str) -> Any:
        self.code, self.details = code, details
        raise CallEnded(details)

    def abort_with_status(self, status: Any) -> Any:
        self.abort(status.code, status.details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def is_active(self) -> bool:
        return self.active and (self._deadline is None or time.monotonic() < self._deadline)

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def peer(self) -> str:
        return "grpc-web"

    def peer_identities(self) -> None:
        return None

    def peer_identity_key(self) -> None:
        return None

    def auth_context(self) -> dict[str, Any]:
        return {}

    def send_initial_metadata(self, initial_metadata: Any) -> None:
        pass

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        pass

    def add_callback(self, callback: Callable[[], None]) -> bool:
        return False

    def cancel(self) -> None:
        self.active = False

    def set_compression(self, compression: Any) -> None:
        pass

    def disable_next_message_compression(self) -> None:
        pass


def _timeout(value: str | None) -> float | None:
    """The deadline a ``grpc-timeout`` header names (``10S``, ``500m``...), as a monotonic time."""
    if not value or value[-1] not in "HMSmun" or not value[:-1].isdigit():
        return None
    seconds = int(value[:-1]) * {"H": 3600, "M": 60, "S": 1, "m": 1e-3, "u": 1e-6, "n": 1e-9}[value[-1]]
    return time.monotonic() + seconds


def frame(data: bytes, flag: int = 0) -> bytes:
    """``data`` in a gRPC-web frame."""
    return FRAME.pack(flag, len(data)) + data


def trailers(code: grpc.StatusCode, message: str) -> bytes:
    """The trailers frame of a call that ended with ``code`` and ``message``."""
    lines = f"grpc-status: {code.value[0]}\r\ngrpc-message: {urllib.parse.quote(message, safe=' ')}\r\n"
    return frame(lines.encode(), TRAILERS)


def unframe(body: bytes) -> bytes:
    """The one message of a request's body. ``ValueError`` if it is not one whole frame."""
    if len(body) < FRAME.size:
        raise ValueError("the request body is not a gRPC-web frame")
    flag, length = FRAME.unpack_from(body)
    if flag != 0 or len(body) != FRAME.size + length:
        raise ValueError("send one uncompressed gRPC-web message frame per call")
    return body[FRAME.size:]


class GrpcWeb:
    """The ASGI application of gRPC-web calls answered by ``handlers``' methods."""

    def __init__(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.handlers = list(handlers)

    def _method(self, details: _Details) -> grpc.RpcMethodHandler | None:
        for handler in self.handlers:
            found = handler.service(details)
            if found is not None:
                return found
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] == "OPTIONS":  # a browser's CORS preflight
            await send({"type": "http.response.start", "status": 204, "headers": CORS_HEADERS})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = [(name.decode("latin-1").lower(), value.decode("latin-1"))
                   for name, value in scope["headers"]]
        content_type = dict(headers).get("content-type", "")
        if scope["method"] != "POST" or not content_type.startswith("application/grpc-web"):
            body = b"strata serves gRPC-web here: POST a call of Rerun's catalog protocol\n"
            await send({"type": "http.response.start", "status": 415,
                        "headers": [*CORS_HEADERS, (b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": body})
            return
        text = content_type.startswith("application/grpc-web-text")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        metadata = [(name, value) for name, value in headers if _forwarded(name)]
        context = _Context(metadata, _timeout(dict(headers).get("grpc-timeout")))
        answer = "application/grpc-web-text+proto" if text else "application/grpc-web+proto"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*CORS_HEADERS, (b"content-type", answer.encode())]})

        async def write(data: bytes, more: bool) -> None:
            await send({"type": "http.response.body", "body": base64.b64encode(data) if text else data,
                        "more_body": more})

        async with anyio.create_task_group() as group:
            group.start_soon(_watch_disconnect, receive, context)
            code, details = await self._call(scope["path"], metadata, body, text, context, write)
            await write(trailers(code, details), False)
            group.cancel_scope.cancel()

    async def _call(self, path: str, metadata: list[tuple[str, str]], body: bytes, text: bool,
                    context: _Context, write: Callable[[bytes, bool], Any]) -> tuple[grpc.StatusCode, str]:
        """Run the call; its status."""
        method = self._method(_Details(path, metadata))
        if method is None:
            return grpc.StatusCode.UNIMPLEMENTED, f"{path} is not a method strata serves"
        if method.request_streaming:
            return (grpc.StatusCode.UNIMPLEMENTED,
                    f"{path} takes a stream of requests, which gRPC-web cannot send")
        try:
            request_bytes = unframe(base64.b64decode(body) if text else body)
        except ValueError as exc:
            return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
        serialize = method.response_serializer or (lambda response: response)
        deserialize = method.request_deserializer or (lambda data: data)

        def start() -> Iterator[Any]:
            request = deserialize(request_bytes)
            if method.unary_unary is not None:
                return iter([method.unary_unary(request, context)])
            return iter(method.unary_stream(request, context))

        def following(responses: Iterator[Any]) -> bytes | None:
            for response in responses:
                return frame(serialize(response))
            return None

        try:
            responses = await anyio.to_thread.run_sync(start)
            while (data := await anyio.to_thread.run_sync(following, responses)) is not None:
                await write(data, True)
        except CallEnded:
            pass
        except Exception as exc:  # noqa: BLE001 - every error becomes the call's status, as over gRPC
            return grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}"
        return context.code, context.details


def _forwarded(name: str) -> bool:
    """Whether a request header is call metadata for the handlers (``x-rerun-*``,
    ``authorization``), not one of HTTP's or the browser's own."""
    return name.startswith("x-") or name == "authorization"


async def _watch_disconnect(receive: Receive, context: _Context) -> None:
    """Mark the call inactive once the browser goes away, so that a stream stops being made."""
    while (await receive())["type"] != "http.disconnect":
        pass
    context.active = False


class WebServer:
    """``GrpcWeb`` of ``handlers`` served on ``host`` at ``port`` (0: a free one), in a background
    thread, over TLS with ``tls`` (a server context); ``stop()`` ends it."""

    def __init__(self, handlers: Iterable[grpc.GenericRpcHandler], host: str, port: int, *,
                 tls: ssl.SSLContext | None = None) -> None:
        self._server = AsgiServer(GrpcWeb(list(handlers)), host, port, name="strata-grpc-web", tls=tls)
        self.port = self._server.port

    def stop(self) -> None:
        self._server.stop()
