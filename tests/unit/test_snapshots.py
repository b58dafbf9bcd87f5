"""Snapshots kept where the projector writes them: one every N records folded, resumed from the
newest already there; a snapshot left without its manifest is never read."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from changelog.snapshots import Snapshotter, location
from projector import apply_batch
from projector.stores import snapshots
from projector.stores.sqlite import SqliteStore

from .conftest import create, register
from .test_batch_boundaries import DATASET_IDS, TOPIC, build_log

D = DATASET_IDS[0]
LOG = build_log([create(D, "alpha"), *(register(D, f"s{i}") for i in range(9))])


def offsets(kept: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("snapshot-")) for p in kept.glob("snapshot-*"))


def test_the_projector_writes_a_snapshot_each_time_n_more_records_are_folded(tmp_path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    kept = location(tmp_path / "kept")
    snapshotter = Snapshotter(SqliteStore(tmp_path / "store.db", read_only=True), kept, every=4)
    written = []
    for end in range(1, len(LOG) + 1):  # one commit per record
        apply_batch(store, LOG[end - 1:end])
        written.append(snapshotter.check())
    assert offsets(tmp_path / "kept") == [4, 8]
    assert [w for w in written if w] == [f"{kept.url}/snapshot-{n:012d}" for n in (4, 8)]
    # A projector started again goes on from the newest snapshot there, not from nothing.
    again = Snapshotter(SqliteStore(tmp_path / "store.db", read_only=True), kept, every=4)
    assert again.check() is None
    apply_batch(store, build_log([create(D, "alpha"), *(register(D, f"s{i}") for i in range(11))])[10:])
    assert again.check() is not None and offsets(tmp_path / "kept") == [4, 8, 12]
    store.close()


def test_a_snapshot_that_cannot_be_written_is_said_once_and_written_at_a_later_commit(
        tmp_path, caplog) -> None:
    store = SqliteStore(tmp_path / "store.db")
    blocked = tmp_path / "kept"
    blocked.write_text("a file where the snapshots should go")
    snapshotter = Snapshotter(SqliteStore(tmp_path / "store.db", read_only=True), location(blocked), every=2)
    with caplog.at_level(logging.WARNING, logger="strata.snapshots"):
        for end in range(1, 5):
            apply_batch(store, LOG[end - 1:end])
            assert snapshotter.check() is None
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and f"cannot write a snapshot into {blocked}" in warnings[0]
    blocked.unlink()
    assert snapshotter.check() == f"{blocked}/snapshot-{4:012d}"
    store.close()


def test_a_snapshot_without_its_manifest_is_never_read(tmp_path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, LOG[:3])
    first = Path(snapshots.write(store, tmp_path / "kept").path)
    apply_batch(store, LOG[3:])
    second = Path(snapshots.write(store, tmp_path / "kept").path)
    store.close()
    (second / snapshots.MANIFEST).unlink()  # as a writer stopped before its last file leaves it
    shutil.copytree(first, tmp_path / "kept" / ".snapshot-000000000099-partial")
    found = snapshots.newest(tmp_path / "kept")
    assert found is not None and found.url == str(first)
    assert found.next_offsets() == {(TOPIC, 0): 3}


def test_writing_a_snapshot_tells_its_progress_in_rows_written(tmp_path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    apply_batch(store, LOG)
    told: list[tuple[int, int]] = []
    written = snapshots.write(store, tmp_path / "kept",
                              progress=lambda done, total: told.append((done, total)))
    rows = sum(snapshots.Snapshot(written).manifest["tables"].values())
    assert rows > len(LOG) and told[0] == (0, rows) and told[-1] == (rows, rows)
    assert [done for done, _ in told] == sorted(done for done, _ in told) and len(told) > 2
    assert {total for _, total in told} == {rows}
    again: list[tuple[int, int]] = []  # the same offset again: kept as it is, and said to be whole
    snapshots.write(store, tmp_path / "kept", progress=lambda done, total: again.append((done, total)))
    assert again == [(0, rows), (rows, rows)]
    store.close()
