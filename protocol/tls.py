"""The endpoint over TLS (``rerun+https://``): its certificate and key, for gRPC and for the
HTTP server of direct URLs. Clients trust the certificate through their own settings: Rerun's
client reads the system's roots or ``SSL_CERT_FILE``, strata's client the same
(``settings.trusted_roots()``)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


@dataclass(frozen=True)
class Certificate:
    """A server certificate chain and its private key, both PEM files, read when the endpoint
    starts."""

    cert: Path
    key: Path

    def _read(self) -> tuple[bytes, bytes]:
        try:
            return self.key.read_bytes(), self.cert.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read the endpoint's TLS certificate or key: {exc}") from None

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """gRPC's server credentials of this certificate. ``ValueError`` if a file cannot be read."""
        return grpc.ssl_server_credentials([self._read()])

    def ssl_context(self) -> ssl.SSLContext:
        """A server context for HTTPS. ``ValueError`` if the files cannot be read or do not make a
        certificate and its key."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as exc:
            raise ValueError(f"{self.cert} and {self.key} are not a PEM certificate and its key: "
                             f"{exc}") from None
        except OSError as exc:  # after SSLError, one of its kind
            raise ValueError(f"cannot read the endpoint's TLS certificate or key: {exc}") from None
        return context
