"""The ``chunk_key`` of a chunk, opaque to Rerun's client: where the chunk's bytes are (a
registered layer's storage URL, the offset and length of its ``ArrowMsg`` in the file, the file's
size as registered) and the segment it belongs to, signed with the server's secret.

``FetchChunks`` reads only what a key it signed names: a key naming another file, another range
or another size than the one the server handed out fails its signature and is refused
(``InvalidChunkKeyError``), so a client can never read a file or a range that is not a
registered layer's chunk. Keys are good for as long as the server's secret: a new server
refuses the keys of the last one, and a read started before it must be run again.

    key = version (1 byte) | signature (16 bytes) | body
    body = offset, length, file size (3 x u64 little-endian) | storage URL | segment id | layer
           (each a u16 length and UTF-8 bytes)

A layer's *token* names a whole registered file the same way, until a time, for its direct URL
(``protocol.direct``): the path of an HTTP GET that a client sends ``Range`` requests to.

    token = base64url(version 2 | signature | file size, expiry in Unix seconds (2 x u64) |
                      storage URL | segment id | layer)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass

from protocol.errors import InvalidRequestError

CHUNK_KEY = "chunk_key"
"""The column of a chunk's key, in the rows of a query and of a manifest."""
VERSION = 1
TOKEN_VERSION = 2
SIGNATURE_BYTES = 16
"""A truncated HMAC-SHA256: 128 bits, as hard to forge as a chunk id is to guess."""
_RANGE = struct.Struct("<QQQ")
_TOKEN = struct.Struct("<QQ")
_LENGTH = struct.Struct("<H")
_HEADER_BYTES = 1 + SIGNATURE_BYTES


class InvalidChunkKeyError(InvalidRequestError):
    """A ``chunk_key`` this server did not hand out (forged, altered, truncated, or signed by
    another server's secret): ``INVALID_ARGUMENT``."""


class ExpiredTokenError(InvalidChunkKeyError):
    """A layer's token past its expiry."""


@dataclass(frozen=True)
class LayerRef:
    """A registered layer's file, as a chunk key names it."""

    storage_url: str
    segment_id: str
    layer_name: str
    size_bytes: int
    """The file's size as registered: a file changed since is refused when read."""


@dataclass(frozen=True)
class ChunkLocation:
    """What a valid chunk key names: the chunk's ``ArrowMsg`` at ``offset``, ``length`` bytes, in
    ``layer``'s file."""

    layer: LayerRef
    offset: int
    length: int


def _text(value: str) -> bytes:
    encoded = value.encode()
    return _LENGTH.pack(len(encoded)) + encoded


def _texts(body: bytes, at: int) -> tuple[str, str, str]:
    """The storage URL, segment id and layer name at ``at`` of a key's or token's body."""
    texts = []
    for _ in range(3):
        (count,) = _LENGTH.unpack_from(body, at)
        texts.append(body[at + _LENGTH.size:at + _LENGTH.size + count].decode())
        at += _LENGTH.size + count
    url, segment_id, layer_name = texts
    return url, segment_id, layer_name


def _names(layer: LayerRef) -> bytes:
    return _text(layer.storage_url) + _text(layer.segment_id) + _text(layer.layer_name)


class ChunkKeys:
    """Signs and checks chunk keys with one secret (by default a new random one: the keys of a
    server are good for as long as it runs)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def _sign(self, body: bytes) -> bytes:
        return hmac.digest(self._secret, body, hashlib.sha256)[:SIGNATURE_BYTES]

    def keys(self, layer: LayerRef, offsets: list[int], lengths: list[int]) -> list[bytes]:
        """The keys of ``layer``'s chunks at ``offsets`` of ``lengths`` bytes.

        >>> keys = ChunkKeys(b"secret")
        >>> layer = LayerRef("file:///data/ep_1.rrd", "ep_1", "base", 4096)
        >>> [key] = keys.keys(layer, [180], [963])
        >>> keys.location(key) == ChunkLocation(layer, 180, 963)
        True
        """
        tail = _names(layer)
        made = []
        for offset, length in zip(offsets, lengths, strict=True):
            body = _RANGE.pack(offset, length, layer.size_bytes) + tail
            made.append(bytes([VERSION]) + self._sign(body) + body)
        return made

    def location(self, key: bytes) -> ChunkLocation:
        """What ``key`` names. ``InvalidChunkKeyError`` for a key this server did not sign."""
        if len(key) < _HEADER_BYTES + _RANGE.size or key[0] != VERSION:
            raise InvalidChunkKeyError("FetchChunks: a chunk_key is not one this server handed out "
                                       "(unknown format); ask FindChunks or GetRrdManifest for the keys")
        body = key[_HEADER_BYTES:]
        if not hmac.compare_digest(key[1:_HEADER_BYTES], self._sign(body)):
            raise InvalidChunkKeyError("FetchChunks: a chunk_key is not one this server handed out (its "
                                       "signature does not match); ask FindChunks or GetRrdManifest for "
                                       "the keys")
        offset, length, size = _RANGE.unpack_from(body)
        url, segment_id, layer_name = _texts(body, _RANGE.size)
        return ChunkLocation(LayerRef(url, segment_id, layer_name, size), offset, length)

    def token(self, layer: LayerRef, expires_at: int) -> str:
        """The token of ``layer``'s file until ``expires_at`` (Unix seconds): URL-safe text that
        names it, signed.

        >>> keys = ChunkKeys(b"secret")
        >>> layer = LayerRef("file:///data/ep_1.rrd", "ep_1", "base", 4096)
        >>> keys.layer(keys.token(layer, 4_000_000_000), now=1_800_000_000) == layer
        True
        """
        body = _TOKEN.pack(layer.size_bytes, expires_at) + _names(layer)
        signed = bytes([TOKEN_VERSION]) + self._sign(body) + body
        return base64.urlsafe_b64encode(signed).rstrip(b"=").decode()

    def layer(self, token: str, *, now: float) -> LayerRef:
        """The layer a ``token`` names. ``InvalidChunkKeyError`` for a token this server did not
        sign, ``ExpiredTokenError`` for one that expired before ``now`` (Unix seconds)."""
        try:
            signed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            signed = b""
        body = signed[_HEADER_BYTES:]
        if (len(signed) < _HEADER_BYTES + _TOKEN.size or signed[0] != TOKEN_VERSION
                or not hmac.compare_digest(signed[1:_HEADER_BYTES], self._sign(body))):
            raise InvalidChunkKeyError("not a layer this server handed out a direct URL of")
        size, expires_at = _TOKEN.unpack_from(body)
        if expires_at < now:
            raise ExpiredTokenError(f"this direct URL expired {now - expires_at:.0f} s ago: query again for "
                                    "a new one")
        url, segment_id, layer_name = _texts(body, _TOKEN.size)
        return LayerRef(url, segment_id, layer_name, size)
