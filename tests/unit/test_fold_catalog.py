"""The fold's catalog commands: rename, delete, unregister, hidden datasets and blueprints, on a
MemoryCatalog."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from events import (
    AssetMode,
    AssetScopeEdit,
    DeleteTable,
    Event,
    IndexKind,
    IndexRange,
    OnDuplicate,
    ScopeAsset,
    SetDefaultBlueprint,
)
from projector import ChangeKind, DatasetKind, LogRecord, Status, companion_id, companion_name, fold

from .conftest import (
    Log,
    MemoryCatalog,
    arrow_schema,
    at,
    create,
    create_table,
    delete,
    fold_into,
    register,
    register_blueprint,
    rename,
    set_default_blueprint,
    unregister,
)

BATCHING = pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])


def fold_all(catalog: MemoryCatalog, records: list[LogRecord], same_batch: bool) -> None:
    """Fold ``records`` as one batch, or as one batch per record."""
    for batch in [records] if same_batch else [[r] for r in records]:
        fold_into(catalog, batch)


@pytest.fixture
def droid() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def other() -> uuid.UUID:
    return uuid.uuid4()


@pytest.fixture
def two_datasets(catalog, log, droid, other) -> MemoryCatalog:
    """'droid' (created at t=0) and 'other' (t=1)."""
    fold_into(catalog, [log.append(create(droid, "droid", when=at(0))),
                        log.append(create(other, "other", when=at(1)))])
    return catalog


def status(catalog: MemoryCatalog, record: LogRecord) -> Status:
    return catalog.outcomes[record.event.event_id].status


def rejected_ids(catalog: MemoryCatalog) -> list[uuid.UUID | None]:
    return [r.event_id for r in catalog.rejections]


# -- rename ---------------------------------------------------------------------------------------


@BATCHING
def test_rename_moves_the_name_and_frees_the_old_one(two_datasets, log, droid, same_batch):
    renamed = log.append(rename(droid, "droid: v2 (2024)", when=at(5)))
    newcomer_id = uuid.uuid4()
    newcomer = log.append(create(newcomer_id, "droid", when=at(6)))

    fold_all(two_datasets, [renamed, newcomer], same_batch)

    assert status(two_datasets, renamed) is Status.ACCEPTED
    assert status(two_datasets, newcomer) is Status.ACCEPTED
    dataset = two_datasets.dataset(droid)
    assert (dataset.name, dataset.created_at, dataset.updated_at) == ("droid: v2 (2024)", at(0), at(5))
    assert two_datasets.dataset_by_name("droid: v2 (2024)").id == droid
    assert two_datasets.dataset_by_name("droid").id == newcomer_id


def test_rename_never_moves_updated_at_back(two_datasets, log, droid):
    fold_into(two_datasets, [log.append(register(droid, "seg", when=at(10)))])
    renamed = log.append(rename(droid, "new", when=at(3)))
    fold_into(two_datasets, [renamed])
    assert status(two_datasets, renamed) is Status.ACCEPTED
    assert two_datasets.dataset(droid).name == "new"
    assert two_datasets.dataset(droid).updated_at == at(10)


@BATCHING
def test_rename_to_a_taken_name_already_exists(two_datasets, log, droid, other, same_batch):
    before = two_datasets.snapshot()["datasets"]
    taken = log.append(rename(droid, "other", when=at(5)))

    fold_all(two_datasets, [taken], same_batch)

    outcome = two_datasets.outcomes[taken.event.event_id]
    assert outcome.status is Status.ALREADY_EXISTS
    assert "'other'" in outcome.reason
    assert two_datasets.rejections == []  # a conflict, not bad input
    assert two_datasets.snapshot()["datasets"] == before
    assert two_datasets.dataset_by_name("other").id == other


def test_rename_to_its_own_name_is_accepted_and_keeps_the_name(two_datasets, log, droid):
    same = log.append(rename(droid, "droid", when=at(5)))
    fold_into(two_datasets, [same])
    assert status(two_datasets, same) is Status.ACCEPTED
    assert two_datasets.dataset_by_name("droid").id == droid
    assert two_datasets.rejections == []


@BATCHING
def test_names_can_be_swapped_through_a_free_name(two_datasets, log, droid, other, same_batch):
    records = [log.append(rename(droid, "tmp")), log.append(rename(other, "droid")),
               log.append(rename(droid, "other"))]
    fold_all(two_datasets, records, same_batch)
    assert [status(two_datasets, r) for r in records] == [Status.ACCEPTED] * 3
    assert two_datasets.dataset_by_name("droid").id == other
    assert two_datasets.dataset_by_name("other").id == droid
    assert two_datasets.dataset_by_name("tmp") is None


@pytest.mark.parametrize("deleted", [False, True], ids=["unknown", "deleted"])
def test_rename_of_an_unknown_or_deleted_dataset_is_not_found(two_datasets, log, droid, deleted):
    target = droid if deleted else uuid.uuid4()
    if deleted:
        fold_into(two_datasets, [log.append(delete(droid))])
    renamed = log.append(rename(target, "fresh"))
    fold_into(two_datasets, [renamed])

    outcome = two_datasets.outcomes[renamed.event.event_id]
    assert outcome.status is Status.NOT_FOUND
    assert ("was deleted" if deleted else "does not exist") in outcome.reason
    assert rejected_ids(two_datasets) == [renamed.event.event_id]
    assert two_datasets.dataset_by_name("fresh") is None


def test_rename_to_an_invalid_name_is_invalid(two_datasets, log, droid):
    bad = log.append(rename(droid, "a/b"))
    fold_into(two_datasets, [bad])
    assert status(two_datasets, bad) is Status.INVALID
    assert rejected_ids(two_datasets) == [bad.event.event_id]
    assert two_datasets.dataset(droid).name == "droid"


# -- delete ---------------------------------------------------------------------------------------


def populate(log: Log, dataset_id: uuid.UUID) -> list[LogRecord]:
    """Two segments, three layers and a default blueprint."""
    return [log.append(register(dataset_id, "s1", "base", when=at(2))),
            log.append(register(dataset_id, "s1", "extra", when=at(3))),
            log.append(register(dataset_id, "s2", "base", when=at(4))),
            log.append(register_blueprint(dataset_id, "bp", when=at(5)))]


@BATCHING
def test_delete_purges_segments_layers_and_blueprints(two_datasets, log, droid, other, same_batch):
    kept = log.append(register(other, "o1"))
    records = [*populate(log, droid), kept, log.append(delete(droid, when=at(9)))]

    fold_all(two_datasets, records, same_batch)

    assert status(two_datasets, records[-1]) is Status.ACCEPTED
    assert two_datasets.layers(droid) == [] and two_datasets.segment_ids(droid) == []
    blueprints = companion_id(droid, DatasetKind.BLUEPRINT)
    assert two_datasets.dataset(blueprints).deleted and two_datasets.layers(blueprints) == []
    assert two_datasets.dataset(companion_id(droid, DatasetKind.ASSET)).deleted
    assert not two_datasets.dataset(companion_id(other, DatasetKind.BLUEPRINT)).deleted
    tombstone = two_datasets.dataset(droid)
    assert tombstone.deleted and tombstone.updated_at == at(9)
    assert tombstone.default_blueprint is None and tombstone.schema_refs == ()
    assert two_datasets.dataset_by_name("droid") is None
    assert [x.segment_id for x in two_datasets.layers(other)] == ["o1"]  # the other is untouched


def test_delete_in_the_same_batch_as_registers_leaves_no_changes_behind(two_datasets, log, droid):
    changes = fold(two_datasets, [*populate(log, droid), log.append(delete(droid))])
    hidden = {companion_id(droid, DatasetKind.BLUEPRINT), companion_id(droid, DatasetKind.ASSET)}
    assert changes.purged == {droid, *hidden}
    assert changes.layers == {} and changes.segments == {}
    assert changes.datasets[droid].deleted


def test_delete_reports_purged_datasets_to_the_store(two_datasets, log, droid):
    fold_into(two_datasets, populate(log, droid))
    changes = fold_into(two_datasets, [log.append(delete(droid))])
    assert changes.purged == {droid, companion_id(droid, DatasetKind.BLUEPRINT),
                              companion_id(droid, DatasetKind.ASSET)}
    assert changes.layers == {} and changes.segments == {}  # the purge covers them


@BATCHING
def test_delete_frees_the_name_for_a_new_dataset(two_datasets, log, droid, same_batch):
    successor = uuid.uuid4()
    records = [log.append(delete(droid)), log.append(create(successor, "droid", when=at(7)))]
    fold_all(two_datasets, records, same_batch)
    assert [status(two_datasets, r) for r in records] == [Status.ACCEPTED] * 2
    assert two_datasets.dataset_by_name("droid").id == successor
    assert two_datasets.dataset(droid).deleted


@BATCHING
def test_second_delete_is_not_found(two_datasets, log, droid, same_batch):
    first, second = log.append(delete(droid, when=at(5))), log.append(delete(droid, when=at(6)))
    fold_all(two_datasets, [first, second], same_batch)
    assert status(two_datasets, first) is Status.ACCEPTED
    assert status(two_datasets, second) is Status.NOT_FOUND
    assert rejected_ids(two_datasets) == [second.event.event_id]
    assert two_datasets.dataset(droid).updated_at == at(5)


@BATCHING
def test_a_deleted_id_is_never_reused(two_datasets, log, droid, same_batch):
    records = [log.append(delete(droid)), log.append(create(droid, "droid")),
               log.append(create(droid, "reborn"))]
    fold_all(two_datasets, records, same_batch)
    assert [status(two_datasets, r) for r in records] == [
        Status.ACCEPTED, Status.INVALID, Status.INVALID]
    assert all("never reused" in two_datasets.outcomes[r.event.event_id].reason for r in records[1:])
    assert two_datasets.dataset(droid).deleted
    assert two_datasets.dataset_by_name("droid") is None
    assert two_datasets.dataset_by_name("reborn") is None


@pytest.mark.parametrize("make", [
    lambda d: register(d, "s1"),
    lambda d: register(d, "s9", on_duplicate=OnDuplicate.REPLACE),
    lambda d: unregister(d, ["s1"]),
    lambda d: rename(d, "fresh"),
    lambda d: register_blueprint(d, "bp2"),
    lambda d: set_default_blueprint(d, None),
], ids=["register", "replace", "unregister", "rename", "blueprint", "default"])
@BATCHING
def test_commands_after_delete_are_not_found(two_datasets, log, droid, make, same_batch):
    records = [*populate(log, droid), log.append(delete(droid)), log.append(make(droid))]
    fold_all(two_datasets, records, same_batch)
    outcome = two_datasets.outcomes[records[-1].event.event_id]
    assert outcome.status is Status.NOT_FOUND
    assert "was deleted" in outcome.reason
    assert rejected_ids(two_datasets) == [records[-1].event.event_id]
    assert two_datasets.layers(droid) == [] and two_datasets.segment_ids(droid) == []
    assert not two_datasets.dataset(droid).default_blueprint


# -- unregister -----------------------------------------------------------------------------------


@pytest.fixture
def three_segments(two_datasets, log, droid) -> MemoryCatalog:
    """droid: s1 (base, extra), s2 (base, extra), s3 (base), registered at t=2..6."""
    fold_into(two_datasets, [log.append(register(droid, s, name, when=at(2 + i))) for i, (s, name) in
                             enumerate([("s1", "base"), ("s1", "extra"), ("s2", "base"),
                                        ("s2", "extra"), ("s3", "base")])])
    return two_datasets


def layer_keys(catalog: MemoryCatalog, dataset_id: uuid.UUID) -> list[tuple[str, str]]:
    return [(x.segment_id, x.layer_name) for x in catalog.layers(dataset_id)]


@pytest.mark.parametrize("segment_ids, layer_names, remaining", [
    (["s1"], [], [("s2", "base"), ("s2", "extra"), ("s3", "base")]),
    ([], ["extra"], [("s1", "base"), ("s2", "base"), ("s3", "base")]),
    (["s1", "s3"], ["base"], [("s1", "extra"), ("s2", "base"), ("s2", "extra")]),
    (["s2", "nope"], ["extra", "nope"], [("s1", "base"), ("s1", "extra"), ("s2", "base"), ("s3", "base")]),
], ids=["segments-only", "layers-only", "product", "unknown-names-ignored"])
@BATCHING
def test_unregister_drops_the_product_of_segments_and_layers(three_segments, log, droid, segment_ids,
                                                             layer_names, remaining, same_batch):
    record = log.append(unregister(droid, segment_ids, layer_names, when=at(20)))
    fold_all(three_segments, [record], same_batch)

    assert status(three_segments, record) is Status.ACCEPTED
    assert layer_keys(three_segments, droid) == remaining
    assert three_segments.segment_ids(droid) == sorted({s for s, _ in remaining})
    assert three_segments.dataset(droid).updated_at == at(20)


def test_unregister_with_both_lists_empty_is_invalid(three_segments, log, droid):
    before = three_segments.snapshot()
    record = log.append(unregister(droid))
    fold_into(three_segments, [record])
    assert status(three_segments, record) is Status.INVALID
    assert rejected_ids(three_segments) == [record.event.event_id]
    after = three_segments.snapshot()
    assert (after["layers"], after["segments"], after["datasets"]) == (
        before["layers"], before["segments"], before["datasets"])


def test_unregister_of_nothing_present_is_accepted_and_changes_nothing(three_segments, log, droid):
    record = log.append(unregister(droid, ["nope"], [], when=at(50)))
    changes = fold(three_segments, [record])
    assert changes.outcomes[record.event.event_id].status is Status.ACCEPTED
    assert changes.datasets == {} and changes.layers == {} and changes.segments == {}


def test_segment_disappears_with_its_last_layer_and_others_are_touched(three_segments, log, droid):
    fold_into(three_segments, [log.append(unregister(droid, [], ["extra"], when=at(30)))])
    assert three_segments.segment_ids(droid) == ["s1", "s2", "s3"]
    assert three_segments.segment(droid, "s1").updated_at == at(30)
    assert three_segments.segment(droid, "s3").updated_at == at(6)  # nothing of it was dropped

    changes = fold_into(three_segments, [log.append(unregister(droid, ["s1"], ["base"], when=at(31)))])
    assert changes.segments == {(droid, "s1"): None}
    assert three_segments.segment(droid, "s1") is None
    assert three_segments.segment_ids(droid) == ["s2", "s3"]


@BATCHING
def test_re_registering_after_unregister_behaves_like_new(three_segments, log, droid, same_batch):
    records = [log.append(unregister(droid, ["s1"])),
               log.append(register(droid, "s1", "base", url="file:///again.rrd", when=at(40)))]
    fold_all(three_segments, records, same_batch)

    assert [status(three_segments, r) for r in records] == [Status.ACCEPTED] * 2
    assert three_segments.segment_ids(droid) == ["s2", "s3", "s1"]  # at the end of segment order
    segment = three_segments.segment(droid, "s1")
    assert segment.created_by == records[1].position and segment.updated_at == at(40)
    assert [x.layer_name for x in three_segments.ordered_layers(droid, "s1")] == ["base"]
    assert three_segments.layer(droid, "s1", "base").storage_url == "file:///again.rrd"


def test_re_registering_an_unregistered_layer_with_on_duplicate_error_is_accepted(three_segments, log,
                                                                                   droid):
    fold_into(three_segments, [log.append(unregister(droid, ["s2"], ["extra"]))])
    again = log.append(register(droid, "s2", "extra"))
    fold_into(three_segments, [again])
    assert status(three_segments, again) is Status.ACCEPTED
    assert [x.layer_name for x in three_segments.ordered_layers(droid, "s2")] == ["base", "extra"]


def test_unregister_of_an_unknown_dataset_is_not_found(catalog, log):
    record = log.append(unregister(uuid.uuid4(), ["s1"]))
    fold_into(catalog, [record])
    assert status(catalog, record) is Status.NOT_FOUND
    assert rejected_ids(catalog) == [record.event.event_id]


# -- hidden datasets ------------------------------------------------------------------------------


def test_a_dataset_is_created_with_its_hidden_blueprint_and_asset_datasets(two_datasets, droid):
    for kind, prefix in ((DatasetKind.BLUEPRINT, "__bp_"), (DatasetKind.ASSET, "__as_")):
        hidden = two_datasets.dataset(companion_id(droid, kind))
        assert hidden is not None and hidden.kind is kind and hidden.hidden
        assert hidden.name == companion_name(droid, kind) == prefix + droid.hex
        assert hidden.created_at == at(0)
        assert companion_id(hidden.id, kind) not in two_datasets.datasets  # none of their own
    assert not two_datasets.dataset(droid).hidden


def test_a_table_is_created_with_a_hidden_blueprint_dataset(catalog, log):
    table = uuid.uuid4()
    fold_into(catalog, [log.append(create_table(table, "labels"))])
    assert catalog.dataset(companion_id(table, DatasetKind.BLUEPRINT)).kind is DatasetKind.BLUEPRINT
    assert catalog.dataset(companion_id(table, DatasetKind.ASSET)) is None
    deleted = log.append(Event(table, DeleteTable()))
    fold_into(catalog, [deleted])
    assert status(catalog, deleted) is Status.ACCEPTED
    assert catalog.dataset(companion_id(table, DatasetKind.BLUEPRINT)).deleted


def test_a_hidden_dataset_deleted_on_its_own_leaves_its_owner_deletable(two_datasets, log, droid):
    records = [log.append(delete(companion_id(droid, DatasetKind.BLUEPRINT))), log.append(delete(droid))]
    fold_into(two_datasets, records)
    assert [status(two_datasets, r) for r in records] == [Status.ACCEPTED] * 2
    assert two_datasets.dataset(companion_id(droid, DatasetKind.ASSET)).deleted


def test_a_hidden_dataset_name_taken_refuses_the_owner(catalog, log):
    owner = uuid.uuid4()
    records = [log.append(create(uuid.uuid4(), companion_name(owner, DatasetKind.ASSET))),
               log.append(create(owner, "droid"))]
    fold_into(catalog, records)
    assert status(catalog, records[1]) is Status.ALREADY_EXISTS
    assert catalog.dataset(owner) is None
    assert catalog.dataset(companion_id(owner, DatasetKind.BLUEPRINT)) is None


# -- blueprints -----------------------------------------------------------------------------------


def blueprint_layer(catalog: MemoryCatalog, owner: uuid.UUID, blueprint_id: str):
    return catalog.layer(companion_id(owner, DatasetKind.BLUEPRINT), blueprint_id, "base")


@BATCHING
def test_a_logged_register_blueprint_becomes_a_segment_of_the_blueprint_dataset(two_datasets, log, droid,
                                                                                same_batch):
    first = log.append(register_blueprint(droid, "bp1", when=at(5)))
    second = log.append(register_blueprint(droid, "bp2", set_default=False, when=at(6)))
    fold_all(two_datasets, [first, second], same_batch)

    assert [status(two_datasets, r) for r in (first, second)] == [Status.ACCEPTED] * 2
    layer = blueprint_layer(two_datasets, droid, "bp1")
    assert (layer.storage_url, layer.registered_at, layer.registered_by) == (
        "file:///blueprints/bp1.rbl", at(5), first.position)
    assert two_datasets.segment_ids(companion_id(droid, DatasetKind.BLUEPRINT)) == ["bp1", "bp2"]
    dataset = two_datasets.dataset(droid)
    assert (dataset.default_blueprint, dataset.updated_at) == ("bp1", at(5))


@BATCHING
def test_re_registering_a_blueprint_replaces_it(two_datasets, log, droid, same_batch):
    records = [log.append(register_blueprint(droid, "bp", url="file:///v1.rbl", when=at(5))),
               log.append(register_blueprint(droid, "bp", url="file:///v2.rbl", when=at(6),
                                             set_default=False))]
    fold_all(two_datasets, records, same_batch)
    layer = blueprint_layer(two_datasets, droid, "bp")
    assert (layer.storage_url, layer.registered_by) == ("file:///v2.rbl", records[1].position)
    assert two_datasets.segment_ids(companion_id(droid, DatasetKind.BLUEPRINT)) == ["bp"]
    assert two_datasets.dataset(droid).default_blueprint == "bp"  # still the default


@BATCHING
def test_the_default_blueprint_is_any_name_or_none(two_datasets, log, droid, same_batch):
    """As Rerun's server: the name is not checked against the registered blueprints."""
    records = [log.append(register_blueprint(droid, "bp1")),
               log.append(set_default_blueprint(droid, "not-registered-yet"))]
    fold_all(two_datasets, records, same_batch)
    assert status(two_datasets, records[1]) is Status.ACCEPTED
    assert two_datasets.dataset(droid).default_blueprint == "not-registered-yet"

    cleared = log.append(set_default_blueprint(droid, None, when=at(9)))
    fold_into(two_datasets, [cleared])
    dataset = two_datasets.dataset(droid)
    assert (dataset.default_blueprint, dataset.updated_at) == (None, at(9))
    assert blueprint_layer(two_datasets, droid, "bp1") is not None  # clearing keeps blueprints


