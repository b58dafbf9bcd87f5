"""Rerun's catalog protocol (``rerun.cloud.v1alpha1.RerunCloudService``, gRPC at
``rerun+http://HOST:PORT``) served on strata's catalog, so that rerun-sdk's own
``rr.catalog.CatalogClient`` and every other client of Rerun's protocol work against strata.

Owns the protocol's service and messages (``descriptors``, of the definitions ``recordings`` loads), the
Arrow data on the wire (``dataframes``), the mapping of ids and times (``ids``), the RPCs by area
(``entries``, ``datasets``, ``tasks``: registration and its tasks, ``tables``: tables' schemas,
rows and writes, ``chunks``: reads of the recordings' data, with the layers' chunk indexes in
``layer_chunks``, the query's rows in ``chunk_rows``, signed chunk keys in ``chunk_keys`` and the
files' bytes in ``layer_files``), the HTTP server of the layers' files for direct URLs
(``direct``), the gRPC server (``service``) and that server as a service of its own, ``python -m
protocol`` and ``strata serve`` (``endpoint``).
Writes go through the command core (``commands``), so through the log as the same commands the
SDK sends; reads come from the store's views through its catalog, never from a state of the
server's own (what the server keeps of recordings' files, their chunk indexes, is a cache of
immutable layers).

Imports ``commands``, ``projector``'s public names, ``recordings``, ``events`` and ``settings``;
never ``sdk``, ``stack``, ``dashboard`` or a private module of another room. ``sdk`` and
``dashboard`` never import it.
"""

from protocol.descriptors import PINNED_RERUN_SDK, SERVICE
from protocol.errors import InvalidRequestError
from protocol.service import DEFAULT_HOST, DEFAULT_PORT, SERVED, ProtocolServer, serve
from recordings.errors import DescriptorsUnavailableError

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PINNED_RERUN_SDK",
    "SERVED",
    "SERVICE",
    "DescriptorsUnavailableError",
    "InvalidRequestError",
    "ProtocolServer",
    "serve",
]
