"""The fold's domain rules, on plain Python objects (MemoryCatalog, LogRecord)."""

from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from events import CATALOG_TOPIC, OnDuplicate
from events.names import MAX_ID_LENGTH
from projector import (
    Dataset,
    LogPosition,
    LogRecord,
    Rejection,
    Status,
    fold,
    log_order,
)
from projector.fold import MAX_NAME_LENGTH, MAX_PROPERTIES_BYTES

from .conftest import (
    T0,
    Log,
    MemoryCatalog,
    at,
    create,
    fold_into,
    log_record,
    register,
    split,
    undecodable,
    unregister,
)

ERROR, SKIP, REPLACE = OnDuplicate.ERROR, OnDuplicate.SKIP, OnDuplicate.REPLACE


@pytest.fixture
def dataset_id() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def with_dataset(catalog: MemoryCatalog, log: Log, dataset_id: uuid.UUID) -> MemoryCatalog:
    """A catalog holding one dataset, 'droid', created at offset 0 of the catalog topic."""
    fold_into(catalog, [log.append(create(dataset_id, "droid"))])
    assert catalog.dataset(dataset_id) is not None
    return catalog


# -- datasets -------------------------------------------------------------------------------------


def test_create_dataset_is_accepted(catalog, dataset_id):
    event = create(dataset_id, "droid", when=at(3))
    record = log_record(event, offset=0)

    changes = fold(catalog, [record])

    assert changes.datasets[dataset_id] == Dataset(dataset_id, "droid", at(3), at(3))
    assert len(changes.datasets) == 3  # with its hidden blueprint and asset datasets
    outcome = changes.outcomes[event.event_id]
    assert (outcome.status, outcome.reason, outcome.position) == (
        Status.ACCEPTED, "", LogPosition(CATALOG_TOPIC, 0, 0))
    assert changes.rejections == []
    assert changes.next_offsets == {(CATALOG_TOPIC, 0): 1}


def test_fold_does_not_modify_the_view(with_dataset, log, dataset_id):
    before = with_dataset.snapshot()
    fold(with_dataset, [log.append(register(dataset_id, "seg")),
                        log.append(create(uuid.uuid4(), "other"))])
    assert with_dataset.snapshot() == before


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_duplicate_dataset_name_already_exists(catalog, log, same_batch):
    first_id, second_id = uuid.uuid4(), uuid.uuid4()
    first = log.append(create(first_id, "droid"))
    second_event = create(second_id, "droid", when=at(-10))  # an earlier clock changes nothing
    second = log.append(second_event)

    if same_batch:
        fold_into(catalog, [first, second])
    else:
        fold_into(catalog, [first])
        fold_into(catalog, [second])

    outcome = catalog.outcomes[second_event.event_id]
    assert outcome.status is Status.ALREADY_EXISTS
    assert outcome.reason.startswith("already exists"), outcome.reason
    assert outcome.position == second.position
    assert second_id not in catalog.datasets
    assert catalog.rejections == []  # a conflict is an outcome, not bad input
    assert catalog.dataset_by_name("droid").id == first_id


@pytest.mark.parametrize("name", ["", "x" * (MAX_NAME_LENGTH + 1)], ids=["empty", "too-long"])
def test_invalid_dataset_name_is_invalid_and_a_rejection(catalog, dataset_id, name):
    event = create(dataset_id, name)
    record = log_record(event, offset=4)

    changes = fold(catalog, [record])

    assert changes.datasets == {}
    [rejection] = changes.rejections
    assert rejection.position == record.position
    assert rejection.raw == record.raw
    assert rejection.event_id == event.event_id
    assert rejection.reason
    outcome = changes.outcomes[event.event_id]
    assert outcome.status is Status.INVALID
    assert outcome.reason == rejection.reason
    assert changes.next_offsets == {(CATALOG_TOPIC, 0): 5}


def test_longest_allowed_name_is_accepted(catalog, dataset_id):
    event = create(dataset_id, "n" * MAX_NAME_LENGTH)
    changes = fold(catalog, [log_record(event, 0)])
    assert changes.outcomes[event.event_id].status is Status.ACCEPTED
    assert dataset_id in changes.datasets


def test_same_dataset_id_created_twice_is_invalid(catalog, log, dataset_id):
    fold_into(catalog, [log.append(create(dataset_id, "droid"))])
    again = create(dataset_id, "another name")
    fold_into(catalog, [log.append(again)])

    outcome = catalog.outcomes[again.event_id]
    assert outcome.status is Status.INVALID
    assert "never reused" in outcome.reason
    assert [r.event_id for r in catalog.rejections] == [again.event_id]
    assert catalog.datasets[dataset_id].name == "droid"
    assert catalog.dataset_by_name("another name") is None


