"""The change feed the fold records: one entry per change, in log order, none for what changed
nothing, whatever the batch boundaries."""

from __future__ import annotations

import uuid

import pytest

from events import DeleteTable, Event, OnDuplicate
from projector import ChangeKind, DatasetKind, companion_id, companion_name, fold

from .conftest import (
    MemoryCatalog,
    at,
    create,
    create_table,
    delete,
    fold_into,
    register,
    register_blueprint,
    rename,
    set_default_blueprint,
    split,
    unregister,
    write,
)

K = ChangeKind


def entries(catalog: MemoryCatalog, *, hidden: bool = False) -> list[tuple]:
    """The feed as (offset, seq, kind, entry name, segment, layer, detail); the changes of hidden
    datasets only if asked for."""
    return [(c.position.offset, c.seq, c.kind, c.entry_name, c.segment_id, c.layer_name, c.detail)
            for c in catalog.feed if hidden or not c.entry_name.startswith(("__bp_", "__as_"))]


@pytest.fixture
def droid() -> uuid.UUID:
    return uuid.uuid4()


def test_registrations_renames_and_deletion_in_log_order(catalog, log, droid):
    fold_into(catalog, [
        log.append(create(droid, "droid")),
        log.append(register(droid, "ep1", url="file:///ep1.rrd")),
        log.append(register(droid, "ep1", "tracking", url="file:///ep1.t.rrd")),
        log.append(register(droid, "ep1", url="file:///ep1.v2.rrd", on_duplicate=OnDuplicate.REPLACE)),
        log.append(register(droid, "ep2", url="file:///ep2.rrd")),
        log.append(rename(droid, "robots")),
        log.append(unregister(droid, layer_names=["tracking"])),
        log.append(unregister(droid, segment_ids=["ep2"])),
        log.append(delete(droid)),
    ])
    assert entries(catalog) == [
        (0, 0, K.DATASET_CREATED, "droid", "", "", ""),
        (1, 0, K.LAYER_ADDED, "droid", "ep1", "base", "file:///ep1.rrd"),
        (1, 1, K.SEGMENT_ADDED, "droid", "ep1", "", ""),
        (2, 0, K.LAYER_ADDED, "droid", "ep1", "tracking", "file:///ep1.t.rrd"),
        (3, 0, K.LAYER_REPLACED, "droid", "ep1", "base", "file:///ep1.v2.rrd"),
        (4, 0, K.LAYER_ADDED, "droid", "ep2", "base", "file:///ep2.rrd"),
        (4, 1, K.SEGMENT_ADDED, "droid", "ep2", "", ""),
        (5, 0, K.DATASET_RENAMED, "robots", "", "", "droid"),
        (6, 0, K.LAYER_REMOVED, "robots", "ep1", "tracking", ""),
        (7, 0, K.LAYER_REMOVED, "robots", "ep2", "base", ""),
        (7, 1, K.SEGMENT_REMOVED, "robots", "ep2", "", ""),
        # A deletion removes what is left, children first.
        (8, 0, K.LAYER_REMOVED, "robots", "ep1", "base", ""),
        (8, 1, K.SEGMENT_REMOVED, "robots", "ep1", "", ""),
        (8, 2, K.DATASET_DELETED, "robots", "", "", ""),
    ]
    hidden = {companion_id(droid, DatasetKind.BLUEPRINT), companion_id(droid, DatasetKind.ASSET)}
    assert {c.entry_id for c in catalog.feed} == {droid, *hidden}


def test_a_deletion_removes_what_the_same_batch_registered(catalog, log, droid):
    fold_into(catalog, [log.append(create(droid, "droid")), log.append(register(droid, "ep1"))])
    fold_into(catalog, [log.append(register(droid, "ep2")), log.append(delete(droid))])
    assert [(c.kind, c.segment_id) for c in catalog.feed if c.position.offset == 3] == [
        (K.LAYER_REMOVED, "ep1"), (K.LAYER_REMOVED, "ep2"), (K.SEGMENT_REMOVED, "ep1"),
        (K.SEGMENT_REMOVED, "ep2"), (K.DATASET_DELETED, ""), (K.DATASET_DELETED, ""),
        (K.DATASET_DELETED, "")]  # the dataset, then its hidden blueprint and asset datasets


def test_what_changes_nothing_is_not_in_the_feed(catalog, log, droid):
    fold_into(catalog, [log.append(create(droid, "droid")), log.append(register(droid, "ep1"))])
    before = len(catalog.feed)
    duplicate = register(droid, "ep1", url="file:///other.rrd")
    fold_into(catalog, [
        log.append(create(uuid.uuid4(), "droid")),  # the name is taken: already_exists
        log.append(duplicate),  # on_duplicate=error: already_exists
        log.append(register(droid, "ep1", on_duplicate=OnDuplicate.SKIP)),
        log.append(unregister(droid, segment_ids=["nope"])),
        log.append(duplicate),  # the same event again: decided the first time
    ])
    assert len(catalog.feed) == before


