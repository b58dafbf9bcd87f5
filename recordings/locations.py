"""Where recordings are: ``file://`` URLs of local files and ``s3://bucket/key`` URLs of objects."""

from __future__ import annotations

import functools
from pathlib import Path
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

OBJECT_SCHEME = "s3"


def is_object_url(uri: str) -> bool:
    """Whether ``uri`` names an object in an object store (``s3://``).

    >>> is_object_url("s3://bucket/episodes/ep_1.rrd"), is_object_url("file:///data/ep_1.rrd")
    (True, False)
    """
    return isinstance(uri, str) and _scheme(uri) == OBJECT_SCHEME


@functools.lru_cache(maxsize=1 << 16)
def _scheme(uri: str) -> str:
    """A URL's scheme, remembered: a scan asks it of every layer's file."""
    try:
        return urlparse(uri).scheme
    except ValueError:  # not a URL at all (an unclosed IPv6 bracket, say)
        return ""


def split(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` as (bucket, key). Raises ``ValueError`` for a URL without a bucket.

    >>> split("s3://bucket/episodes/ep_1.rrd")
    ('bucket', 'episodes/ep_1.rrd')
    """
    parsed = urlparse(uri)
    if parsed.scheme != OBJECT_SCHEME or not parsed.netloc:
        raise ValueError(f"{uri!r} is not an s3://bucket/key URL")
    return parsed.netloc, parsed.path.lstrip("/")


def local_path(uri: str) -> Path:
    """The local file a ``file://`` URI names. Raises ``ValueError`` for anything else.

    >>> local_path("file:///data/my%20episode.rrd")
    PosixPath('/data/my episode.rrd')
    """
    if not isinstance(uri, str):
        raise ValueError(f"expected a URI string, got {type(uri).__name__}: {uri!r}")
    return _local_path(uri)


@functools.lru_cache(maxsize=1 << 16)
def _local_path(uri: str) -> Path:
    """``local_path``, remembered: a scan asks it of every layer's file."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        hint = f" (for a local file use {Path(uri).absolute().as_uri()!r})" if not parsed.scheme else ""
        raise ValueError(f"{uri!r} is not a file:// URL{hint}; this reads local files")
    if parsed.netloc not in ("", "localhost"):
        raise ValueError(f"{uri!r} names host {parsed.netloc!r}; only local files are supported")
    return Path(url2pathname(unquote(parsed.path)))
