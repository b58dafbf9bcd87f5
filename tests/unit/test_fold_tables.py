"""The fold's rules for table entries: names shared with datasets, writes checked against the
schema, upserts by index in log order, writes in parts applied all together or not at all."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from events import DeleteTable, Event, RegisterTable, RenameDataset, RenameTable
from projector import Status

from .conftest import Log, MemoryCatalog, at, create, create_table, fold_into, rows_ipc, write

PLAIN = pa.schema([("id", pa.int64()), ("label", pa.string())])


def run(*events: Event) -> tuple[MemoryCatalog, list[Status], list[str]]:
    log = Log()
    for event in events:
        log.append(event)
    catalog = MemoryCatalog()
    changes = fold_into(catalog, log.records)
    outcomes = [changes.outcomes[e.event_id] for e in events]
    return catalog, [o.status for o in outcomes], [o.reason for o in outcomes]


def rows(catalog: MemoryCatalog, table_id: uuid.UUID) -> list[tuple]:
    return [(r["id"], r["label"]) for r in catalog.rows[table_id].to_pylist()]


def test_entry_names_are_shared_by_datasets_and_tables_and_ids_are_never_reused():
    d, t, u = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    _, statuses, reasons = run(
        create(d, "droid"), create_table(t, "droid"), create_table(t, "labels"), create(u, "labels"),
        create_table(d, "other"), Event(t, DeleteTable()), create(u, "labels"), create_table(t, "again"))
    assert statuses == [Status.ACCEPTED, Status.ALREADY_EXISTS, Status.ACCEPTED, Status.ALREADY_EXISTS,
                        Status.INVALID, Status.ACCEPTED, Status.ACCEPTED, Status.INVALID]
    assert "a dataset named 'droid'" in reasons[1] and "a table named 'labels'" in reasons[3]
    assert "never reused" in reasons[4] and "never reused" in reasons[7]


def test_the_system_tables_name_is_taken_for_every_entry():
    d, t = uuid.uuid4(), uuid.uuid4()
    catalog, statuses, reasons = run(create(d, "__entries"), create_table(t, "__entries"), create(d, "droid"),
                                     Event(d, RenameDataset("__entries")))
    assert statuses == [Status.ALREADY_EXISTS, Status.ALREADY_EXISTS, Status.ACCEPTED, Status.ALREADY_EXISTS]
    assert "system table" in reasons[0]
    assert catalog.dataset(d).name == "droid" and catalog.table(t) is None


def test_rename_checks_names_of_both_kinds():
    d, t = uuid.uuid4(), uuid.uuid4()
    catalog, statuses, _ = run(create(d, "droid"), create_table(t, "labels"), Event(t, RenameTable("droid")),
                               Event(t, RenameTable("bad/name")), Event(t, RenameTable("runs")))
    assert statuses[2:] == [Status.ALREADY_EXISTS, Status.INVALID, Status.ACCEPTED]
    assert catalog.table_by_name("runs").id == t and catalog.table_by_name("labels") is None


def test_upsert_replaces_by_index_in_log_order_and_the_last_duplicate_of_a_call_wins():
    t = uuid.uuid4()
    catalog, statuses, _ = run(
        create_table(t, "labels"),
        write(t, "append", [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}], when=at(9)),
        write(t, "upsert", [{"id": 2, "label": "x"}, {"id": 3, "label": "y"}, {"id": 2, "label": "z"}],
              when=at(1)),  # an older clock changes nothing: log order decides
    )
    assert statuses == [Status.ACCEPTED] * 3
    assert rows(catalog, t) == [(1, "a"), (3, "y"), (2, "z")]
    assert catalog.tables[t].revision == 2


def test_overwrite_replaces_every_row():
    t = uuid.uuid4()
    catalog, _, _ = run(create_table(t, "labels"), write(t, "append", [{"id": 1, "label": "a"}]),
                        write(t, "overwrite", [{"id": 5, "label": "e"}]))
    assert rows(catalog, t) == [(5, "e")]


@pytest.mark.parametrize(("data", "words"), [
    (rows_ipc(pa.table({"id": pa.array([1], pa.int32()), "label": ["a"]})),
     ["'id' has type int32, the table's is int64"]),
    (rows_ipc(pa.table({"id": [1]})), ["missing column 'label'"]),
    (rows_ipc(pa.table({"id": [1], "label": ["a"], "x": [1.0]})), ["'x' is not in the table"]),
    (rows_ipc(pa.table({"label": ["a"], "id": [1]})), ["order"]),
    (rows_ipc([{"id": None, "label": "a"}], PLAIN), ["'id' may not be null"]),
    (b"not arrow", ["not an Arrow IPC stream"]),
])
def test_rows_that_do_not_fit_the_schema_are_refused_and_write_nothing(data, words):
    t = uuid.uuid4()
    catalog, statuses, reasons = run(create_table(t, "labels"), write(t, "append", [{"id": 1, "label": "a"}]),
                                     write(t, "upsert", data))
    assert statuses[2] is Status.INVALID
    for word in words:
        assert word in reasons[2]
    assert rows(catalog, t) == [(1, "a")]
    assert catalog.rejections[-1].event_id is not None  # kept with its bytes, as bad input


def test_upsert_needs_an_index_column_and_registered_tables_are_read_only():
    t, lance = uuid.uuid4(), uuid.uuid4()
    register = RegisterTable("lance", "file:///data/l.lance", PLAIN.serialize().to_pybytes(), 3)
    _, statuses, reasons = run(create_table(t, "plain", PLAIN), write(t, "upsert", [{"id": 1, "label": "a"}]),
                               Event(lance, register), write(lance, "append", [{"id": 1, "label": "a"}]))
    assert statuses == [Status.ACCEPTED, Status.INVALID, Status.ACCEPTED, Status.INVALID]
    assert "no index column" in reasons[1] and "read" in reasons[3]


def test_a_write_in_parts_applies_all_together_when_its_last_part_arrives():
    t = uuid.uuid4()
    catalog, statuses, _ = run(
        create_table(t, "labels"),
        write(t, "append", [{"id": 1, "label": "a"}], write_id="w", part=0, parts=3),
        write(t, "append", [{"id": 2, "label": "b"}], write_id="w", part=1, parts=3))
    assert statuses == [Status.ACCEPTED] * 3
    assert t not in catalog.rows and len(catalog.table_parts(t, "w")) == 2
    last = write(t, "append", [{"id": 3, "label": "c"}], write_id="w", part=2, parts=3)
    changes = fold_into(catalog, [Log(records=[None] * 3).append(last)])
    assert changes.outcomes[last.event_id].status is Status.ACCEPTED
    assert rows(catalog, t) == [(1, "a"), (2, "b"), (3, "c")]
    assert catalog.table_parts(t, "w") == []


@pytest.mark.parametrize("parts", [
    [(0, 3, "a"), (2, 3, "c")],  # a part missing
    [(1, 2, "b"), (0, 2, "a")],  # out of order
    [(0, 2, "a"), (1, 2, None)],  # a bad part
    [(0, 3, "a"), (1, 2, "b")],  # another count
])
def test_a_write_in_parts_with_a_part_missing_or_bad_writes_nothing(parts):
    t = uuid.uuid4()
    events = [write(t, "append", b"bad" if label is None else [{"id": n, "label": label}], write_id="w",
                    part=n, parts=count) for n, count, label in parts]
    catalog, statuses, _ = run(create_table(t, "labels"), *events)
    assert Status.INVALID in statuses
    assert t not in catalog.rows  # nothing of the write, whatever came first
    assert len(catalog.table_parts(t, "w")) <= 1  # at most a new part 0, waiting for its write


def test_deleting_a_table_drops_its_rows_and_its_open_writes():
    t = uuid.uuid4()
    catalog, statuses, _ = run(create_table(t, "labels"), write(t, "append", [{"id": 1, "label": "a"}]),
                               write(t, "append", [{"id": 2, "label": "b"}], write_id="w", parts=2),
                               Event(t, DeleteTable()), write(t, "append", [{"id": 3, "label": "c"}]))
    assert statuses[-1] is Status.NOT_FOUND
    assert catalog.tables[t].deleted and t not in catalog.rows and not catalog.parts
