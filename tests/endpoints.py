"""strata's endpoint of Rerun's catalog protocol on a stack's store, in a process of its own, as
``strata serve`` runs it: Rerun's client blocks in DataFusion calls holding the GIL while it waits
for the server (``using_index_values``), so a Python server in the client's own process would
never answer."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

import grpc

from projector.stores import normalize
from protocol import descriptors
from stack import Server

SERVE = """
import sys
import protocol
from commands import Catalog
from protocol import entries
if sys.argv[2] == "query_dataset":
    entries.CAPABILITIES.clear()
bootstrap = sys.argv[3] or None
web_port = 0 if sys.argv[4] == "web" else None
catalog = Catalog(bootstrap, sys.argv[1], workers=0)
with protocol.serve(catalog, port=0, web_port=web_port) as served:
    print(served.url, flush=True)
    print(served.web_url, flush=True)
    sys.stdin.read()
"""
"""strata's endpoint on the stack's store until its standard input closes: it writes through the
stack's broker if given one, else it only reads; with ``query_dataset``, one that does not
advertise ``dataset:find_chunks``; with ``web``, serving gRPC-web too. It prints its URL and its
gRPC-web URL (or None)."""


@contextlib.contextmanager
def endpoint(server: Server, path: str = "find_chunks", environment: dict[str, str] | None = None, *,
             writes: bool = False) -> Iterator[str]:
    """``web_endpoint``'s URL, serving no gRPC-web."""
    with web_endpoint(server, path, environment, writes=writes, web=False) as (url, _):
        yield url


@contextlib.contextmanager
def web_endpoint(server: Server, path: str = "find_chunks", environment: dict[str, str] | None = None, *,
                 writes: bool = False, web: bool = True) -> Iterator[tuple[str, str]]:
    """The URL of strata's endpoint on ``server``'s store in a process of its own, for the query
    ``path`` (``find_chunks`` or ``query_dataset``), with ``environment`` added to its own; with
    ``writes``, it writes through ``server``'s broker, else it only reads. ``web_endpoint`` gives
    its gRPC-web URL too (``rerun+http://HOST:PORT``), unless ``web`` is False."""
    bootstrap = server.bootstrap_servers if writes else ""
    process = subprocess.Popen([sys.executable, "-c", SERVE, normalize(server.store), path, bootstrap,
                                "web" if web else "-"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **(environment or {})})
    try:
        url = process.stdout.readline().strip()  # type: ignore[union-attr]
        web_url = process.stdout.readline().strip()  # type: ignore[union-attr]
        assert url.startswith("rerun+http://127.0.0.1:")
        advertised = {"find_chunks": ["dataset:find_chunks"], "query_dataset": []}[path]
        assert capabilities(url) == advertised
        yield url, web_url
    finally:
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(60)


def capabilities(url: str) -> list[str]:
    """What the endpoint's ``WhoAmI`` advertises."""
    who_am_i = descriptors.service().methods_by_name["WhoAmI"]
    with grpc.insecure_channel(url.removeprefix("rerun+http://")) as channel:
        answer = channel.unary_unary(
            f"/{descriptors.SERVICE}/WhoAmI", request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=descriptors.message_class(who_am_i.output_type.full_name).FromString,
        )(descriptors.message_class(who_am_i.input_type.full_name)(), timeout=30)
    return list(answer.capabilities.capabilities)
