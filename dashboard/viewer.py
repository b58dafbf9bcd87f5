"""Rerun's web viewer, as rerun-sdk ships it (the viewer of the ``.rrd`` version the recordings
are read with), served over HTTP from the dashboard's process: a segment page links to it with
the URL of the segment's layers merged into one ``.rrd`` (``/api/.../recording.rrd``)."""

from __future__ import annotations

import functools
import socket


@functools.cache
def web_viewer(port: int) -> int:
    """Serve the web viewer on ``port`` of every interface (0: a free port) until the process
    exits, once per process and port; the port it serves on. ``OSError`` if the port is taken."""
    import rerun as rr

    if port == 0:
        with socket.socket() as probe:
            probe.bind(("0.0.0.0", 0))
            port = probe.getsockname()[1]
    try:
        rr.serve_web_viewer(web_port=port, open_browser=False)
    except RuntimeError as exc:
        raise OSError(f"Rerun's web viewer cannot listen on port {port}: {exc}; pick another port with "
                      "--viewer-port (0: any free port) or serve none with --no-viewer") from None
    return port
