"""The dataset schema: layer schemas merged column by column (projector/schemas.py), and what the
fold does with a layer whose schema conflicts."""

from __future__ import annotations

import uuid
import zlib

import pyarrow as pa
import pytest

from events import OnDuplicate
from projector import SchemaRef, Status, fold, schemas

from .conftest import (
    MemoryCatalog,
    arrow_schema,
    create,
    define,
    fold_into,
    parsed,
    register,
    unregister,
)

REPLACE = OnDuplicate.REPLACE

CONFLICTS = {
    "int32-vs-int64": (pa.int32(), pa.int64()),
    "float64-vs-float32": (pa.float64(), pa.float32()),
    "fixed-size-list-length": (pa.list_(pa.float32(), 3), pa.list_(pa.float32(), 4)),
    "dictionary-vs-plain": (pa.dictionary(pa.int32(), pa.string()), pa.string()),
    "list-vs-fixed-size-list": (pa.list_(pa.float32()), pa.list_(pa.float32(), 3)),
    "fixed-size-list-item-nullability": (pa.list_(pa.field("item", pa.int32(), nullable=False), 3),
                                         pa.list_(pa.field("item", pa.int32(), nullable=True), 3)),
    "fixed-size-list-of-wider-struct": (pa.list_(pa.struct([("a", pa.int64())]), 2),
                                        pa.list_(pa.struct([("a", pa.int64()), ("b", pa.string())]), 2)),
    "struct-vs-plain": (pa.struct([("a", pa.int64())]), pa.int64()),
}


# -- merge ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("old, new", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_incompatible_types_conflict(old, new):
    dataset, layer = pa.schema([("t", pa.int64()), ("col", old)]), pa.schema([("col", new)])
    for first, second in ((dataset, layer), (layer, dataset)):
        with pytest.raises(schemas.SchemaConflict) as info:
            schemas.merge(first, second)
        assert "schema" in str(info.value)
        assert "'col'" in str(info.value)


def test_conflict_inside_a_struct_names_the_nested_column():
    old = pa.schema([("pose", pa.struct([("x", pa.float64())]))])
    new = pa.schema([("pose", pa.struct([("x", pa.float32())]))])
    with pytest.raises(schemas.SchemaConflict, match="'pose.x'"):
        schemas.merge(old, new)


def test_conflict_inside_list_items_names_the_column():
    old = pa.schema([("points", pa.list_(pa.int32()))])
    new = pa.schema([("points", pa.list_(pa.int64()))])
    with pytest.raises(schemas.SchemaConflict, match="points"):
        schemas.merge(old, new)


def test_new_columns_are_appended_in_the_layers_order():
    merged = schemas.merge(pa.schema([("a", pa.int64()), ("b", pa.string())]),
                           pa.schema([("c", pa.bool_()), ("a", pa.int64()), ("d", pa.int8())]))
    assert merged.names == ["a", "b", "c", "d"]
    assert merged.field("d").type == pa.int8()


def test_struct_gains_the_union_of_its_fields():
    old = pa.schema([("pose", pa.struct([("x", pa.float64()), ("y", pa.float64())]))])
    new = pa.schema([("pose", pa.struct([("y", pa.float64()), ("z", pa.float64())]))])
    merged = schemas.merge(old, new)
    assert merged.field("pose").type == pa.struct(
        [("x", pa.float64()), ("y", pa.float64()), ("z", pa.float64())])


def test_nullability_widens_either_way():
    required = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    nullable = pa.schema([pa.field("x", pa.int64(), nullable=True)])
    assert not required.field("x").nullable
    assert schemas.merge(required, nullable).field("x").nullable
    assert schemas.merge(nullable, required).field("x").nullable
    assert not schemas.merge(required, required).field("x").nullable


@pytest.mark.parametrize("typed", [pa.int64(), pa.list_(pa.string()), pa.struct([("a", pa.int8())])],
                         ids=str)
def test_null_column_takes_the_other_type_either_way(typed):
    null, concrete = pa.schema([("c", pa.null())]), pa.schema([("c", typed)])
    assert schemas.merge(null, concrete).field("c").type == typed
    assert schemas.merge(concrete, null).field("c").type == typed


