"""The schemas of layers registered without one (a producer may leave it out), read from their
files and merged into the dataset's; and the bounded cache that keeps them between reads.

A registered file never changes (reading one that did is a ``RecordingChangedError``), so a
schema read once is kept, by the file's (URL, size), for the next reads in this process: at most
``MAX_FILE_SCHEMAS`` files' schemas, the least recently used dropped first. Equal schemas (every
episode of a dataset usually has the same one, ~14 KB for a DROID-like episode) are kept once,
so the files count against the bound, not their schemas' bytes.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter, OrderedDict

import pyarrow as pa
import pyarrow.compute as pc

from projector import schemas
from recordings import ObjectStore, WorkerPool, read_recording

MAX_FILE_SCHEMAS = 4096
"""How many files' schemas the process keeps: a dataset with more layers registered without a
schema reads some of them again at each read of its schema."""

FileKey = tuple[str, int]
"""A registered file: its storage URL and size in bytes."""


class FileSchemaCache:
    """Schemas by file, least recently used dropped first beyond ``max_files``; equal schemas
    share one ``bytes`` object. Safe to use from several threads."""

    def __init__(self, max_files: int) -> None:
        if max_files < 1:
            raise ValueError(f"max_files must be at least 1, got {max_files}")
        self.max_files = max_files
        self._schemas: OrderedDict[FileKey, bytes] = OrderedDict()
        self._shared: dict[bytes, bytes] = {}
        """Each distinct schema kept, once, by itself."""
        self._uses: Counter[bytes] = Counter()
        """How many files have each distinct schema."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._schemas)

    def get(self, key: FileKey) -> bytes | None:
        """The schema of the file ``key`` if kept (it becomes the most recently used), else None."""
        with self._lock:
            schema = self._schemas.get(key)
            if schema is not None:
                self._schemas.move_to_end(key)
            return schema

    def put(self, key: FileKey, schema: bytes) -> None:
        """Keep ``schema`` as the file ``key``'s, dropping the least recently used beyond the bound."""
        with self._lock:
            if key in self._schemas:
                self._forget(self._schemas.pop(key))
            shared = self._shared.setdefault(schema, schema)
            self._uses[shared] += 1
            self._schemas[key] = shared
            while len(self._schemas) > self.max_files:
                _, dropped = self._schemas.popitem(last=False)
                self._forget(dropped)

    def distinct(self) -> int:
        """How many distinct schemas are kept."""
        with self._lock:
            return len(self._shared)

    def _forget(self, schema: bytes) -> None:
        self._uses[schema] -= 1
        if not self._uses[schema]:
            del self._uses[schema]
            del self._shared[schema]


FILE_SCHEMAS = FileSchemaCache(MAX_FILE_SCHEMAS)
"""The process's schemas read from files."""


def with_file_schemas(merged: bytes, layers: pa.Table, objects: ObjectStore, workers: WorkerPool,
                      cache: FileSchemaCache = FILE_SCHEMAS) -> bytes:
    """``merged`` (a dataset's schema) with the schemas of its layers registered without one,
    read from their files (by ``workers`` when there are several) unless ``cache`` has them;
    each distinct schema merged once. ``ValueError`` naming a layer whose file's schema
    conflicts."""
    unknown = layers.filter(pc.is_null(layers.column("schema_sha256")))
    columns = [unknown.column(n).to_pylist()
               for n in ("segment_id", "layer_name", "storage_url", "size_bytes")]
    files = set(zip(columns[2], columns[3], strict=True))
    found = {key: schema for key in files if (schema := cache.get(key)) is not None}
    unread = sorted(files - set(found))
    read = functools.partial(read_recording, objects=objects)
    spread = workers.spreads(len(unread))
    futures = [workers.submit(url, read, url, spread=spread) for url, _ in unread]
    for key, future in zip(unread, futures, strict=True):
        found[key] = future.result().schema_bytes()
        cache.put(key, found[key])
    distinct: dict[bytes, tuple[str, str, str]] = {}
    for segment_id, layer_name, url, size in zip(*columns, strict=True):
        distinct.setdefault(found[(url, size)], (segment_id, layer_name, url))
    for schema, (segment_id, layer_name, url) in distinct.items():
        try:
            merged = schemas.merge_serialized(merged, schema)
        except schemas.SchemaConflict as conflict:
            raise ValueError(f'segment "{segment_id}", layer "{layer_name}" ({url}) was registered without '
                             f"a schema, and its file's conflicts with the dataset's: {conflict}; "
                             "unregister it, or register the file with the SDK") from None
    return merged