def test_a_segment_table_blueprint_is_the_dataset_s_other_default(two_datasets, log, droid):
    records = [log.append(set_default_blueprint(droid, "bp")),
               log.append(Event(droid, SetDefaultBlueprint("table-bp", segment_table=True)))]
    fold_into(two_datasets, records)
    dataset = two_datasets.dataset(droid)
    assert (dataset.default_blueprint, dataset.default_segment_table_blueprint) == ("bp", "table-bp")
    assert [c.detail for c in two_datasets.feed[-2:]] == ["bp", "segment table table-bp"]
    table = uuid.uuid4()
    refused = [log.append(create_table(table, "labels")),
               log.append(Event(table, SetDefaultBlueprint("bp", segment_table=True)))]
    fold_into(two_datasets, refused)
    assert status(two_datasets, refused[1]) is Status.INVALID


def test_a_table_has_a_default_blueprint(catalog, log):
    table = uuid.uuid4()
    records = [log.append(create_table(table, "labels")),
               log.append(set_default_blueprint(table, "bp", when=at(3)))]
    fold_into(catalog, records)
    assert status(catalog, records[1]) is Status.ACCEPTED
    assert (catalog.table(table).default_blueprint, catalog.table(table).updated_at) == ("bp", at(3))


@pytest.mark.parametrize("kind", ["dataset", "table"])
def test_the_default_blueprint_needs_the_blueprint_dataset(catalog, log, kind):
    owner = uuid.uuid4()
    made = create(owner, "owner") if kind == "dataset" else create_table(owner, "owner")
    records = [log.append(made), log.append(delete(companion_id(owner, DatasetKind.BLUEPRINT))),
               log.append(set_default_blueprint(owner, "bp")), log.append(register_blueprint(owner, "bp"))]
    fold_into(catalog, records)
    for refused in records[2:] if kind == "dataset" else records[2:3]:
        outcome = catalog.outcomes[refused.event.event_id]
        assert outcome.status is Status.NOT_FOUND
        assert outcome.reason.startswith(f"{kind} blueprint dataset does not exist")


