"""An object's byte ranges are read at once, each its own request, and their errors are the
object store's."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest

from recordings.errors import ObjectStoreError
from recordings.objects import RemoteObject


class Ranged:
    """A remote file whose ``read_at`` returns only once ``together`` reads are in flight, as a
    far-away object store's requests would when they overlap; one read at a time times out."""

    def __init__(self, data: bytes, together: int) -> None:
        self.data = data
        self.arrived = threading.Barrier(together, timeout=10)

    def size(self) -> int:
        return len(self.data)

    def read_at(self, size: int, offset: int) -> bytes:
        self.arrived.wait()
        return self.data[offset:offset + size]


@contextlib.contextmanager
def as_store_errors(uri: str) -> Iterator[None]:
    try:
        yield
    except threading.BrokenBarrierError as exc:
        raise ObjectStoreError(f"{uri}: not every range was requested at once") from exc


def test_ranges_are_in_flight_together() -> None:
    data = bytes(range(256)) * 4
    ranges = [(0, 16), (500, 24), (1000, 24)]
    remote = RemoteObject("s3://bucket/ep.rrd", Ranged(data, len(ranges)), as_store_errors)
    assert remote.read_ranges(ranges) == [data[o:o + s] for o, s in ranges]


def test_one_range_is_read_in_the_caller() -> None:
    remote = RemoteObject("s3://bucket/ep.rrd", Ranged(b"abcdef", 1), as_store_errors)
    assert remote.read_ranges([(2, 3)]) == [b"cde"]


def test_a_failed_range_is_the_object_store_s_error() -> None:
    remote = RemoteObject("s3://bucket/ep.rrd", Ranged(b"abcdef", 3), as_store_errors)
    remote.file.arrived = threading.Barrier(3, timeout=0.5)  # only two of three ever arrive
    with pytest.raises(ObjectStoreError, match="not every range"):
        remote.read_ranges([(0, 1), (1, 1)])
