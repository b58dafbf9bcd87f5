"""A live page of the catalog: ``strata dashboard``, and started by ``strata up``.

Starlette on uvicorn. The page shows the datasets, a dataset's segment table, the change rates,
the projection's lag, the rejections and the recent changes, updated by Server-Sent Events with
no reload; a segment's page its layers, properties, entities, plots of its series and its camera
frames, with a link to Rerun's web viewer; ``/api/...`` serves the same data as JSON and, with
``.arrow``, as Arrow IPC streams.
Every route reads the store, read-only; none writes anything.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import uvicorn

import settings
from dashboard.app import ARROW_STREAM, create_app, sources_of
from dashboard.viewer import web_viewer

DEFAULT_PORT = settings.DASHBOARD_PORT
DEFAULT_VIEWER_PORT = settings.VIEWER_PORT

__all__ = ["ARROW_STREAM", "DEFAULT_PORT", "DEFAULT_VIEWER_PORT", "Dashboard", "create_app"]


class Dashboard:
    """The dashboard of ``store`` served by uvicorn, in this thread (``serve``) or in a
    background one (``start``/``stop``). ``port=0`` picks a free port. With ``viewer_port``,
    Rerun's web viewer is served on that port too (``dashboard.viewer``; 0: a free one), which
    segment pages open their segment in: through ``catalog_url``, the gRPC-web endpoint of Rerun's
    catalog protocol on the same store (``strata up`` serves one), if given."""

    def __init__(self, store: str, *, bootstrap_servers: str | None = None,
                 kafka_config: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1", port: int = DEFAULT_PORT, viewer_port: int | None = None,
                 catalog_url: str | None = None) -> None:
        self._socket = _bind(host, port)
        try:
            self.viewer_port = None if viewer_port is None else web_viewer(viewer_port)
            """The port of Rerun's web viewer that segment pages link to (None: no viewer)."""
        except OSError:
            self._socket.close()
            raise
        self.app = create_app(store, bootstrap_servers=bootstrap_servers, kafka_config=kafka_config,
                              viewer_port=self.viewer_port, catalog_url=catalog_url)
        # Open event streams are cut after a second at shutdown; their pages reconnect later.
        self._server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning",
                                                     timeout_graceful_shutdown=1, access_log=False))
        self._thread: threading.Thread | None = None
        bound, self.port = self._socket.getsockname()[:2]
        """The port it listens on (the one picked if ``port=0``)."""
        shown = "127.0.0.1" if bound == "0.0.0.0" else f"[{bound}]" if ":" in bound else bound
        self.url = f"http://{shown}:{self.port}"

    @property
    def open_streams(self) -> int:
        """Event streams open now."""
        return sources_of(self.app).feed.subscribers

    def serve(self) -> None:
        """Serve until Ctrl-C or SIGTERM."""
        self._server.run(sockets=[self._socket])

    def start(self, timeout_secs: float = 30.0) -> Dashboard:
        """Serve in a background thread; return once it accepts connections."""
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="strata-dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_secs
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the dashboard did not start on {self.url}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
            self._thread = None
        self._socket.close()

    def __enter__(self) -> Dashboard:
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound now so that a port in use fails here, in one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"the dashboard cannot listen on {host}:{port}: {exc.strerror}; pick another "
                      f"port with --port (0: any free port)") from None
    return sock