@pytest.mark.parametrize("blueprint_id, url", [("", "file:///x.rbl"), ("bp", ""), ("b" * 1025, "f")])
def test_invalid_blueprint_is_invalid(two_datasets, log, droid, blueprint_id, url):
    record = log.append(register_blueprint(droid, blueprint_id, url=url))
    fold_into(two_datasets, [record])
    assert status(two_datasets, record) is Status.INVALID
    assert rejected_ids(two_datasets) == [record.event.event_id]


# -- assets ---------------------------------------------------------------------------------------


def scope(assets: uuid.UUID, asset: str, edit: str, segments=(), mode: str = "opt_out", *,
          expected_revision: int | None = None) -> Event:
    return Event(assets, ScopeAsset(asset, AssetScopeEdit(edit), AssetMode(mode), tuple(segments),
                                    expected_revision))


@pytest.fixture
def assets(two_datasets, log, droid) -> uuid.UUID:
    """droid's asset dataset, with the assets 'mesh' and 'urdf'."""
    assets = companion_id(droid, DatasetKind.ASSET)
    fold_into(two_datasets, [log.append(register(assets, "mesh", num_chunks=2)),
                             log.append(register(assets, "urdf", num_chunks=1))])
    return assets


@BATCHING
def test_an_asset_scope_is_set_then_edited_in_its_mode(two_datasets, log, assets, same_batch):
    records = [log.append(scope(assets, "mesh", "set", ["ep1", "ep2", "ep1"], mode="opt_in")),
               log.append(scope(assets, "mesh", "apply", ["ep3", "ep1"])),
               log.append(scope(assets, "mesh", "unapply", ["ep2"])),
               log.append(scope(assets, "urdf", "set", ["ep1"])),
               log.append(scope(assets, "urdf", "apply", ["ep1", "ep9"]))]
    fold_all(two_datasets, records, same_batch)
    assert [status(two_datasets, r) for r in records] == [Status.ACCEPTED] * 5
    mesh, urdf = (two_datasets.asset_scope(assets, a) for a in ("mesh", "urdf"))
    assert (mesh.mode, mesh.segments) == (AssetMode.OPT_IN, ("ep1", "ep3"))
    assert (urdf.mode, urdf.segments) == (AssetMode.OPT_OUT, ())  # opt-out: applying un-lists
    assert [mesh.applies_to(s) for s in ("ep1", "ep2", "ep3")] == [True, False, True]
    assert urdf.applies_to("ep1") and urdf.applies_to("anything")
    assert [c.detail for c in two_datasets.feed if c.kind is ChangeKind.ASSET_SCOPED][:3] == [
        "opt_in ep1,ep2", "opt_in ep1,ep2,ep3", "opt_in ep1,ep3"]