def test_compatible_lists_merge_their_items():
    old = pa.schema([("v", pa.list_(pa.struct([("a", pa.int64())])))])
    new = pa.schema([("v", pa.list_(pa.field("item", pa.struct([("b", pa.string())]), nullable=False)))])
    merged = schemas.merge(old, new).field("v").type
    assert pa.types.is_list(merged) and merged.value_field.nullable
    assert merged.value_type == pa.struct([("a", pa.int64()), ("b", pa.string())])
    fixed = pa.schema([("f", pa.list_(pa.int32(), 3))])
    assert schemas.merge(fixed, fixed).field("f").type == pa.list_(pa.int32(), 3)
    large = schemas.merge(pa.schema([("l", pa.large_list(pa.null()))]),
                          pa.schema([("l", pa.large_list(pa.int8()))])).field("l").type
    assert large == pa.large_list(pa.int8())


def test_merge_serialized_treats_empty_bytes_as_no_schema():
    x = arrow_schema(("x", pa.int64()))
    assert schemas.merge_serialized(b"", b"") == b""
    assert schemas.merge_serialized(b"", x) == x
    assert schemas.merge_serialized(x, b"") == x
    assert parsed(schemas.merge_serialized(x, arrow_schema(("y", pa.string())))).names == ["x", "y"]
    with pytest.raises(schemas.SchemaConflict, match="not an Arrow IPC schema"):
        schemas.merge_serialized(b"", b"not a schema")


