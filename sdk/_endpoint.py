"""The catalog behind a strata endpoint of Rerun's catalog protocol: ``CatalogClient`` given a
``rerun+http://HOST:PORT`` URL (``Server.url()`` of a server that serves the protocol, ``strata
up``'s, ``strata serve``'s) asks the endpoint where its catalog is, its Kafka cluster and its
store (``settings.CATALOG_LOCATION_RPC``), and connects to those as it would have been told.
The client still reads the store itself: a SQLite store is on the endpoint's machine."""

from __future__ import annotations

import json
import urllib.parse

import settings
from events import import_extra
from sdk.errors import EndpointRefusedError, EndpointUnavailableError

SCHEMES = {"rerun": True, "rerun+https": True, "rerun+http": False}
"""The URL schemes of Rerun's catalog protocol, each with whether it is over TLS (as Rerun reads
them: ``rerun://`` is ``rerun+https://``)."""


def is_endpoint_url(url: str) -> bool:
    """Whether ``url`` names an endpoint of Rerun's catalog protocol (``rerun+http://...``)."""
    return urllib.parse.urlsplit(url).scheme in SCHEMES


def locate(url: str, *, token: str | None = None, timeout_secs: float = 10.0) -> tuple[str | None, str]:
    """The Kafka bootstrap servers (None for an endpoint that serves its catalog read-only) and
    the store of the catalog the endpoint at ``url`` serves, asked with ``token`` (default
    ``REDAP_TOKEN``) if there is one; ``rerun+https://`` trusts ``settings.trusted_roots()``.

    Raises ``EndpointUnavailableError`` if nothing answers at ``url`` within ``timeout_secs``,
    ``EndpointRefusedError`` if the endpoint needs a token and has none or refuses it, ``ValueError``
    if what answers is not strata's (Rerun's own server, say: its catalog is read with
    ``rr.catalog.CatalogClient``) or the URL names no host, and ``MissingExtraError`` without
    ``strata[protocol]`` (grpcio).
    """
    grpc = import_extra("grpc", "protocol", f"a catalog URL such as {url!r}")
    parts = urllib.parse.urlsplit(url)
    if not parts.netloc:
        raise ValueError(f"{url!r} names no host: a catalog endpoint's URL is rerun+http://HOST:PORT")
    channel = (grpc.secure_channel(parts.netloc, grpc.ssl_channel_credentials(settings.trusted_roots()))
               if SCHEMES[parts.scheme] else grpc.insecure_channel(parts.netloc))
    token = token or settings.client_token()
    headers = [] if token is None else [("authorization", f"Bearer {token}")]
    with channel:
        ask = channel.unary_unary(settings.CATALOG_LOCATION_RPC)  # bytes in and out
        try:
            answer = ask(b"", timeout=timeout_secs, metadata=headers)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                raise ValueError(f"{url} serves Rerun's catalog protocol but is not a strata catalog: "
                                 f"read it with rerun-sdk's rr.catalog.CatalogClient({url!r})") from None
            if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise EndpointRefusedError(f"{url} refused this client: {exc.details()}") from None
            raise EndpointUnavailableError(
                f"no catalog answered at {url} within {timeout_secs:g} s ({exc.code().name}: "
                f"{exc.details()}): start one there ('strata up', 'strata serve') or check the "
                "address") from None
    found = json.loads(answer)
    return found["bootstrap_servers"], found["store"]