@BATCHING
def test_a_scope_s_revision_is_the_offset_after_its_last_change_and_an_edit_at_another_is_refused(
        two_datasets, log, assets, same_batch):
    records = [log.append(scope(assets, "mesh", "set", ["ep1"], mode="opt_in", expected_revision=0)),
               log.append(scope(assets, "mesh", "apply", ["ep1"])),  # changes nothing: same revision
               log.append(scope(assets, "mesh", "apply", ["ep2"], expected_revision=0)),  # read before
               log.append(scope(assets, "urdf", "unapply", ["ep3"], expected_revision=0))]
    fold_all(two_datasets, records, same_batch)
    first = records[0].position.offset + 1
    assert [status(two_datasets, r) for r in records] == [
        Status.ACCEPTED, Status.ACCEPTED, Status.REVISION_CONFLICT, Status.ACCEPTED]
    assert two_datasets.outcomes[records[2].event.event_id].reason == (
        f"the scope of asset 'mesh' was changed meanwhile: expected revision 0, found {first}")
    mesh = two_datasets.asset_scope(assets, "mesh")
    assert (mesh.segments, mesh.revision) == (("ep1",), first)
    assert two_datasets.asset_scope(assets, "urdf").revision == records[3].position.offset + 1

    edit = log.append(scope(assets, "mesh", "apply", ["ep2"], expected_revision=first))
    fold_into(two_datasets, [edit])
    mesh = two_datasets.asset_scope(assets, "mesh")
    assert (status(two_datasets, edit), mesh.segments, mesh.revision) == (
        Status.ACCEPTED, ("ep1", "ep2"), edit.position.offset + 1)


