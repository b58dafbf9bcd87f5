"""Reading registered layers' files: byte ranges of a file, checked to be the file registered (its
size), for ``FetchChunks`` and for direct URLs."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import recordings
from protocol.chunk_keys import LayerRef


def changed(layer: LayerRef, size: int) -> recordings.RecordingChangedError:
    return recordings.RecordingChangedError(
        f'segment "{layer.segment_id}", layer "{layer.layer_name}": the recording at {layer.storage_url} has '
        f"{size} bytes, but {layer.size_bytes} were registered; layers are immutable, so register the new "
        "file (on_duplicate='replace')")


def read_ranges(layer: LayerRef, ranges: Sequence[tuple[int, int]],
                objects: recordings.ObjectStoreConfig) -> list[bytes]:
    """The bytes at each (offset, size) of ``layer``'s file, checked to be the file registered
    (its size). Raises ``NotFoundError`` for a file gone, ``RecordingChangedError`` for one
    changed, ``ObjectStoreError`` for an object store that fails."""
    if recordings.is_object_url(layer.storage_url):
        remote = recordings.object_store(objects).open(layer.storage_url)
        if remote.size != layer.size_bytes:
            raise changed(layer, remote.size)
        return remote.read_ranges(list(ranges))
    with _opened(layer) as descriptor:
        return [os.pread(descriptor, length, offset) for offset, length in ranges]


@contextmanager
def _opened(layer: LayerRef) -> Iterator[int]:
    """A descriptor of the local file of ``layer`` (a ``file://`` layer), open for reading while in
    the block, checked to be the file registered (its size). Raises ``NotFoundError`` for a file
    gone, ``RecordingChangedError`` for one changed."""
    try:
        descriptor = os.open(recordings.local_path(layer.storage_url), os.O_RDONLY)
    except FileNotFoundError:
        raise recordings.NotFoundError(
            f'segment "{layer.segment_id}", layer "{layer.layer_name}": the recording at {layer.storage_url} '
            "no longer exists; register it again or unregister the layer") from None
    try:
        size = os.fstat(descriptor).st_size
        if size != layer.size_bytes:
            raise changed(layer, size)
        yield descriptor
    finally:
        os.close(descriptor)
