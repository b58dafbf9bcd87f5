"""Snapshots where users keep them: a local directory or an ``s3://bucket/prefix`` (``location``),
and the follower that writes one every N records the projector folds (``--snapshot-every``)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from changelog.follower import Follower
from events import CATALOG_TOPIC
from projector.stores import snapshots
from projector.stores.sql import SqlStore

log = logging.getLogger("strata.snapshots")


def location(where: str | Path) -> snapshots.Location:
    """``where`` as a snapshot location: ``s3://bucket/prefix`` through the same S3 settings as
    recordings (the AWS variables), anything else a local directory. ``ValueError`` for an
    ``s3://`` URL without a bucket."""
    text = str(where)
    if not text.startswith("s3://"):
        return snapshots.Location.of(Path(text))
    from recordings import ObjectStoreConfig, object_store, split

    bucket, key = split(text)
    return snapshots.Location(object_store(ObjectStoreConfig.resolve()).filesystem,
                              f"{bucket}/{key}".rstrip("/"), text.rstrip("/"))


class Snapshotter(Follower[SqlStore]):
    """Writes a snapshot of ``store`` into ``where`` each time the catalog topic has advanced
    ``every`` records past the last one, until ``stop()``. It reads the store like any client,
    so folding never waits for it; a snapshot that cannot be written is said once and tried again
    at the next commit."""

    thread_name = "strata-snapshots"

    def __init__(self, store: SqlStore, where: snapshots.Location, every: int) -> None:
        super().__init__(store)
        self.where = where
        self.every = every
        self.written: list[str] = []
        self._last: int | None = None
        """The offset of the newest snapshot in ``where``, once read."""
        self._failing: str | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            version = self.store.data_version()
            self.check()
            self.store.wait_for_commit(version, 0.5)

    def check(self) -> str | None:
        """Write a snapshot if one is due; returns its URL, or None."""
        started = time.monotonic()
        try:
            if self._last is None:
                newest = snapshots.newest(self.where)
                self._last = 0 if newest is None else _offset(newest)
            if self.store.next_offsets().get((CATALOG_TOPIC, 0), 0) < self._last + self.every:
                return None
            written = snapshots.write(self.store, self.where)
        except Exception as exc:  # noqa: BLE001 - any storage fault: said once, tried at the next commit
            reason = f"{type(exc).__name__}: {exc}"
            if reason != self._failing:
                log.warning("cannot write a snapshot into %s (%s); trying again at the next commit",
                            self.where.url, reason)
            self._failing = reason
            return None
        self._failing = None
        self._last = _offset(snapshots.Snapshot(written))
        self.written.append(written.url)
        log.info("snapshot %s written in %.1f s", written.url, time.monotonic() - started)
        return written.url


def _offset(snapshot: snapshots.Snapshot) -> int:
    return snapshot.next_offsets().get((CATALOG_TOPIC, 0), 0)