@BATCHING
def test_a_cleared_scope_is_gone_and_a_scope_set_at_revision_0_follows(two_datasets, log, assets, same_batch):
    records = [log.append(scope(assets, "mesh", "set", ["ep1"], mode="opt_in")),
               log.append(scope(assets, "mesh", "clear", expected_revision=999)),  # stale: refused
               log.append(scope(assets, "mesh", "clear")),
               log.append(scope(assets, "mesh", "clear")),  # nothing to clear: accepted, not noted
               log.append(scope(assets, "mesh", "set", ["ep2"], mode="opt_in", expected_revision=0))]
    fold_all(two_datasets, records, same_batch)
    assert [status(two_datasets, r) for r in records] == [
        Status.ACCEPTED, Status.REVISION_CONFLICT, Status.ACCEPTED, Status.ACCEPTED, Status.ACCEPTED]
    mesh = two_datasets.asset_scope(assets, "mesh")
    assert (mesh.segments, mesh.revision) == (("ep2",), records[4].position.offset + 1)
    assert [c.detail for c in two_datasets.feed if c.kind is ChangeKind.ASSET_SCOPED][-3:] == [
        "opt_in ep1", "cleared", "opt_in ep2"]


def test_an_edit_that_changes_nothing_is_not_noted(two_datasets, log, assets):
    fold_into(two_datasets, [log.append(scope(assets, "mesh", "set", ["ep1"], mode="opt_in"))])
    before = len(two_datasets.feed)
    fold_into(two_datasets, [log.append(scope(assets, "mesh", "apply", ["ep1"])),
                             log.append(scope(assets, "mesh", "unapply", ["ep7"]))])
    assert len(two_datasets.feed) == before


