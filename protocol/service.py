"""The gRPC server of ``RerunCloudService``: every RPC of the installed rerun-sdk's service
answered, the ones strata serves by their area's module (``entries``, ``datasets``, ``tasks``,
``chunks``, ``tables``) and the others with ``UNIMPLEMENTED`` and a message naming them; strata's errors as
the status codes Rerun's client maps to its exceptions, carrying strata's message.

Calls run at once, each in a thread of the server's pool, with no lock of the server's own: every
call is handed the one catalog the endpoint serves (``commands.Catalog``: the producer, the
store's connection, locked per statement, and the workers), whose reads wait for every write made
through the endpoint. It keeps no ledger of writes: a write the catalog refuses is reported to
the call that waits for its outcome (its task, or its own error) and to no other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

import settings
from commands import Catalog
from protocol import chunks, datasets, entries, properties, tables, tasks, watch
from protocol.descriptors import SERVICE, message_class, service
from protocol.direct import DirectServer
from protocol.errors import status_of
from protocol.grpc_web import WebServer
from protocol.layer_chunks import LayerChunks
from protocol.requests import Gathering, Request, Streaming, Unary
from protocol.tls import Certificate
from protocol.tokens import Gate

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = settings.PROTOCOL_PORT
"""Rerun's own port for its catalog server."""
MAX_MESSAGE_BYTES = 2**31 - 1
"""The largest message grpcio takes (its default receive limit is 4 MB; Rerun's client sends and
accepts up to 4 GiB)."""
UNARY: dict[str, Unary] = {**entries.HANDLERS, **datasets.UNARY, **tasks.UNARY, **tables.UNARY,
                           **properties.UNARY}
STREAMING: dict[str, Streaming] = {**datasets.STREAMING, **tasks.STREAMING, **chunks.STREAMING,
                                   **tables.STREAMING, **watch.STREAMING, **properties.STREAMING}
GATHERING: dict[str, Gathering] = dict(tables.GATHERING)
"""RPCs of a stream of requests and one response: the stream is read whole, each request
decoded, before the RPC runs."""
LAZY = frozenset(chunks.STREAMING) | watch.LAZY
"""Streams whose responses are made as the client reads them, not gathered first."""
SERVED = frozenset(UNARY) | frozenset(STREAMING) | frozenset(GATHERING)
"""The RPCs strata serves; every other RPC of the service answers ``UNIMPLEMENTED``."""

log = logging.getLogger("strata.protocol")


def _abort(context: grpc.ServicerContext, error: BaseException, method: str) -> None:
    code = status_of(error)
    if code is grpc.StatusCode.INTERNAL:
        log.error("%s failed", method, exc_info=error)
    context.abort(code, str(error) or type(error).__name__)


def _admit(gate: Gate, method: str, context: grpc.ServicerContext) -> tuple[Mapping[str, str | bytes], bool]:
    """The call's headers, and whether its token may write; the call ends with the gate's
    refusal if its token does not admit it."""
    metadata: Mapping[str, str | bytes] = dict(context.invocation_metadata())
    try:
        return metadata, gate.admit(method, metadata)
    except PermissionError as exc:
        _abort(context, exc, method)
        raise  # not reached: abort raises


class Handlers:
    """Admits a call by its token (``gate``), turns its bytes into a ``Request`` on the catalog
    for its caller, runs its RPC, and its errors into statuses."""

    def __init__(self, catalog: Catalog, layer_chunks: LayerChunks | None = None,
                 gate: Gate | None = None) -> None:
        self.catalog = catalog
        self.layer_chunks = layer_chunks or LayerChunks()
        self.gate = gate or Gate(None)
        self._workers_started = False

    def _start_workers(self) -> None:
        """Start the catalog's workers at the first call of a caller that may write: its
        registrations' files are read on them, and a client connects (``WhoAmI``, its lookups)
        before it registers, so its first registration finds them started instead of sharing
        the cores with their start. An endpoint no writer has called holds no worker."""
        if not self._workers_started:
            self._workers_started = True
            self.catalog.workers.start()

    def _message(self, method: str, data: bytes, context: grpc.ServicerContext) -> Message:
        input_type = service().methods_by_name[method].input_type.full_name
        try:
            return message_class(input_type).FromString(data)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"{method}: the request is not a {input_type} ({exc})")
            raise  # not reached: abort raises

    def _request(self, method: str, data: bytes, context: grpc.ServicerContext,
                 admitted: tuple[Mapping[str, str | bytes], bool] | None = None) -> Request:
        metadata, may_write = admitted or _admit(self.gate, method, context)
        if may_write and self.catalog.bootstrap_servers is not None and self.catalog.point is None:
            self._start_workers()
        return Request(self.catalog, self._message(method, data, context), metadata,
                       self.layer_chunks, context.is_active, may_write)

    def unary(self, method: str, run: Unary) -> Callable[[bytes, grpc.ServicerContext], Message]:
        def handle(data: bytes, context: grpc.ServicerContext) -> Message:
            request = self._request(method, data, context)
            try:
                result: Message = run(request)
                return result
            except Exception as exc:  # noqa: BLE001 - every error becomes the call's status
                _abort(context, exc, method)
                raise  # not reached: abort raises

        return handle

    def streaming(self, method: str, run: Streaming
                  ) -> Callable[[bytes, grpc.ServicerContext], Iterable[Message]]:
        def handle(data: bytes, context: grpc.ServicerContext) -> Iterable[Message]:
            request = self._request(method, data, context)
            try:
                responses = run(request) if method in LAZY else list(run(request))
            except Exception as exc:  # noqa: BLE001 - every error becomes the call's status
                _abort(context, exc, method)
                raise  # not reached: abort raises
            return _streamed(iter(responses), context, method)

        return handle

    def gathering(self, method: str, run: Gathering
                  ) -> Callable[[Iterator[bytes], grpc.ServicerContext], Message]:
        def handle(stream: Iterator[bytes], context: grpc.ServicerContext) -> Message:
            admitted = _admit(self.gate, method, context)  # before the stream is read
            messages = [self._message(method, data, context) for data in stream]
            request = self._request(method, b"", context, admitted)
            try:
                result: Message = run(request, messages)
                return result
            except Exception as exc:  # noqa: BLE001 - every error becomes the call's status
                _abort(context, exc, method)
                raise  # not reached: abort raises

        return handle


