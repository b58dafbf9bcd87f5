"""Recordings in object storage: ``s3://bucket/key`` URLs on AWS S3 or any S3-compatible server,
through pyarrow's S3 filesystem.

The endpoint, region and credentials come from the standard AWS variables (read in
``settings``), overridden key by key by an ``object_store_config`` mapping (or its JSON text):
``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``, ``session_token``.
Without credentials, the AWS default chain (``~/.aws``, instance roles) applies.

Every request is bounded: a connect timeout, a request timeout and a few retries, so an
unreachable endpoint is an error in seconds, not a hang.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import functools
import hashlib
import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

import settings
from recordings.errors import NotFoundError, ObjectStoreError
from recordings.locations import OBJECT_SCHEME, split

CONNECT_TIMEOUT_SECS = 5.0
REQUEST_TIMEOUT_SECS = 30.0
MAX_ATTEMPTS = 3


ObjectStoreSettings = Mapping[str, str] | str | None
"""``object_store_config``: settings by key, or their JSON text."""


@dataclass(frozen=True)
class ObjectStoreConfig:
    """Where ``s3://`` URLs are read from, and as whom."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    @classmethod
    def resolve(cls, override: ObjectStoreSettings = None) -> ObjectStoreConfig:
        """The AWS variables' settings, with ``override`` winning key by key."""
        return cls(**settings.object_store()).updated(override)

    def updated(self, override: ObjectStoreSettings) -> ObjectStoreConfig:
        """These settings with ``override`` (a mapping or its JSON text) winning key by key.
        ``ValueError`` for an unknown key or text that is not a JSON object."""
        if override is None:
            return self
        if isinstance(override, str):
            try:
                override = json.loads(override)
            except json.JSONDecodeError as exc:
                raise ValueError(f"object_store_config is not a JSON object: {exc}") from None
        if not isinstance(override, Mapping):
            raise ValueError(f"object_store_config must be a mapping (or its JSON text), got "
                             f"{type(override).__name__}")
        known = [f.name for f in fields(self)]
        unknown = sorted(set(override) - set(known))
        if unknown:
            raise ValueError(f"object_store_config has unknown keys {unknown}; the keys are "
                             f"{', '.join(known)}")
        return replace(self, **{k: str(v) for k, v in override.items() if v is not None})

    def storage_options(self) -> dict[str, str]:
        """These settings as the ``storage_options`` of Lance (the keys of Rust's ``object_store``
        crate), plain HTTP allowed to an ``http://`` endpoint."""
        options = {"aws_endpoint": self.endpoint_url, "aws_region": self.region,
                   "aws_access_key_id": self.access_key_id, "aws_secret_access_key": self.secret_access_key,
                   "aws_session_token": self.session_token}
        if self.endpoint_url and self.endpoint_url.startswith("http://"):
            options["allow_http"] = "true"
        return {k: v for k, v in options.items() if v is not None}

    def describe(self) -> str:
        """Where these settings read from, for messages: the endpoint (or AWS S3) and region."""
        where = self.endpoint_url or "AWS S3"
        return f"{where} (region {self.region})" if self.region else where


class RemoteObject:
    """An object opened for reading: its size, byte ranges (one ranged GET each), and ``file``, a
    random-access file for pyarrow's readers that fetches the ranges they ask for."""

    def __init__(self, uri: str, file: pafs.NativeFile, errors: Callable[[str], Any]) -> None:
        self.uri = uri
        self.file = file
        self._errors = errors
        with errors(uri):
            self.size = file.size()

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each (offset, size), one ranged GET each, all in flight at once (a round
        trip for all, not one each); errors as ``ObjectStore``'s."""
        with self._errors(self.uri):
            if len(ranges) == 1:
                [(offset, size)] = ranges
                return [self.file.read_at(size, offset)]
            # Arrow's ReadAt is safe to call from several threads on one file.
            reads = [_range_readers().submit(self.file.read_at, size, offset) for offset, size in ranges]
            return [read.result() for read in reads]


RANGE_READERS = 32
"""Ranged GETs in flight at once in a process, over every object it reads: each is a round trip
to the object store, not CPU."""


@functools.cache
def _range_readers() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(RANGE_READERS, thread_name_prefix="strata-ranges")


@functools.cache
def object_store(config: ObjectStoreConfig) -> ObjectStore:
    """The object store of ``config``, one per process and configuration: its S3 client and
    connections are made once."""
    return ObjectStore(config)


@functools.cache
def _copies_directory() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="strata-objects-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


