"""Rerun's OSS catalog server in a process of its own, so its memory can be measured apart from
the benchmark's: prints its URL on the first line of stdout and serves until stdin closes or
SIGTERM.

    python -m bench.rerun_server
"""

from __future__ import annotations

import signal
import sys


def main() -> int:
    import rerun.server

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = rerun.server.Server(host="127.0.0.1")
    print(server.url(), flush=True)
    try:
        sys.stdin.read()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