# -- registering layers ---------------------------------------------------------------------------


def test_register_to_unknown_dataset_is_not_found_and_a_rejection(catalog):
    unknown = uuid.uuid4()
    event = register(unknown, "seg")
    record = log_record(event, offset=7)

    changes = fold(catalog, [record])

    assert changes.layers == {} and changes.segments == {} and changes.datasets == {}
    assert changes.rejections == [
        Rejection(record.position, record.raw, changes.rejections[0].reason, event.event_id)]
    assert str(unknown) in changes.rejections[0].reason
    outcome = changes.outcomes[event.event_id]
    assert outcome.status is Status.NOT_FOUND
    assert "does not exist" in outcome.reason
    assert changes.next_offsets == {(CATALOG_TOPIC, 0): 8}


@pytest.mark.parametrize("field, value, named", [
    ("segment_id", "", "segment_id"),
    ("segment_id", "s" * (MAX_ID_LENGTH + 1), "segment_id"),
    ("layer_name", "", "layer name"),
    ("layer_name", "n" * (MAX_NAME_LENGTH + 1), "layer name"),
    ("storage_url", "", "storage_url"),
    ("storage_url", "file:///" + "u" * MAX_ID_LENGTH, "storage_url"),
    ("size_bytes", -1, "size_bytes"),
    ("properties", b"p" * (MAX_PROPERTIES_BYTES + 1), "properties"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_invalid_register_command_is_invalid_and_a_rejection(with_dataset, log, dataset_id, field, value,
                                                            named):
    valid = register(dataset_id, "seg")
    event = dataclasses.replace(valid, command=dataclasses.replace(valid.command, **{field: value}))
    record = log.append(event)

    changes = fold(with_dataset, [record])

    assert changes.layers == {} and changes.segments == {} and changes.datasets == {}
    assert [(r.event_id, r.position) for r in changes.rejections] == [
        (event.event_id, record.position)]
    assert named in changes.rejections[0].reason
    assert changes.outcomes[event.event_id].status is Status.INVALID


def test_longest_allowed_segment_id_layer_name_and_url_are_accepted(with_dataset, log, dataset_id):
    event = register(dataset_id, "s" * MAX_ID_LENGTH, "n" * MAX_NAME_LENGTH,
                     url="u" * MAX_ID_LENGTH, properties=b"p" * MAX_PROPERTIES_BYTES)
    fold_into(with_dataset, [log.append(event)])
    assert with_dataset.outcomes[event.event_id].status is Status.ACCEPTED
    assert with_dataset.layer(dataset_id, "s" * MAX_ID_LENGTH, "n" * MAX_NAME_LENGTH) is not None


def test_layers_of_a_segment_are_in_registration_order(with_dataset, log, dataset_id):
    names = ["zeta", "alpha", "mid"]
    records = [log.append(register(dataset_id, "seg", name)) for name in names]
    records.insert(1, log.append(register(dataset_id, "other", "base")))
    fold_into(with_dataset, records)

    assert [x.layer_name for x in with_dataset.ordered_layers(dataset_id, "seg")] == names
    seg = with_dataset.segment(dataset_id, "seg")
    other = with_dataset.segment(dataset_id, "other")
    assert seg.created_by == records[0].position
    assert other.created_by == records[1].position
    assert seg.created_by < other.created_by
    layer = with_dataset.layer(dataset_id, "seg", "alpha")
    assert layer.registered_by == records[2].position
    assert layer.storage_url == "file:///data/seg.alpha.rrd"
    assert all(o.status is Status.ACCEPTED for o in with_dataset.outcomes.values())


def test_segments_take_the_next_position_of_their_dataset(with_dataset, log, dataset_id):
    fold_into(with_dataset, [log.append(register(dataset_id, "s1")), log.append(register(dataset_id, "s2")),
                             log.append(register(dataset_id, "s1", "extra"))])
    fold_into(with_dataset, [log.append(unregister(dataset_id, ["s1"])),
                             log.append(register(dataset_id, "s1"))])  # created again: a new position

    assert [with_dataset.segment(dataset_id, s).position for s in ("s1", "s2")] == [2, 1]
    assert with_dataset.dataset(dataset_id).segments_created == 3


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_on_duplicate_error_first_in_log_order_wins(with_dataset, log, dataset_id, same_batch):
    first = log.append(register(dataset_id, "seg", url="file:///first.rrd", when=at(10)))
    # A later record with an earlier clock: log order decides, never the clock.
    later_event = register(dataset_id, "seg", url="file:///later.rrd", when=at(1),
                           on_duplicate=ERROR)
    later = log.append(later_event)

    if same_batch:
        fold_into(with_dataset, [later, first])  # given out of order: log_order sorts them
    else:
        fold_into(with_dataset, [first])
        fold_into(with_dataset, [later])

    layer = with_dataset.layer(dataset_id, "seg", "base")
    assert layer.storage_url == "file:///first.rrd"
    assert layer.registered_by == first.position
    assert layer.event_id == first.event.event_id
    outcome = with_dataset.outcomes[later_event.event_id]
    assert outcome.status is Status.ALREADY_EXISTS
    assert "already exists" in outcome.reason
    assert '"seg"' in outcome.reason and '"base"' in outcome.reason
    assert with_dataset.rejections == []


def test_on_duplicate_error_rejection_changes_nothing(with_dataset, log, dataset_id):
    fold_into(with_dataset, [log.append(register(dataset_id, "seg", when=at(1)))])
    before = with_dataset.snapshot()

    later = register(dataset_id, "seg", url="file:///later.rrd", when=at(50))
    changes = fold(with_dataset, [log.append(later)])

    assert changes.layers == {} and changes.segments == {} and changes.datasets == {}
    assert changes.outcomes[later.event_id].status is Status.ALREADY_EXISTS
    assert changes.rejections == [] and changes.schemas == {}
    with_dataset.apply(changes)
    after = with_dataset.snapshot()
    assert after["datasets"] == before["datasets"]
    assert after["layers"] == before["layers"]


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_on_duplicate_skip_is_accepted_and_changes_nothing(with_dataset, log, dataset_id,
                                                           same_batch):
    first = log.append(register(dataset_id, "seg", url="file:///first.rrd", size_bytes=1))
    skip_event = register(dataset_id, "seg", url="file:///skip.rrd", size_bytes=99,
                          when=at(100), on_duplicate=SKIP)
    skip = log.append(skip_event)

    if same_batch:
        fold_into(with_dataset, [first, skip])
    else:
        fold_into(with_dataset, [first])
        before = with_dataset.snapshot()
        changes = fold(with_dataset, [skip])
        assert changes.layers == {} and changes.segments == {} and changes.datasets == {}
        assert changes.rejections == []
        with_dataset.apply(changes)
        assert with_dataset.snapshot()["datasets"] == before["datasets"]

    outcome = with_dataset.outcomes[skip_event.event_id]
    assert (outcome.status, outcome.reason) == (Status.ACCEPTED, "")
    layer = with_dataset.layer(dataset_id, "seg", "base")
    assert (layer.storage_url, layer.size_bytes, layer.registered_by) == (
        "file:///first.rrd", 1, first.position)
    assert with_dataset.datasets[dataset_id].updated_at == T0  # not the skip's clock


def test_on_duplicate_skip_of_a_new_layer_registers_it(with_dataset, log, dataset_id):
    event = register(dataset_id, "seg", on_duplicate=SKIP)
    fold_into(with_dataset, [log.append(event)])
    assert with_dataset.layer(dataset_id, "seg", "base").event_id == event.event_id


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_on_duplicate_replace_last_in_log_order_wins(with_dataset, log, dataset_id, same_batch):
    base = log.append(register(dataset_id, "seg", "base", url="file:///v1.rrd", when=at(5)))
    extra = log.append(register(dataset_id, "seg", "extra", when=at(6)))
    # The replacement's clock is older than both: log order decides, never the clock.
    replace_event = register(dataset_id, "seg", "base", url="file:///v2.rrd", size_bytes=77,
                             when=at(1), on_duplicate=REPLACE)
    replacement = log.append(replace_event)

    if same_batch:
        fold_into(with_dataset, [replacement, extra, base])
    else:
        fold_into(with_dataset, [base, extra])
        fold_into(with_dataset, [replacement])

    layer = with_dataset.layer(dataset_id, "seg", "base")
    assert (layer.storage_url, layer.size_bytes) == ("file:///v2.rrd", 77)
    assert layer.registered_by == replacement.position
    assert layer.event_id == replace_event.event_id
    assert layer.registered_at == at(1)
    # The replaced layer moves to the end of the segment.
    assert [x.layer_name for x in with_dataset.ordered_layers(dataset_id, "seg")] == [
        "extra", "base"]
    segment = with_dataset.segment(dataset_id, "seg")
    assert segment.created_by == base.position  # the segment itself keeps its place
    assert segment.updated_at == at(6)  # max of the clocks, never moved back
    assert with_dataset.datasets[dataset_id].updated_at == at(6)
    assert with_dataset.outcomes[replace_event.event_id].status is Status.ACCEPTED


def test_replace_twice_keeps_the_last(with_dataset, log, dataset_id):
    records = [log.append(register(dataset_id, "seg", url=f"file:///v{i}.rrd", on_duplicate=REPLACE))
               for i in range(4)]
    fold_into(with_dataset, records[:2])
    fold_into(with_dataset, records[2:])
    layer = with_dataset.layer(dataset_id, "seg", "base")
    assert layer.storage_url == "file:///v3.rrd"
    assert layer.registered_by == records[-1].position


# -- undecodable records, offsets, duplicates, ordering -------------------------------------------


def test_undecodable_record_is_kept_with_its_raw_bytes(catalog):
    raw = b"\x00\x01not avro at all\xff"
    record = undecodable(raw, offset=41, partition=1, reason="x")

    changes = fold(catalog, [record])

    assert changes.rejections == [Rejection(LogPosition(CATALOG_TOPIC, 1, 41), raw, "x", None)]
    assert changes.outcomes == {}
    assert changes.next_offsets == {(CATALOG_TOPIC, 1): 42}


def test_undecodable_record_without_reason_still_gets_one(catalog):
    record = LogRecord(LogPosition(CATALOG_TOPIC, 0, 3), b"??")
    [rejection] = fold(catalog, [record]).rejections
    assert rejection.reason  # never an empty reason
    assert rejection.raw == b"??"


def test_next_offset_covers_every_record_including_rejected_ones(with_dataset, log, dataset_id):
    records = [
        log.append(create(uuid.uuid4(), "droid")),  # 1: name taken
        log.append(create(uuid.uuid4(), "")),  # 2: invalid
        log.append(register(dataset_id, "a")),  # 3: accepted
        log.append(register(dataset_id, "a")),  # 4: duplicate
        log.append_raw(b"junk"),  # 5: undecodable
        log.append(register(uuid.uuid4(), "b")),  # 6: unknown dataset
        log.append(register(dataset_id, "c", on_duplicate=SKIP)),  # 7: accepted
    ]
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)

    changes = fold(with_dataset, shuffled)

    assert changes.next_offsets == {(CATALOG_TOPIC, 0): 8}
    assert [r.position.offset for r in changes.rejections] == [2, 5, 6]
    assert len(changes.outcomes) == 6


def test_next_offsets_are_kept_per_partition(catalog):
    # strata writes one partition, but the fold keeps every (topic, partition) it is given apart.
    records = [undecodable(b"a", 4, partition=1), undecodable(b"b", 9), undecodable(b"c", 2)]
    assert fold(catalog, records).next_offsets == {(CATALOG_TOPIC, 0): 10, (CATALOG_TOPIC, 1): 5}


def test_next_offset_follows_gaps_in_offsets(catalog):
    # Offsets need not be contiguous (Kafka transaction markers leave gaps).
    records = [undecodable(b"a", 10), undecodable(b"b", 13), undecodable(b"c", 20)]
    assert fold(catalog, records[::-1]).next_offsets == {(CATALOG_TOPIC, 0): 21}


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_same_event_twice_is_decided_once(with_dataset, log, dataset_id, same_batch):
    event = register(dataset_id, "seg", url="file:///a.rrd", on_duplicate=REPLACE)
    first = log.append(event)
    log.append(register(dataset_id, "seg", url="file:///b.rrd", on_duplicate=REPLACE))
    again = log.append(event)  # the same event appended again, e.g. by a retrying client

    if same_batch:
        fold_into(with_dataset, log.records[1:])
    else:
        fold_into(with_dataset, log.records[1:3])
        fold_into(with_dataset, [again])

    # Decided at its first position; the re-append does not replace the layer again.
    assert with_dataset.outcomes[event.event_id].position == first.position
    layer = with_dataset.layer(dataset_id, "seg", "base")
    assert layer.storage_url == "file:///b.rrd"
    assert layer.registered_by == log.records[2].position
    assert with_dataset.next_offsets[(CATALOG_TOPIC, 0)] == again.position.offset + 1


def test_same_create_twice_is_decided_once(catalog):
    event = create(uuid.uuid4(), "droid")
    changes = fold(catalog, [log_record(event, 0), log_record(event, 1)])
    assert changes.outcomes[event.event_id].status is Status.ACCEPTED
    assert changes.outcomes[event.event_id].position.offset == 0
    assert changes.rejections == []


def test_log_order_is_topic_partition_offset():
    def rec(topic, partition, offset):
        return undecodable(b"", offset, topic=topic, partition=partition)

    expected = [rec("a.topic", 0, 5), rec(CATALOG_TOPIC, 0, 0), rec(CATALOG_TOPIC, 0, 1),
                rec(CATALOG_TOPIC, 0, 2), rec(CATALOG_TOPIC, 0, 10), rec(CATALOG_TOPIC, 1, 1)]
    shuffled = expected[:]
    random.Random(3).shuffle(shuffled)
    assert shuffled != expected
    assert [r.position for r in log_order(shuffled)] == [r.position for r in expected]


def test_create_and_register_in_one_batch_given_layers_first(catalog, log, dataset_id):
    create_record = log.append(create(dataset_id, "droid"))
    register_record = log.append(register(dataset_id, "seg"))

    changes = fold(catalog, [register_record, create_record])

    assert changes.outcomes[register_record.event.event_id].status is Status.ACCEPTED
    assert (dataset_id, "seg", "base") in changes.layers
    assert changes.rejections == []


# -- batch boundaries -----------------------------------------------------------------------------


def _history(dataset_id: uuid.UUID) -> list[LogRecord]:
    """One dataset's create and a mix of layer events, all on the catalog topic."""
    log = Log()
    log.append(create(dataset_id, "droid", when=at(0)))
    replayed = register(dataset_id, "seg1", "base", url="file:///v2.rrd", when=at(0.5),
                        on_duplicate=REPLACE)
    log.append(register(dataset_id, "seg1", "base", url="file:///v1.rrd", when=at(1)))
    log.append(register(dataset_id, "seg1", "extra", when=at(2)))
    log.append(register(dataset_id, "seg2", "base", when=at(3)))
    log.append(register(dataset_id, "seg1", "base", url="file:///dup.rrd", when=at(4)))
    log.append(register(dataset_id, "seg1", "base", url="file:///skip.rrd", when=at(5),
                        on_duplicate=SKIP))
    log.append(replayed)
    log.append_raw(b"\xc3\x01garbage")
    log.append(register(dataset_id, "seg2", "base", url="file:///seg2.v2.rrd", when=at(7),
                        on_duplicate=REPLACE))
    log.append(register(dataset_id, "seg1", "extra", url="file:///x.rrd", when=at(8),
                        on_duplicate=SKIP))
    log.append(replayed)  # the same event id again
    log.append(register(dataset_id, "seg3", "base", when=at(9), on_duplicate=REPLACE))
    log.append(register(uuid.uuid4(), "seg4", "base", when=at(10)))  # unknown dataset
    log.append(register(dataset_id, "seg1", "extra", url="file:///y.rrd", when=at(11)))
    log.append(register(dataset_id, "seg1", "base", url="file:///v3.rrd", when=at(2.5),
                        on_duplicate=REPLACE))
    log.append(register(dataset_id, "", "base", when=at(12)))  # invalid
    return log.records


def _fold_in_batches(batches: list[list[LogRecord]]) -> MemoryCatalog:
    catalog = MemoryCatalog()
    for batch in batches:
        fold_into(catalog, batch)
    return catalog


@pytest.mark.parametrize("cuts", [
    [1], [5], [3, 9], [4, 5, 6], [10, 11, 12], list(range(1, 16)),
], ids=lambda cuts: "cuts-" + "-".join(map(str, cuts)))
def test_batch_boundaries_do_not_change_the_result(cuts):
    dataset_id = uuid.uuid4()
    records = _history(dataset_id)
    assert len(records) == 16

    whole = _fold_in_batches([records])
    in_batches = _fold_in_batches(split(records, cuts))

    # The history is not trivial: the replacements, duplicates and rejections did happen.
    assert [x.layer_name for x in whole.ordered_layers(dataset_id, "seg1")] == ["extra", "base"]
    assert whole.layer(dataset_id, "seg1", "base").storage_url == "file:///v3.rrd"
    assert whole.layer(dataset_id, "seg2", "base").storage_url == "file:///seg2.v2.rrd"
    assert whole.layer(dataset_id, "seg1", "extra").storage_url == "file:///data/seg1.extra.rrd"
    assert len(whole.rejections) == 3  # garbage, unknown dataset, empty segment id
    statuses = [o.status for o in whole.outcomes.values()]
    assert (statuses.count(Status.ALREADY_EXISTS), statuses.count(Status.NOT_FOUND),
            statuses.count(Status.INVALID)) == (2, 1, 1)

    assert in_batches.snapshot() == whole.snapshot()
    assert whole.next_offsets == {(CATALOG_TOPIC, 0): 16}