class ObjectStore:
    """Reads objects by ``s3://`` URL: sizes, byte ranges, listings and whole downloads. Errors are
    one line naming the URL and the endpoint: ``NotFoundError`` for a missing bucket or object,
    ``ObjectStoreError`` for an endpoint that cannot be reached or refuses the credentials."""

    def __init__(self, config: ObjectStoreConfig) -> None:
        if (config.access_key_id is None) != (config.secret_access_key is None):
            raise ValueError("object store credentials need both access_key_id and "
                             "secret_access_key (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
        self.config = config

    def __reduce__(self) -> tuple[Any, ...]:
        """A store crosses to a worker process as its configuration (it connects there)."""
        return object_store, (self.config,)

    @functools.cached_property
    def filesystem(self) -> pafs.S3FileSystem:
        """The S3 client, made on first use (a catalog of local files never needs one): paths
        on it are ``bucket/key``."""
        config = self.config
        options = {
            "access_key": config.access_key_id, "secret_key": config.secret_access_key,
            "session_token": config.session_token, "region": config.region,
            "connect_timeout": CONNECT_TIMEOUT_SECS, "request_timeout": REQUEST_TIMEOUT_SECS,
            "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=MAX_ATTEMPTS),
        }
        if config.endpoint_url:
            endpoint = urlparse(config.endpoint_url)
            options["endpoint_override"] = endpoint.netloc or config.endpoint_url
            options["scheme"] = endpoint.scheme or "https"
        return pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})

    @contextmanager
    def errors(self, uri: str) -> Iterator[None]:
        """Turns what the S3 client raises about ``uri`` into one line naming it and the endpoint
        (``NotFoundError``, ``ObjectStoreError``)."""
        where = self.config.describe()
        try:
            yield
        except ObjectStoreError:
            raise
        except FileNotFoundError:
            raise NotFoundError(f"no object at {uri} on {where}") from None
        except OSError as exc:
            text = str(exc)
            if "NO_SUCH_BUCKET" in text:
                raise NotFoundError(f"{uri}: bucket {split(uri)[0]!r} does not exist on {where}") from None
            if any(code in text for code in ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID",
                                             "SIGNATURE_DOES_NOT_MATCH", "Forbidden")):
                raise ObjectStoreError(
                    f"{uri}: {where} refused the credentials; check AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or object_store_config)") from None
            detail = text.splitlines()[0] if text else type(exc).__name__
            raise ObjectStoreError(f"{uri}: cannot read from {where} ({detail}); check the endpoint "
                                   "(AWS_ENDPOINT_URL or object_store_config)") from None

    def size(self, uri: str) -> int:
        """The object's size in bytes (one HEAD request). Raises ``NotFoundError`` for a missing
        object or bucket, ``ObjectStoreError`` for an endpoint that cannot be reached or refuses
        the credentials, ``ValueError`` for a prefix."""
        bucket, key = split(uri)
        with self.errors(uri):
            info = self.filesystem.get_file_info(f"{bucket}/{key}")
            if info.type == pafs.FileType.NotFound:
                self._check_bucket(uri)
                raise FileNotFoundError(uri)
            if info.type != pafs.FileType.File:
                raise ValueError(f"{uri} is a prefix, not an object; use register_prefix() for it")
            size: int = info.size
            return size

    def _check_bucket(self, uri: str) -> None:
        bucket = split(uri)[0]
        if self.filesystem.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise NotFoundError(f"{uri}: bucket {bucket!r} does not exist on {self.config.describe()}")

    def open(self, uri: str) -> RemoteObject:
        """The object, opened for reading ranges (one HEAD request)."""
        bucket, key = split(uri)
        with self.errors(uri):
            try:
                return RemoteObject(uri, self.filesystem.open_input_file(f"{bucket}/{key}"), self.errors)
            except FileNotFoundError:
                self._check_bucket(uri)
                raise

    def local_copy(self, uri: str, size: int) -> Path:
        """A local copy of the object (of ``size`` bytes), downloaded once per process into a
        directory removed when the process exits."""
        name = hashlib.sha256(f"{self.config.endpoint_url}|{uri}|{size}".encode()).hexdigest()
        path = _copies_directory() / f"{name}{PurePosixPath(uri).suffix}"
        if not path.exists():
            partial = path.with_name(f"{path.name}.{threading.get_ident()}.part")
            self.download(uri, partial)
            partial.replace(path)
        return path

    def download(self, uri: str, path: Path) -> None:
        """Copy the whole object to ``path``. Raises as ``size`` does."""
        bucket, key = split(uri)
        with self.errors(uri), self.filesystem.open_input_stream(f"{bucket}/{key}") as source, \
                path.open("wb") as sink:
            shutil.copyfileobj(source, sink, 8 << 20)

    def list(self, prefix: str, suffixes: tuple[str, ...]) -> list[str]:
        """The URLs of the objects under ``prefix`` (recursively) whose names end in one of
        ``suffixes``, in key order."""
        bucket, key = split(prefix)
        with self.errors(prefix):
            found = self.filesystem.get_file_info(pafs.FileSelector(f"{bucket}/{key}".rstrip("/"),
                                                             allow_not_found=True, recursive=True))
            if not found:
                self._check_bucket(prefix)
        return sorted(f"{OBJECT_SCHEME}://{info.path}" for info in found
                      if info.type == pafs.FileType.File and info.path.lower().endswith(suffixes))
