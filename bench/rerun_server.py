"""Rerun's OSS catalog server in a process of its own, so its memory can be measured apart from
the benchmark's: prints its URL on the first line of stdout and serves until stdin closes or
SIGTERM.

    python -m bench.rerun_server
"""

from __future__ import annotations

import resource
import signal
import sys

OPEN_FILES = 1 << 20
"""Rerun's server keeps every registered file open: with a limit of 20,000 descriptors it failed
after about 24,000 registrations with "Too many open files"."""


def raise_open_files_limit() -> None:
    """As many open files as the system allows this process (raising the hard limit needs root)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, max(hard, OPEN_FILES)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> int:
    import rerun.server

    raise_open_files_limit()
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
