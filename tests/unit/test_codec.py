"""The wire codec: Avro single-object encoding, schema evolution and every way decoding fails."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import random
import uuid
from datetime import timedelta, timezone
from importlib import resources

import fastavro
import fastavro.schema
import pytest

from events import (
    SCHEMA_VERSION,
    AssetMode,
    AssetScopeEdit,
    CreateDataset,
    CreateTable,
    CreateTag,
    DecodeError,
    DefineSchema,
    DeleteDataset,
    DeleteTable,
    DeleteTag,
    Event,
    IndexKind,
    IndexRange,
    OnDuplicate,
    RegisterBlueprint,
    RegisterLayer,
    RegisterTable,
    RenameDataset,
    RenameTable,
    ScopeAsset,
    SetDefaultBlueprint,
    TableWriteMode,
    UnregisterLayers,
    WriteTable,
    codec,
    decode,
    encode,
)

from .conftest import T0 as WHEN


def raw_schema(version: int) -> dict:
    """The schema file as written, not as fastavro parsed it."""
    text = resources.files("events").joinpath("schemas", f"envelope.v{version}.avsc").read_text()
    return json.loads(text)


def register_event(**overrides) -> Event:
    command = RegisterLayer(
        segment_id="ILIAD_50aee79f",
        layer_name="base",
        storage_url="file:///data/ILIAD_50aee79f.rrd",
        on_duplicate=OnDuplicate.REPLACE,
        size_bytes=123_456_789_012,
        arrow_schema=bytes(range(256)),  # every byte value, including NUL and non-UTF-8
        properties=b"\xff\x00\xc3\x01props",
        num_chunks=17,
        index_ranges=(IndexRange("elapsed", IndexKind.DURATION, 0, 9 * 10**9),
                      IndexRange("frame", IndexKind.SEQUENCE, -3, 2**62),
                      IndexRange("real_time", IndexKind.TIMESTAMP, 1_689_000_000_066_666_667,
                                 1_689_000_020_000_000_000)),
    )
    return Event(uuid.uuid4(), command, produced_at=WHEN, producer_id="pipeline-7", **overrides)


@pytest.fixture
def event() -> Event:
    return register_event()


def single_object(schema: dict, record: dict, fingerprint: bytes | None = None) -> bytes:
    """Encode ``record`` the way the codec does, with any schema and header."""
    out = io.BytesIO()
    out.write(codec.MAGIC)
    out.write(codec.schema_fingerprint(schema) if fingerprint is None else fingerprint)
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def envelope(event_type: str, command: dict, *, schema_version: int = SCHEMA_VERSION) -> dict:
    return {
        "event_id": str(uuid.uuid4()),
        "event_type": event_type,
        "schema_version": schema_version,
        "produced_at": WHEN,
        "producer_id": "handmade",
        "dataset_id": str(uuid.uuid4()),
        "command": (f"strata.events.{event_type}", command),
    }


# -- round trips ----------------------------------------------------------------------------------


def test_create_dataset_round_trip():
    event = Event(uuid.uuid4(), CreateDataset("droid ü 🤖"), produced_at=WHEN, producer_id="me")
    decoded = decode(encode(event))
    assert decoded == event
    assert decoded.event_type == "CreateDataset"
    assert decoded.produced_at.tzinfo is not None


def test_register_layer_round_trip_keeps_bytes_exactly(event):
    decoded = decode(encode(event))
    assert decoded == event
    assert isinstance(decoded.command.arrow_schema, bytes)
    assert decoded.command.arrow_schema == bytes(range(256))
    assert decoded.command.properties == b"\xff\x00\xc3\x01props"
    assert decoded.command.on_duplicate is OnDuplicate.REPLACE


@pytest.mark.parametrize("on_duplicate", list(OnDuplicate))
def test_every_on_duplicate_round_trips(on_duplicate):
    event = Event(uuid.uuid4(), RegisterLayer("s", "l", "file:///x", on_duplicate))
    assert decode(encode(event)).command.on_duplicate is on_duplicate


def test_produced_at_in_another_time_zone_decodes_to_the_same_instant_in_utc():
    tz = timezone(timedelta(hours=-7))
    event = Event(uuid.uuid4(), CreateDataset("d"), produced_at=WHEN.astimezone(tz))
    decoded = decode(encode(event))
    assert decoded.produced_at == WHEN
    assert decoded.produced_at.utcoffset() == timedelta(0)


def test_version_1_event_decodes_with_the_newest_reader(event):
    assert SCHEMA_VERSION >= 2
    data = encode(event, schema_version=1)
    assert data[2:10] == codec.schema_fingerprint(raw_schema(1))

    decoded = decode(data)

    assert decoded.command.arrow_schema == b""
    assert decoded.command.properties == b""
    assert isinstance(decoded.command.arrow_schema, bytes)
    assert isinstance(decoded.command.properties, bytes)
    expected = RegisterLayer(event.command.segment_id, event.command.layer_name,
                             event.command.storage_url, event.command.on_duplicate,
                             event.command.size_bytes)
    assert decoded.command == expected
    assert (decoded.event_id, decoded.entry_id, decoded.produced_at, decoded.producer_id) == (
        event.event_id, event.entry_id, event.produced_at, event.producer_id)


def test_version_1_create_dataset_decodes():
    event = Event(uuid.uuid4(), CreateDataset("old"), produced_at=WHEN)
    assert decode(encode(event, schema_version=1)) == event


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_events_written_by_older_versions_decode(version, event):
    create_event = Event(uuid.uuid4(), CreateDataset("old"), produced_at=WHEN)
    for written in (event, create_event):
        data = encode(written, schema_version=version)
        assert data[2:10] == codec.schema_fingerprint(raw_schema(version))
        decoded = decode(data)
        assert decoded.event_id == written.event_id
        assert decoded.event_type == written.event_type
    # Versions 2 to 4 carried the layer's schema and properties inline, version 1 did not; from
    # version 4 on events carry the chunk count and index ranges.
    decoded = decode(encode(event, schema_version=version))
    carried = (event.command if version >= 4 else
               dataclasses.replace(event.command, num_chunks=None, index_ranges=()) if version > 1 else
               RegisterLayer(event.command.segment_id, event.command.layer_name,
                             event.command.storage_url, event.command.on_duplicate,
                             event.command.size_bytes))
    assert decoded == dataclasses.replace(event, command=carried)


def test_a_handmade_version_2_record_decodes():
    # Written by the v2 schema file itself, not by this codec: what an old producer sent.
    record = envelope("RegisterLayer", {
        "segment_id": "s", "layer_name": "l", "storage_url": "file:///x", "on_duplicate": "skip",
        "size_bytes": 5, "arrow_schema": b"\x00\xff", "properties": b"p"}, schema_version=2)
    decoded = decode(single_object(raw_schema(2), record))
    assert decoded.command == RegisterLayer("s", "l", "file:///x", OnDuplicate.SKIP, 5,
                                            arrow_schema=b"\x00\xff", properties=b"p")
    assert str(decoded.event_id) == record["event_id"]


def test_a_handmade_version_3_record_decodes_without_chunks_or_ranges():
    record = envelope("RegisterLayer", {
        "segment_id": "s", "layer_name": "l", "storage_url": "file:///x", "on_duplicate": "error",
        "size_bytes": 5, "arrow_schema": b"", "properties": b""}, schema_version=3)
    decoded = decode(single_object(raw_schema(3), record))
    assert decoded.command == RegisterLayer("s", "l", "file:///x", size_bytes=5)
    assert decoded.command.num_chunks is None and decoded.command.index_ranges == ()


def test_version_5_names_schemas_by_digest_and_carries_a_compressed_batch():
    command = RegisterLayer("s", "l", "file:///x", size_bytes=5, schema_sha256="ab" * 32,
                            properties_schema_sha256="cd" * 32, properties_batch=b"\x78\x9c\x00\xff")
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    data = encode(event)
    assert decode(data) == event
    assert isinstance(decode(data).command.properties_batch, bytes)
    # A version 4 producer could not have said this: those fields are left out.
    assert decode(encode(event, schema_version=4)).command == RegisterLayer("s", "l", "file:///x",
                                                                             size_bytes=5)


def test_version_4_carries_chunks_and_index_ranges(event):
    decoded = decode(encode(event))
    assert decoded.command.num_chunks == 17
    assert decoded.command.index_ranges == event.command.index_ranges
    assert decoded.command.index_ranges[2].kind is IndexKind.TIMESTAMP


NEW_COMMANDS = [
    DefineSchema("00" * 32, bytes(range(256))),
    RenameDataset("droid: renamed (v2)"),
    DeleteDataset(),
    UnregisterLayers(("seg-1", "seg-2"), ("base",)),
    UnregisterLayers((), ("base", "extra")),
    UnregisterLayers(("seg-1",), ()),
    RegisterBlueprint("bp-1", "file:///blueprints/bp-1.rbl", set_default=True),
    RegisterBlueprint("bp-2", "s3://bucket/bp-2.rbl", set_default=False),
    SetDefaultBlueprint("bp-1"),
    SetDefaultBlueprint(None),
]

TABLE_COMMANDS = [
    CreateTable("labels ü", bytes(range(256))),
    RegisterTable("lance labels", "file:///data/labels.lance", b"\xff\x00schema", 7),
    RenameTable("labels v2"),
    DeleteTable(),
    WriteTable(TableWriteMode.APPEND, b"\x00rows"),
    WriteTable(TableWriteMode.OVERWRITE, b""),
    WriteTable(TableWriteMode.UPSERT, bytes(range(256)) * 4, write_id="w-1", part=2, parts=3),
]
NEW_COMMANDS += TABLE_COMMANDS

ASSET_COMMANDS = [
    SetDefaultBlueprint("table-bp", segment_table=True),
    ScopeAsset("mesh", AssetScopeEdit.SET, AssetMode.OPT_IN, ("ep-1", "ep ü")),
    ScopeAsset("mesh", AssetScopeEdit.APPLY),
    ScopeAsset("urdf", AssetScopeEdit.UNAPPLY, segments=("ep-2",)),
]
NEW_COMMANDS += ASSET_COMMANDS
REVISION_COMMANDS = [ScopeAsset("urdf", AssetScopeEdit.APPLY, segments=("ep-2",), expected_revision=2**40),
                     ScopeAsset("mesh", AssetScopeEdit.CLEAR, expected_revision=0),
                     ScopeAsset("mesh", AssetScopeEdit.CLEAR)]
NEW_COMMANDS += REVISION_COMMANDS
NEW_COMMANDS.append(CreateTable("labels", b"schema", storage_url="s3://bucket/labels.lance"))
NEW_COMMANDS += [CreateTag("train-2026-11-25 ü", 48213), DeleteTag("train-2026-11-25 ü")]


@pytest.mark.parametrize("command", NEW_COMMANDS, ids=repr)
def test_new_command_round_trip(command):
    event = Event(uuid.uuid4(), command, produced_at=WHEN, producer_id="sdk")
    data = encode(event)
    assert data[2:10] == codec.schema_fingerprint(raw_schema(SCHEMA_VERSION))
    decoded = decode(data)
    assert decoded == event
    assert type(decoded.command) is type(command)
    if isinstance(command, UnregisterLayers):
        assert isinstance(decoded.command.segment_ids, tuple)
        assert isinstance(decoded.command.layer_names, tuple)


@pytest.mark.parametrize("command", NEW_COMMANDS, ids=repr)
@pytest.mark.parametrize("version", [1, 2])
def test_new_commands_cannot_be_written_with_an_older_schema(command, version):
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    with pytest.raises(ValueError, match=f"schema version {version} has no {type(command).__name__}"):
        encode(event, schema_version=version)


@pytest.mark.parametrize("command", TABLE_COMMANDS, ids=repr)
def test_table_commands_need_version_6(command):
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    for version in (3, 5):
        with pytest.raises(ValueError, match=f"schema version {version} has no"):
            encode(event, schema_version=version)
    decoded = decode(encode(event, schema_version=6))
    assert decoded == event
    if isinstance(command, WriteTable):
        assert decoded.command.mode is command.mode


@pytest.mark.parametrize("command", REVISION_COMMANDS, ids=repr)
def test_scope_edits_at_a_revision_and_clears_need_version_10(command):
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    assert decode(encode(event, schema_version=10)) == event
    with pytest.raises(ValueError):  # the condition, or the edit, older versions cannot carry
        encode(event, schema_version=9)


@pytest.mark.parametrize("command", ASSET_COMMANDS, ids=repr)
def test_asset_commands_need_version_7(command):
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    decoded = decode(encode(event, schema_version=7))
    assert decoded == event
    if isinstance(command, SetDefaultBlueprint):  # version 6 has no segment table default
        assert decode(encode(event, schema_version=6)).command == SetDefaultBlueprint("table-bp")
        return
    with pytest.raises(ValueError, match="schema version 6 has no ScopeAsset"):
        encode(event, schema_version=6)
    assert isinstance(decoded.command.segments, tuple)
    assert (decoded.command.edit, decoded.command.mode) == (command.edit, command.mode)


@pytest.mark.parametrize("command", NEW_COMMANDS, ids=repr)
def test_every_truncation_of_a_new_command_is_a_decode_error(command):
    data = encode(Event(uuid.uuid4(), command, produced_at=WHEN))
    for length in range(len(data)):
        with pytest.raises(DecodeError):
            decode(data[:length])


# -- the wire header ------------------------------------------------------------------------------


def test_header_is_magic_plus_fingerprint_of_the_writer_schema(event):
    data = encode(event)
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == codec.schema_fingerprint(raw_schema(SCHEMA_VERSION))
    assert len(data) > codec.HEADER_SIZE == 10
    # The rest is the plain Avro body of the writer schema.
    body = fastavro.schemaless_reader(io.BytesIO(data[10:]),
                                      fastavro.parse_schema(raw_schema(SCHEMA_VERSION)))
    assert body["schema_version"] == SCHEMA_VERSION
    assert body["dataset_id"] == event.entry_id
    assert body["command"]["size_bytes"] == event.command.size_bytes


def test_versions_have_distinct_fingerprints():
    fingerprints = {codec.schema_fingerprint(raw_schema(v)) for v in codec.SCHEMAS}
    assert len(fingerprints) == len(codec.SCHEMAS) >= 2


@pytest.mark.parametrize("version", sorted(codec.SCHEMAS))
def test_fingerprint_matches_fastavro(version):
    schema = raw_schema(version)
    ours = codec.schema_fingerprint(schema)
    # fastavro returns the hex of the fingerprint's bytes in little-endian order, like Java's
    # SchemaNormalization.parsingFingerprint and the single-object header.
    theirs = fastavro.schema.fingerprint(fastavro.schema.to_parsing_canonical_form(schema),
                                         "CRC-64-AVRO")
    assert len(ours) == 8
    assert ours == bytes.fromhex(theirs)
    # The parsed schema (what the codec keeps) has the same fingerprint as the file.
    assert codec.schema_fingerprint(codec.SCHEMAS[version]) == ours


def test_fingerprint_of_null_matches_the_avro_spec_test_vector():
    # Avro's share/test/data/schema-tests.txt: "null" -> 7195948357588979594 (a Java long).
    assert codec.schema_fingerprint("null") == (7195948357588979594).to_bytes(8, "little",
                                                                              signed=True)


# -- decode errors --------------------------------------------------------------------------------


def assert_decode_error(data: bytes, *words: str) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(data)
    reason = info.value.reason
    assert isinstance(reason, str) and reason.strip()
    assert str(info.value) == reason
    for word in words:
        assert word.lower() in reason.lower(), (word, reason)
    assert isinstance(info.value, ValueError)
    return info.value


def test_empty_bytes():
    assert_decode_error(b"", "header")


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes(seed):
    data = random.Random(seed).randbytes(64)
    assert data[:2] != b"\xc3\x01"
    assert_decode_error(data, "header")


def test_header_only_is_truncated(event):
    assert_decode_error(encode(event)[:codec.HEADER_SIZE], "truncated")


@pytest.mark.parametrize("make", [register_event,
                                  lambda: Event(uuid.uuid4(), CreateDataset("droid"))],
                         ids=["register", "create"])
def test_every_truncation_is_a_decode_error(make):
    data = encode(make())
    for length in range(len(data)):
        with pytest.raises(DecodeError) as info:
            decode(data[:length])
        assert info.value.reason
        if length >= codec.HEADER_SIZE:
            assert "truncated" in info.value.reason


def test_trailing_bytes(event):
    assert_decode_error(encode(event) + b"\x00", "trailing")


def test_unknown_fingerprint_from_a_future_schema():
    future = copy.deepcopy(raw_schema(SCHEMA_VERSION))
    future["doc"] = f"schema version {SCHEMA_VERSION + 1} (from the future)"
    command = next(f for f in future["fields"] if f["name"] == "command")
    register_branch = next(b for b in command["type"] if b["name"] == "RegisterLayer")
    register_branch["fields"].append({"name": "checksum", "type": "string", "default": ""})
    fingerprint = codec.schema_fingerprint(future)
    assert fingerprint not in {codec.schema_fingerprint(s) for s in codec.SCHEMAS.values()}

    data = single_object(future, envelope("RegisterLayer", {
        "segment_id": "s", "layer_name": "l", "storage_url": "file:///x",
        "on_duplicate": "error", "size_bytes": 1, "arrow_schema": b"", "properties": b"",
        "properties_batch": b"", "checksum": "abc"}, schema_version=SCHEMA_VERSION + 1))

    error = assert_decode_error(data, "unknown writer schema", "newer")
    assert fingerprint.hex() in error.reason


def test_unknown_fingerprint_of_foreign_bytes(event):
    data = bytearray(encode(event))
    data[2:10] = b"\x00" * 8
    assert_decode_error(bytes(data), "fingerprint")


def test_corrupt_body(event):
    data = bytearray(encode(event))
    data[10:] = b"\xff" * (len(data) - 10)  # varints that never end / absurd lengths
    assert_decode_error(bytes(data), "corrupt")


def test_unknown_event_type():
    data = single_object(raw_schema(SCHEMA_VERSION),
                         envelope("DropTable", {"name": "d"}) | {
                             "command": ("strata.events.CreateDataset", {"name": "d"})})
    assert_decode_error(data, "unknown event type", "DropTable")


def test_event_type_that_disagrees_with_the_command():
    # Both are known types, but they must name the same one.
    data = single_object(raw_schema(SCHEMA_VERSION),
                         envelope("DeleteDataset", {"name": "d"}) | {
                             "command": ("strata.events.RenameDataset", {"name": "d"})})
    assert_decode_error(data, "unknown event type", "DeleteDataset")


def test_event_id_that_is_not_a_uuid():
    record = envelope("CreateDataset", {"name": "d"}) | {"event_id": "not-a-uuid"}
    data = single_object(raw_schema(SCHEMA_VERSION), record)
    assert_decode_error(data)


def test_tags_need_version_9():
    event = Event(uuid.uuid4(), CreateTag("v1", 3), produced_at=WHEN)
    assert decode(encode(event, schema_version=9)) == event
    with pytest.raises(ValueError, match="schema version 8 has no CreateTag command"):
        encode(event, schema_version=8)


def test_a_created_table_s_lance_url_needs_version_8():
    command = CreateTable("labels", b"schema", "file:///data/labels.lance")
    event = Event(uuid.uuid4(), command, produced_at=WHEN)
    assert decode(encode(event, schema_version=8)) == event
    assert decode(encode(event, schema_version=7)).command == CreateTable("labels", b"schema")