def test_bad_input_is_a_rejection_with_its_reason(catalog, log, droid):
    missing = uuid.uuid4()
    fold_into(catalog, [
        log.append(create(droid, "droid")),
        log.append_raw(b"\x00garbage", reason="not an envelope"),
        log.append(register(missing, "ep1")),
        log.append(register(droid, "ep1", size_bytes=-1)),
    ])
    assert [(c.position.offset, c.kind, c.entry_id, c.entry_name, c.detail) for c in catalog.feed[3:]] == [
        (1, K.REJECTED, None, "", "not an envelope"),
        (2, K.REJECTED, missing, "", f"dataset {missing} does not exist"),
        (3, K.REJECTED, droid, "droid", "size_bytes must not be negative, got -1"),
    ]


def test_blueprints_and_tables(catalog, log, droid):
    labels = uuid.uuid4()
    fold_into(catalog, [
        log.append(create(droid, "droid")),
        log.append(register_blueprint(droid, "bp1", set_default=False)),
        log.append(register_blueprint(droid, "bp2")),
        log.append(set_default_blueprint(droid, None)),
        log.append(create_table(labels, "labels")),
        log.append(write(labels, "append", [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}])),
        log.append(write(labels, "upsert", [{"id": 1, "label": "c"}])),
        log.append(Event(labels, DeleteTable(), produced_at=at(0))),
    ])
    blueprints = companion_name(droid, DatasetKind.BLUEPRINT)
    labels_blueprints = companion_name(labels, DatasetKind.BLUEPRINT)
    assert entries(catalog, hidden=True) == [
        (0, 0, K.DATASET_CREATED, "droid", "", "", ""),
        (0, 1, K.DATASET_CREATED, blueprints, "", "", "blueprint"),
        (0, 2, K.DATASET_CREATED, companion_name(droid, DatasetKind.ASSET), "", "", "asset"),
        # A blueprint is a segment of the hidden blueprint dataset.
        (1, 0, K.LAYER_ADDED, blueprints, "bp1", "base", "file:///blueprints/bp1.rbl"),
        (1, 1, K.SEGMENT_ADDED, blueprints, "bp1", "", ""),
        (2, 0, K.LAYER_ADDED, blueprints, "bp2", "base", "file:///blueprints/bp2.rbl"),
        (2, 1, K.SEGMENT_ADDED, blueprints, "bp2", "", ""),
        (2, 2, K.DEFAULT_BLUEPRINT_SET, "droid", "", "", "bp2"),
        (3, 0, K.DEFAULT_BLUEPRINT_SET, "droid", "", "", ""),
        (4, 0, K.TABLE_CREATED, "labels", "", "", ""),
        (4, 1, K.DATASET_CREATED, labels_blueprints, "", "", "blueprint"),
        (5, 0, K.TABLE_ROWS_WRITTEN, "labels", "", "", "append 2 rows"),
        (6, 0, K.TABLE_ROWS_WRITTEN, "labels", "", "", "upsert 1 row"),
        (7, 0, K.TABLE_DELETED, "labels", "", "", ""),
        (7, 1, K.DATASET_DELETED, labels_blueprints, "", "", ""),
    ]


def test_a_refused_write_notes_only_its_rejection(catalog, log):
    labels = uuid.uuid4()
    fold_into(catalog, [log.append(create_table(labels, "labels"))])
    fold_into(catalog, [log.append(write(labels, "append", b"not arrow"))])
    assert [c.kind for c in catalog.feed] == [K.TABLE_CREATED, K.DATASET_CREATED, K.REJECTED]


@pytest.mark.parametrize("cuts", [[], [1], [2, 3], [1, 2, 3, 4, 5, 6]])
def test_the_feed_does_not_depend_on_batch_boundaries(log, droid, cuts):
    records = [
        log.append(create(droid, "droid", when=at(0))),
        log.append(register(droid, "ep1")),
        log.append(register(droid, "ep2")),
        log.append(register(droid, "ep1", on_duplicate=OnDuplicate.REPLACE)),
        log.append(unregister(droid, segment_ids=["ep2"])),
        log.append(rename(droid, "robots")),
        log.append(delete(droid)),
    ]
    whole = fold(MemoryCatalog(), records).feed
    catalog = MemoryCatalog()
    for batch in split(records, cuts):
        fold_into(catalog, batch)
    assert catalog.feed == whole


def test_every_entry_has_a_distinct_cursor_in_log_order(catalog, log, droid):
    fold_into(catalog, [log.append(create(droid, "droid"))] +
              [log.append(register(droid, f"ep{i}", layer)) for i in range(3) for layer in ("base", "x")] +
              [log.append(delete(droid))])
    cursors = [c.cursor for c in catalog.feed]
    assert cursors == sorted(set(cursors))
    assert all(c.seq == 0 or (c.position.offset, c.seq - 1) in cursors for c in catalog.feed)