def test_an_asset_scope_needs_the_asset_in_an_asset_dataset(two_datasets, log, droid, assets):
    records = [log.append(scope(assets, "not-registered", "set")),
               log.append(scope(droid, "ep1", "set")),
               log.append(scope(companion_id(droid, DatasetKind.BLUEPRINT), "bp", "set")),
               log.append(scope(assets, "mesh", "set", [""]))]
    fold_into(two_datasets, records)
    assert [status(two_datasets, r) for r in records] == [
        Status.NOT_FOUND, Status.INVALID, Status.INVALID, Status.INVALID]
    assert "register it with register_asset()" in two_datasets.outcomes[records[0].event.event_id].reason
    assert "not an asset dataset" in two_datasets.outcomes[records[1].event.event_id].reason


@BATCHING
def test_an_asset_scope_goes_with_its_asset_and_its_dataset(two_datasets, log, droid, assets, same_batch):
    records = [log.append(scope(assets, "mesh", "set", ["ep1"], mode="opt_in")),
               log.append(scope(assets, "urdf", "set", ["ep1"], mode="opt_in")),
               log.append(unregister(assets, ["mesh"])),
               log.append(register(assets, "mesh", num_chunks=2))]
    fold_all(two_datasets, records, same_batch)
    assert two_datasets.asset_scope(assets, "mesh") is None  # registered again: applies to all
    assert two_datasets.asset_scope(assets, "urdf") is not None
    fold_into(two_datasets, [log.append(delete(droid))])
    assert two_datasets.scopes == {}


