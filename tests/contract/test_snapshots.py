"""A snapshot holds the store's rows exactly, on either backend: each reads its tables straight
into Arrow, in one transaction."""

from __future__ import annotations

import uuid

from projector import apply_batch
from projector.stores import postgres, snapshots, sqlite_arrow
from projector.stores.sql_schema import TABLES
from unit.conftest import create, register, register_blueprint
from unit.test_batch_boundaries import build_log


def test_a_snapshot_holds_every_row_of_every_table(store, tmp_path):
    # 1,100 datasets, the last with a default blueprint: a column null in a table's first
    # thousand rows, which a driver inferring types from its first rows would get wrong.
    ids = [uuid.UUID(int=n) for n in range(1, 1101)]
    apply_batch(store, build_log([*(create(d, f"d{n}") for n, d in enumerate(ids)),
                                  register_blueprint(ids[-1], "bp"), register(ids[0], "s1")]))
    written = snapshots.Snapshot(snapshots.write(store, tmp_path / "kept"))
    for table in TABLES:
        assert written.rows(table) == store.rows(table), table
    assert [row[7] for row in written.rows("datasets") if row[0] == str(ids[-1])] == ["bp"]


def test_a_snapshot_is_of_one_commit_while_the_projector_commits(store, monkeypatch):
    log = build_log([create(uuid.UUID(int=1), "alpha"), create(uuid.UUID(int=2), "beta")])
    apply_batch(store, log[:1])
    before = {table: store.rows(table) for table in TABLES}
    committed: list[bool] = []

    def commit_after_the_first_table(table, schema, convert=sqlite_arrow.as_schema):
        if not committed:  # the projector commits while the snapshot reads its tables
            committed.append(True)
            apply_batch(store, log[1:])
        return convert(table, schema)

    for backend in (sqlite_arrow, postgres):
        monkeypatch.setattr(backend, "as_schema", commit_after_the_first_table)
    tables = store.snapshot_tables()
    assert committed and len(store.rows("datasets")) > len(before["datasets"])
    for table, data in tables.items():
        assert list(zip(*data.to_pydict().values(), strict=True)) == before[table], table
