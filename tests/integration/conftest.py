"""Fixtures of the modules that compare Rerun's client on strata's protocol endpoint with Rerun's
client on Rerun's own server."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import rerun as rr

import protocol
import sdk
from commands import Catalog
from stack import Server


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory: pytest.TempPathFactory,
              new_store: Callable[[], str | None]) -> Iterator[Server]:
    """A stack of the module's own: Rerun's client lists every entry of a catalog, and the shared
    stack's holds names, such as ``x (renamed)``, that strata accepts and Rerun's client does not
    parse."""
    with Server(tmp_path_factory.mktemp("protocol-stack"), store=new_store(), protocol_port=None) as running:
        yield running


@pytest.fixture(scope="module")
def own_client(own_stack: Server) -> sdk.CatalogClient:
    """strata's client of ``own_stack``."""
    return own_stack.client()


@pytest.fixture(scope="module")
def strata_endpoint(own_stack: Server) -> Iterator[protocol.ProtocolServer]:
    """Rerun's catalog protocol served on ``own_stack``, on a free port."""
    catalog = Catalog(own_stack.bootstrap_servers, own_stack.store)
    try:
        with protocol.serve(catalog, port=0) as served:
            yield served
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def clients(strata_endpoint: protocol.ProtocolServer, rerun_client: rr.catalog.CatalogClient
            ) -> dict[str, rr.catalog.CatalogClient]:
    """Rerun's client of each server: strata's endpoint, Rerun's own server."""
    return {"strata": rr.catalog.CatalogClient(strata_endpoint.url),
            "rerun": rr.catalog.CatalogClient(rerun_client.url)}
