"""An ASGI app served by uvicorn in a background thread of the endpoint, on a socket bound here:
the HTTP server of direct URLs and the gRPC-web server.

One uvloop event loop serves every connection, and httptools parses requests: measured with 8
keep-alive clients fetching 30 kB ranges, about 45 µs of the server's CPU a request, against
150 µs for the standard library's thread-per-connection server (which also held each response
40 ms behind Nagle's algorithm until ``TCP_NODELAY`` was set) and 250 µs for uvicorn's own
defaults (h11 on asyncio's loop). Rerun's loaders fetch one or two ranges a sample, so this is
the server's largest cost per sample.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn
import uvloop

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

START_SECS = 30
"""How long the server may take to start listening."""


class AsgiServer:
    """``app`` served on ``host`` at ``port`` (0: a free one) in a thread named ``name``, over
    TLS with ``tls`` (a server context); ``port`` is the one bound, ``stop()`` ends it.
    ``OSError`` if the address cannot be bound or the server does not start."""

    def __init__(self, app: App, host: str, port: int, *, name: str,
                 tls: ssl.SSLContext | None = None) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError:
            self._socket.close()
            raise
        self.port: int = self._socket.getsockname()[1]
        self._loop = uvloop.new_event_loop()
        # Connections waiting to be accepted: Rerun's client opens one per range it fetches at
        # once, a hundred or more for a scan; with a short queue the kernel drops the others'
        # handshakes, and each is retried after 1, 3, 7, 15, 31 s.
        config = uvicorn.Config(app, http="httptools", log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, backlog=socket.SOMAXCONN,
                                ssl_context_factory=None if tls is None else lambda _config, _default: tls)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_SECS
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise OSError(f"the {name} server did not start on {host}:{port}")
            time.sleep(0.01)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._server.serve(sockets=[self._socket]))
        finally:
            self._loop.close()

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` on the server's event loop (which serves nothing meanwhile)."""
        self._loop.call_soon_threadsafe(callback)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