def _streamed(responses: Iterator[Any], context: grpc.ServicerContext, method: str) -> Iterator[Any]:
    """``responses``, an error met while making them ending the call with its status."""
    try:
        yield from responses
    except Exception as exc:  # noqa: BLE001 - every error becomes the call's status
        _abort(context, exc, method)
        raise  # not reached: abort raises


def _serializer(output_type: str) -> Callable[[Any], bytes]:
    """The encoder of a method's responses; a response already encoded (``FetchChunks``'s
    hand-framed messages) is sent as it is."""
    encode = message_class(output_type).SerializeToString

    def serialize(response: Any) -> bytes:
        return response if isinstance(response, bytes) else bytes(encode(response))

    return serialize


def _unimplemented(method: str, gate: Gate) -> Callable[..., Any]:
    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        _admit(gate, method, context)
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      f"strata does not serve {method} of Rerun's catalog protocol yet")

    return refuse


def generic_handler(catalog: Catalog, layer_chunks: LayerChunks | None = None,
                    gate: Gate | None = None) -> grpc.GenericRpcHandler:
    """The service's handler: every method of the installed rerun-sdk's ``RerunCloudService``,
    each call admitted by ``gate`` (default: anyone)."""
    handlers = Handlers(catalog, layer_chunks, gate)
    methods = {}
    for method in service().methods:
        name = method.name
        serialize = _serializer(method.output_type.full_name)
        if name in UNARY and not method.server_streaming:
            methods[name] = grpc.unary_unary_rpc_method_handler(
                handlers.unary(name, UNARY[name]), response_serializer=serialize)
        elif name in STREAMING and method.server_streaming:
            methods[name] = grpc.unary_stream_rpc_method_handler(
                handlers.streaming(name, STREAMING[name]), response_serializer=serialize)
        elif name in GATHERING and method.client_streaming and not method.server_streaming:
            methods[name] = grpc.stream_unary_rpc_method_handler(
                handlers.gathering(name, GATHERING[name]), response_serializer=serialize)
        else:
            kind = {(False, False): grpc.unary_unary_rpc_method_handler,
                    (False, True): grpc.unary_stream_rpc_method_handler,
                    (True, False): grpc.stream_unary_rpc_method_handler,
                    (True, True): grpc.stream_stream_rpc_method_handler}[
                        (method.client_streaming, method.server_streaming)]
            methods[name] = kind(_unimplemented(name, handlers.gate))
    return grpc.method_handlers_generic_handler(SERVICE, methods)


def location_handler(catalog: Catalog, gate: Gate | None = None) -> grpc.GenericRpcHandler:
    """strata's own ``settings.CATALOG_LOCATION_RPC``: the Kafka cluster and store of
    ``catalog``, for strata's client given this endpoint's URL (and a token ``gate`` admits)."""
    service_name, method = settings.CATALOG_LOCATION_RPC.strip("/").split("/")
    answer = json.dumps({"bootstrap_servers": catalog.bootstrap_servers, "store": catalog.location}).encode()
    gate = gate or Gate(None)

    def locate(request: bytes, context: grpc.ServicerContext) -> bytes:
        _admit(gate, method, context)
        return answer

    return grpc.method_handlers_generic_handler(service_name, {
        method: grpc.unary_unary_rpc_method_handler(locate)})  # bytes in and out: no serializers