def test_digest_is_the_hex_sha256_of_the_bytes():
    assert schemas.digest(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert schemas.digest(b"a") != schemas.digest(b"b")


# -- through the fold -----------------------------------------------------------------------------


@pytest.fixture
def droid(catalog, log) -> uuid.UUID:
    dataset_id = uuid.uuid4()
    fold_into(catalog, [log.append(create(dataset_id, "droid"))])
    return dataset_id


def dataset_columns(catalog: MemoryCatalog, dataset_id: uuid.UUID) -> dict[str, pa.DataType]:
    schema_bytes = catalog.dataset(dataset_id).schema
    return {f.name: f.type for f in parsed(schema_bytes)} if schema_bytes else {}


@pytest.mark.parametrize("old, new", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_a_conflicting_layer_is_schema_conflict_and_appears_nowhere(catalog, log, droid, old, new):
    first = arrow_schema(("t", pa.int64()), ("col", old))
    fold_into(catalog, [log.append(register(droid, "s1", schema=first))])
    before = catalog.snapshot()

    clash = register(droid, "s2", schema=arrow_schema(("col", new), ("extra", pa.int8())))
    changes = fold(catalog, [log.append(clash)])

    outcome = changes.outcomes[clash.event_id]
    assert outcome.status is Status.SCHEMA_CONFLICT
    assert "schema" in outcome.reason and "col" in outcome.reason
    assert changes.rejections == []  # an outcome only
    assert (changes.datasets, changes.segments, changes.layers, changes.schemas) == ({}, {}, {}, {})
    catalog.apply(changes)
    after = catalog.snapshot()
    assert {k: v for k, v in after.items() if k not in ("outcomes", "next_offsets")} == {
        k: v for k, v in before.items() if k not in ("outcomes", "next_offsets")}


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_compatible_layers_merge_into_the_dataset_schema(catalog, log, droid, same_batch):
    first = arrow_schema(pa.field("x", pa.int64(), nullable=False), ("pose", pa.struct([("a", pa.int8())])),
                         ("later", pa.null()))
    second = arrow_schema(("pose", pa.struct([("b", pa.int8())])), ("later", pa.string()), ("y", pa.bool_()))
    records = [log.append(register(droid, "s1", schema=first)),
               log.append(register(droid, "s2", schema=second))]
    for batch in [records] if same_batch else [[r] for r in records]:
        fold_into(catalog, batch)

    assert all(o.status is Status.ACCEPTED for o in catalog.outcomes.values())
    merged = parsed(catalog.dataset(droid).schema)
    assert merged.names == ["x", "pose", "later", "y"]
    assert merged.field("pose").type == pa.struct([("a", pa.int8()), ("b", pa.int8())])
    assert merged.field("later").type == pa.string()
    assert not merged.field("x").nullable
    assert catalog.dataset(droid).schema_refs == (SchemaRef(schemas.digest(first), 1),
                                                 SchemaRef(schemas.digest(second), 1))
    assert catalog.schema(schemas.digest(second)) == second
    assert catalog.layer(droid, "s2", "base").schema_sha256 == schemas.digest(second)


def test_layers_with_the_same_schema_share_one_ref(catalog, log, droid):
    x = arrow_schema(("x", pa.int64()))
    fold_into(catalog, [log.append(register(droid, s, schema=x)) for s in ("s1", "s2", "s3")])
    assert catalog.dataset(droid).schema_refs == (SchemaRef(schemas.digest(x), 3),)

    fold_into(catalog, [log.append(unregister(droid, ["s1", "s2"]))])
    assert catalog.dataset(droid).schema_refs == (SchemaRef(schemas.digest(x), 1),)
    assert dataset_columns(catalog, droid) == {"x": pa.int64()}

    fold_into(catalog, [log.append(unregister(droid, ["s3"]))])
    assert catalog.dataset(droid).schema_refs == ()
    assert catalog.dataset(droid).schema == b""


def test_a_layer_without_a_schema_changes_no_schema(catalog, log, droid):
    x = arrow_schema(("x", pa.int64()))
    fold_into(catalog, [log.append(register(droid, "s1", schema=x)), log.append(register(droid, "s2"))])
    assert catalog.layer(droid, "s2", "base").schema_sha256 == ""
    assert catalog.dataset(droid).schema_refs == (SchemaRef(schemas.digest(x), 1),)


def test_unregister_shrinks_the_dataset_schema(catalog, log, droid):
    fold_into(catalog, [log.append(register(droid, "s1", schema=arrow_schema(("x", pa.int64())))),
                        log.append(register(droid, "s2", schema=arrow_schema(("y", pa.string()))))])
    assert list(dataset_columns(catalog, droid)) == ["x", "y"]
    fold_into(catalog, [log.append(unregister(droid, ["s1"]))])
    assert dataset_columns(catalog, droid) == {"y": pa.string()}


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_unregistering_the_only_conflicting_layer_lets_the_other_type_in(catalog, log, droid, same_batch):
    int64, int32 = arrow_schema(("x", pa.int64())), arrow_schema(("x", pa.int32()), ("y", pa.int8()))
    records = [log.append(register(droid, "s1", schema=int64)),
               log.append(register(droid, "s2", schema=arrow_schema(("y", pa.int8())))),
               log.append(register(droid, "s3", schema=int32)),  # conflict
               log.append(unregister(droid, ["s1"])),
               log.append(register(droid, "s3", schema=int32))]
    for batch in [records] if same_batch else [[r] for r in records]:
        fold_into(catalog, batch)

    statuses = [catalog.outcomes[r.event.event_id].status for r in records]
    assert statuses == [Status.ACCEPTED, Status.ACCEPTED, Status.SCHEMA_CONFLICT, Status.ACCEPTED,
                        Status.ACCEPTED]
    assert dataset_columns(catalog, droid) == {"y": pa.int8(), "x": pa.int32()}


def test_replace_may_change_the_type_of_a_column_only_that_layer_had(catalog, log, droid):
    fold_into(catalog, [log.append(register(droid, "s1", schema=arrow_schema(("x", pa.int64())))),
                        log.append(register(droid, "s2", schema=arrow_schema(("y", pa.int8()))))])
    replacement = log.append(register(droid, "s1", schema=arrow_schema(("x", pa.float32())),
                                      on_duplicate=REPLACE))
    fold_into(catalog, [replacement])
    assert catalog.outcomes[replacement.event.event_id].status is Status.ACCEPTED
    assert dataset_columns(catalog, droid) == {"y": pa.int8(), "x": pa.float32()}
    assert [r.layers for r in catalog.dataset(droid).schema_refs] == [1, 1]


def test_replace_may_not_change_a_type_another_layer_still_has(catalog, log, droid):
    shared = arrow_schema(("x", pa.int64()))
    fold_into(catalog, [log.append(register(droid, "s1", schema=shared)),
                        log.append(register(droid, "s2", schema=shared))])
    replacement = log.append(register(droid, "s1", schema=arrow_schema(("x", pa.float32())),
                                      url="file:///new.rrd", on_duplicate=REPLACE))
    fold_into(catalog, [replacement])
    assert catalog.outcomes[replacement.event.event_id].status is Status.SCHEMA_CONFLICT
    assert catalog.layer(droid, "s1", "base").storage_url != "file:///new.rrd"  # the old layer stays
    assert catalog.dataset(droid).schema_refs == (SchemaRef(schemas.digest(shared), 2),)


def test_a_layer_schema_that_is_not_arrow_is_invalid_and_a_rejection(catalog, log, droid):
    record = log.append(register(droid, "s1", schema=b"\x00 not an arrow schema"))
    fold_into(catalog, [record])
    outcome = catalog.outcomes[record.event.event_id]
    assert outcome.status is Status.INVALID
    assert "Arrow IPC schema" in outcome.reason
    assert [r.event_id for r in catalog.rejections] == [record.event.event_id]
    assert catalog.layer(droid, "s1", "base") is None and catalog.schemas == {}



# -- schemas by reference (envelope v5) -----------------------------------------------------------


def outcome_of(catalog: MemoryCatalog, record):
    return catalog.outcomes[record.event.event_id]


def test_a_layer_names_a_defined_schema_by_digest(catalog, log, droid):
    x = arrow_schema(("x", pa.int64()))
    digest = schemas.digest(x)
    fold_into(catalog, [log.append(define(droid, x))])
    record = log.append(register(droid, "s1", schema_sha256=digest))
    fold_into(catalog, [record])

    assert outcome_of(catalog, record).status is Status.ACCEPTED
    assert catalog.layer(droid, "s1", "base").schema_sha256 == digest
    assert catalog.dataset(droid).schema_refs == (SchemaRef(digest, 1),)
    assert dataset_columns(catalog, droid) == {"x": pa.int64()}


@pytest.mark.parametrize("same_batch", [True, False], ids=["same-batch", "across-batches"])
def test_a_register_before_its_schema_is_invalid_live_and_on_replay(catalog, log, droid, same_batch):
    x = arrow_schema(("x", pa.int64()))
    digest = schemas.digest(x)
    early = log.append(register(droid, "s1", schema_sha256=digest))
    definition = log.append(define(droid, x))
    late = log.append(register(droid, "s2", schema_sha256=digest))
    for batch in [[early, definition, late]] if same_batch else [[early], [definition], [late]]:
        fold_into(catalog, batch)

    refused = outcome_of(catalog, early)
    assert refused.status is Status.INVALID
    assert digest in refused.reason and "DefineSchema" in refused.reason
    assert [r.event_id for r in catalog.rejections] == [early.event.event_id]
    assert catalog.layer(droid, "s1", "base") is None
    assert outcome_of(catalog, late).status is Status.ACCEPTED


def test_defining_a_known_schema_again_changes_nothing(catalog, log, droid):
    x = arrow_schema(("x", pa.int64()))
    fold_into(catalog, [log.append(define(droid, x))])
    other_dataset = uuid.uuid4()  # a schema is the catalog's, whoever defines it
    again = log.append(define(other_dataset, x))
    changes = fold(catalog, [again])
    assert changes.outcomes[again.event.event_id].status is Status.ACCEPTED
    assert (changes.datasets, changes.schemas, changes.rejections) == ({}, {}, [])


@pytest.mark.parametrize("schema, sha256, words", [
    (arrow_schema(("x", pa.int64())), "0" * 64, "is not the SHA-256"),
    (b"\x00 not an arrow schema", None, "Arrow IPC schema"),
], ids=["wrong-digest", "not-arrow"])
def test_a_bad_definition_is_invalid_and_defines_nothing(catalog, log, droid, schema, sha256, words):
    record = log.append(define(droid, schema, sha256=sha256))
    fold_into(catalog, [record])
    assert outcome_of(catalog, record).status is Status.INVALID
    assert words in outcome_of(catalog, record).reason
    assert catalog.schemas == {}


def test_properties_by_reference_are_kept_compressed_and_read_back_as_sent(catalog, log, droid):
    table = pa.table({"property:episode:building": [["ILIAD"]], "property:episode:success": [[True]]})
    schema_message, batch = schemas.properties_parts(table)
    fold_into(catalog, [log.append(define(droid, schema_message))])
    record = log.append(register(droid, "s1", properties_schema_sha256=schemas.digest(schema_message),
                                 properties_batch=batch))
    fold_into(catalog, [record])

    assert outcome_of(catalog, record).status is Status.ACCEPTED
    layer = catalog.layer(droid, "s1", "base")
    assert (layer.properties, layer.properties_batch) == (b"", batch)
    assert layer.properties_schema_sha256 == schemas.digest(schema_message)
    assert pa.Table.from_batches([schemas.read_properties(schema_message, batch)]) == table


@pytest.mark.parametrize("fields, words", [
    ({"schema": arrow_schema(("x", pa.int64())), "schema_sha256": "ab" * 32},
     "both arrow_schema and schema_sha256"),
    ({"properties": b"p", "properties_batch": b"x"}, "both properties and properties_batch"),
    ({"properties_batch": b"x"}, "go together"),
    ({"properties_batch": b"not zlib"}, "not zlib"),
    ({"properties_batch": schemas.properties_parts(pa.table({"a": [[1.5]]}))[1]},
     "not an Arrow record batch"),
    ({"properties_batch": zlib.compress(bytes(300 * 1024))}, "more than"),
], ids=["two-schemas", "two-properties", "half-a-reference", "not-zlib", "other-schema", "too-large"])
def test_malformed_references_are_invalid_and_register_nothing(catalog, log, droid, fields, words):
    property_schema, _ = schemas.properties_parts(pa.table({"property:episode:n": [[1]],
                                                           "property:episode:s": [["x"]]}))
    fold_into(catalog, [log.append(define(droid, property_schema))])
    if "properties_batch" in fields and "properties" not in fields and fields["properties_batch"] != b"x":
        fields = {**fields, "properties_schema_sha256": schemas.digest(property_schema)}
    record = log.append(register(droid, "s1", **fields))
    fold_into(catalog, [record])
    assert outcome_of(catalog, record).status is Status.INVALID
    assert words in outcome_of(catalog, record).reason
    assert catalog.layer(droid, "s1", "base") is None


def test_equal_schemas_with_metadata_in_another_order_get_one_digest():
    def schema(order):
        meta = dict(sorted({b"rerun:kind": b"data", b"rerun:component": b"c"}.items(), reverse=order))
        inner = pa.field("a", pa.float32(), metadata=meta)
        return pa.schema([pa.field("s", pa.struct([inner]), metadata=meta),
                          pa.field("l", pa.list_(inner), metadata=meta)], metadata=meta)
    one, other = schema(True), schema(False)
    assert one.equals(other, check_metadata=True)
    assert schemas.serialize(one) != schemas.serialize(other)  # what rerun hands over
    assert schemas.serialize(schemas.canonical(one)) == schemas.serialize(schemas.canonical(other))
    assert schemas.canonical(one).equals(one, check_metadata=True)


def test_canonical_bytes_of_a_remembered_schema_are_those_of_an_equal_one_only():
    def schema(item_metadata: dict, order: bool) -> pa.Schema:
        meta = dict(sorted({b"rerun:kind": b"data", b"rerun:component": b"c"}.items(), reverse=order))
        item = pa.field("item", pa.float32(), metadata=item_metadata)
        return pa.schema([pa.field("l", pa.list_(item), metadata=meta)], metadata=meta)

    first = schemas.canonical_bytes(schema({b"k": b"1"}, True))
    assert schemas.canonical_bytes(schema({b"k": b"1"}, False)) == first
    # Differing only in a nested field's metadata: another schema, other bytes.
    other = schemas.canonical_bytes(schema({b"k": b"2"}, False))
    assert other != first
    assert other == schemas.serialize(schemas.canonical(schema({b"k": b"2"}, True)))
