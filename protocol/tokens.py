"""Who may call the endpoint, and whether they may write: its tokens.

A token is a JWT of the kind Rerun's own catalog server issues (``re_auth``'s ``RedapClaims``):
signed with HS256 by the endpoint's secret (``settings.token_secret()``), with the claims ``iss``,
``sub``, ``aud`` (``"redap"``), ``iat``, ``exp``, ``permissions`` (``["read"]`` or
``["read-write"]``) and ``allowed_hosts``. Rerun's client sends a token only to a host that its
``allowed_hosts`` names, so a token names the hosts of the endpoints it is for.

An endpoint given a secret answers every call that has no valid token with ``UNAUTHENTICATED``,
and every call that writes with a read-only token with ``PERMISSION_DENIED``; ``WhoAmI`` says
whether the caller's token may write. An endpoint without a secret lets anyone read and write, as
Rerun's own server does.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Mapping, Sequence

import jwt

from protocol.errors import ReadOnlyTokenError, UnauthenticatedError

AUDIENCE = "redap"
"""The audience of Rerun's catalog tokens, which Rerun's server checks too."""
ISSUER = "strata"
READ = "read"
READ_WRITE = "read-write"
"""The permissions a token carries: Rerun's names."""
LEEWAY_SECS = 300
"""How far a caller's clock may be behind the endpoint's when its token expires (Rerun's)."""
HEADER = "authorization"
PREFIX = "Bearer "

READS = frozenset({
    "Version", "WhoAmI", "DoBandwidthTest", "WatchEvents", "FindEntries", "ReadDatasetEntry",
    "ReadTableEntry", "GetSegmentTableSchema", "ScanSegmentTable", "GetDatasetManifestSchema",
    "ScanDatasetManifest", "GetDatasetSchema", "GetSchemas", "GetRrdManifest", "GetAssetsForSegment",
    "GetSegmentProperties", "QueryDataset", "FetchChunks", "FindChunks", "GetTableSchema", "ScanTable",
    "QueryTasks", "QueryTasksOnCompletion", "Location"})
"""The RPCs that only read (``Location`` is strata's own, ``settings.CATALOG_LOCATION_RPC``);
every other one writes, so a read-only token may not call it."""


def mint(secret: bytes, *, hosts: Sequence[str], read_only: bool = False, lifetime_secs: int = 30 * 86400,
         subject: str | None = None) -> str:
    """A token signed with ``secret``, for the endpoints on ``hosts`` (host names or addresses;
    a leading dot: every subdomain), read-only or not, good for ``lifetime_secs``. ``subject``
    names who it is for (default: this machine's user name). Raises ``ValueError`` without hosts
    or with a lifetime under a second.

    >>> mint(secret, hosts=["127.0.0.1"], read_only=True)  # doctest: +SKIP
    'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOi...'
    """
    if not hosts:
        raise ValueError("a token names the hosts it may be sent to: Rerun's client sends it to no other")
    if lifetime_secs < 1:
        raise ValueError(f"a token's lifetime is at least a second, not {lifetime_secs}")
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": subject or getpass.getuser(), "aud": [AUDIENCE], "iat": now,
              "exp": now + lifetime_secs, "permissions": [READ if read_only else READ_WRITE],
              "allowed_hosts": list(hosts)}
    return jwt.encode(claims, secret, algorithm="HS256")


class Gate:
    """The endpoint's check of each call's token (``secret`` None: no check, anyone may write)."""

    def __init__(self, secret: bytes | None) -> None:
        self.secret = secret

    def admit(self, method: str, metadata: Mapping[str, str | bytes]) -> bool:
        """Whether the call of ``method`` with the headers ``metadata`` may write; raises
        ``UnauthenticatedError`` if it carries no valid token, ``ReadOnlyTokenError`` if
        ``method`` writes and its token may only read."""
        if self.secret is None:
            return True
        header = metadata.get(HEADER)
        text = header.decode(errors="replace") if isinstance(header, bytes) else header
        if not text:
            raise UnauthenticatedError(
                "this catalog needs a token: pass token=... to rr.catalog.CatalogClient (or set "
                "REDAP_TOKEN); 'strata token' makes one whose allowed hosts name this endpoint's host")
        if not text.startswith(PREFIX):
            raise UnauthenticatedError(f"malformed {HEADER} header: it is '{PREFIX}<token>'")
        try:
            claims = jwt.decode(text[len(PREFIX):].strip(), self.secret, algorithms=["HS256"],
                                audience=AUDIENCE, leeway=LEEWAY_SECS,
                                options={"require": ["exp", "sub", "aud", "iss"]})
        except jwt.ExpiredSignatureError:
            raise UnauthenticatedError("the token has expired: ask for a new one ('strata token')") from None
        except jwt.InvalidSignatureError:
            raise UnauthenticatedError("invalid token signature: the token was not made with this "
                                       "catalog's secret") from None
        except jwt.InvalidTokenError as exc:
            raise UnauthenticatedError(f"invalid token ({exc})") from None
        permissions = claims.get("permissions") or []
        writes = READ_WRITE in permissions
        if not writes and READ not in permissions:
            raise UnauthenticatedError(f"the token carries no permission this catalog knows "
                                       f"({permissions!r}; it knows {READ!r} and {READ_WRITE!r})")
        if not writes and method not in READS:
            raise ReadOnlyTokenError(f"{method} writes, and this token may only read: ask for a "
                                     "read-write token ('strata token' without --read-only)")
        return writes