class ProtocolServer:
    """Rerun's catalog protocol served on strata's catalog, at ``url``
    (``rerun+http://HOST:PORT``, or ``rerun+https://`` over TLS); ``stop()`` ends it (also at the
    end of a ``with`` block)."""

    def __init__(self, server: grpc.Server, host: str, port: int, direct: DirectServer | None = None, *,
                 tls: bool = False, web: WebServer | None = None,
                 catalog: Catalog | None = None) -> None:
        self._server = server
        self.catalog = catalog
        """The catalog it serves (a view ``as_of`` a point, for one served as of then)."""
        self.host = host
        self.port = port
        self.direct = direct
        """The HTTP server of the chunks' direct URLs (None if it serves none)."""
        self.tls = tls
        self.web = web
        """The server of gRPC-web, for Rerun's web viewer (None if it serves none)."""

    @property
    def url(self) -> str:
        """What ``rr.catalog.CatalogClient(url)`` connects to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"rerun+{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def web_url(self) -> str | None:
        """What Rerun's web viewer connects to (its ``?url=``): the gRPC-web server's
        ``rerun+http://HOST:PORT``; None without one."""
        if self.web is None:
            return None
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"rerun+{'https' if self.tls else 'http'}://{host}:{self.web.port}"

    def __repr__(self) -> str:
        return f"ProtocolServer({self.url})"

    def stop(self, grace_secs: float | None = 1.0) -> None:
        """Stop serving: calls in progress get ``grace_secs`` to finish. Safe to call twice."""
        self._server.stop(grace_secs).wait()
        if self.web is not None:
            self.web.stop()
            self.web = None
        if self.direct is not None:
            self.direct.stop()
            self.direct = None

    def wait(self, timeout_secs: float | None = None) -> bool:
        """Block until the server stops (or ``timeout_secs`` pass: False)."""
        return bool(self._server.wait_for_termination(timeout_secs))

    def __enter__(self) -> ProtocolServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve(catalog: Catalog, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
          max_workers: int = 8, direct_urls: bool = True, presigned_urls: bool = True,
          token_secret: bytes | None = None, certificate: Certificate | None = None,
          web_port: int | None = None) -> ProtocolServer:
    """Serve Rerun's catalog protocol on ``catalog`` (its reads answer, its writes go through the
    log) at ``host:port``, in background threads; ``port=0`` picks a free
    port. Binds this machine only unless ``host`` says otherwise. With ``direct_urls``, also
    serves the registered layers' files over HTTP on ``host`` at a free port, for the queries
    that ask for direct URLs (``protocol.direct``), and ``s3://`` layers' URLs are presigned URLs
    of the object store unless ``presigned_urls`` is False. With ``token_secret``, every call needs a
    token it signed (``protocol.tokens``); with ``certificate``, both are served over TLS
    (``rerun+https://``, ``https://``). With ``web_port``, the same RPCs are also served over
    gRPC-web on ``host`` at that port (0: a free one), for Rerun's web viewer
    (``protocol.grpc_web``; ``web_url``). Raises ``OSError`` if an address cannot be bound,
    ``ValueError`` if the certificate cannot be read, ``DescriptorsUnavailableError`` if the
    installed rerun-sdk's protocol cannot be read.

    Examples:
        >>> served = serve(Catalog("localhost:9092", ".strata/store.db"), port=0)  # doctest: +SKIP
        >>> rr.catalog.CatalogClient(served.url).dataset_names()  # doctest: +SKIP
    """
    layer_chunks = LayerChunks()
    gate = Gate(token_secret)
    credentials = None if certificate is None else certificate.grpc_credentials()
    tls_context = None if certificate is None else certificate.ssl_context()
    handlers = [generic_handler(catalog, layer_chunks, gate), location_handler(catalog, gate)]
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="strata-protocol"),
        handlers=handlers,
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0)])
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = (server.add_insecure_port(address) if credentials is None
                 else server.add_secure_port(address, credentials))
    except RuntimeError as exc:
        bound = 0
        cause: Exception | None = exc
    else:
        cause = None
    if not bound:
        server.stop(None)
        raise OSError(f"cannot serve Rerun's catalog protocol on {address}: the address is in use or not "
                      "this machine's") from cause
    if direct_urls:
        try:
            layer_chunks.direct = DirectServer(layer_chunks.keys, catalog.object_store_config, host,
                                               tls=tls_context, presign=presigned_urls)
        except OSError:
            server.stop(None)
            raise
    web = None
    if web_port is not None:
        try:
            web = WebServer(handlers, host, web_port, tls=tls_context)
        except OSError:
            server.stop(None)
            if layer_chunks.direct is not None:
                layer_chunks.direct.stop()
            raise
    server.start()
    return ProtocolServer(server, host, bound, layer_chunks.direct, tls=certificate is not None, web=web,
                          catalog=catalog)