# -- layers registered without a schema -------------------------------------------------------------


@BATCHING
def test_a_dataset_counts_its_layers_registered_without_a_schema(two_datasets, log, droid, same_batch):
    schema = arrow_schema(("/x", pa.int64()))
    records = [log.append(register(droid, "s1")), log.append(register(droid, "s2")),
               log.append(register(droid, "s3", schema=schema)),
               log.append(register(droid, "s1", schema=schema, on_duplicate=OnDuplicate.REPLACE)),
               log.append(register(droid, "s3", on_duplicate=OnDuplicate.REPLACE)),
               log.append(register(droid, "s2", "extra"))]
    fold_all(two_datasets, records, same_batch)
    assert two_datasets.dataset(droid).schemaless_layers == 3  # s2 base and extra, s3
    fold_into(two_datasets, [log.append(unregister(droid, ["s2"]))])
    assert two_datasets.dataset(droid).schemaless_layers == 1
    fold_into(two_datasets, [log.append(register(droid, "s3", on_duplicate=OnDuplicate.SKIP))])
    assert two_datasets.dataset(droid).schemaless_layers == 1


def test_an_asset_is_static_data_only(two_datasets, log, droid):
    assets = companion_id(droid, DatasetKind.ASSET)
    ranges = (IndexRange("frame", IndexKind.SEQUENCE, 0, 9),)
    records = [log.append(register(assets, "mesh", num_chunks=2)),
               log.append(register(assets, "arm", num_chunks=4, index_ranges=ranges)),
               log.append(register(assets, "unknown")),
               log.append(register(droid, "ep1", num_chunks=4, index_ranges=ranges))]
    fold_into(two_datasets, records)
    assert [status(two_datasets, r) for r in records] == [
        Status.ACCEPTED, Status.INVALID, Status.INVALID, Status.ACCEPTED]
    assert "(timelines: frame)" in two_datasets.outcomes[records[1].event.event_id].reason
    assert two_datasets.segment_ids(assets) == ["mesh"]
