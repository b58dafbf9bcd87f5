"""Avro single-object encoding of events (Avro spec, "Single object encoding").

Wire format of a Kafka record value::

    C3 01 | 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema | Avro binary body

The reader looks the fingerprint up among every schema version in ``events/schemas`` and resolves
the writer's schema to the newest one, so events written by older producers stay readable. The
Kafka record key is the dataset id as UTF-8.
"""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC
from importlib import resources
from typing import Any, cast

import fastavro

from events.errors import StrataError
from events.model import (
    AssetMode,
    AssetScopeEdit,
    Command,
    CreateDataset,
    CreateSearchIndex,
    CreateTable,
    CreateTag,
    DefineSchema,
    DeleteDataset,
    DeleteSearchIndexes,
    DeleteTable,
    DeleteTag,
    DistanceMetric,
    Event,
    IndexKind,
    IndexRange,
    MaintainSearchIndexes,
    OnDuplicate,
    RegisterBlueprint,
    RegisterLayer,
    RegisterTable,
    RenameDataset,
    RenameTable,
    ScopeAsset,
    SearchIndexKind,
    SetDefaultBlueprint,
    TableWriteMode,
    UnregisterLayers,
    WriteTable,
)

MAGIC = b"\xc3\x01"
HEADER_SIZE = len(MAGIC) + 8


class DecodeError(StrataError, ValueError):
    """A record value that is not a readable strata event; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_CRC64_EMPTY = 0xC15D213AA4D7A795


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC64_EMPTY & -(fp & 1))
        table.append(fp)
    return table


_CRC64_TABLE = _crc64_table()


def schema_fingerprint(schema: dict[str, Any]) -> bytes:
    """CRC-64-AVRO of the schema's Parsing Canonical Form, little-endian, as the wire carries it."""
    canonical = fastavro.schema.to_parsing_canonical_form(schema).encode()
    fp = _CRC64_EMPTY
    for byte in canonical:
        fp = (fp >> 8) ^ _CRC64_TABLE[(fp ^ byte) & 0xFF]
    return fp.to_bytes(8, "little")


def _load_schemas() -> dict[int, Any]:
    """Every envelope version's parsed schema, by version."""
    schemas = {}
    for path in resources.files("events").joinpath("schemas").iterdir():
        if path.name.startswith("envelope.v") and path.name.endswith(".avsc"):
            version = int(path.name.removeprefix("envelope.v").removesuffix(".avsc"))
            schemas[version] = fastavro.parse_schema(json.loads(path.read_text()))
    return schemas


SCHEMAS = _load_schemas()
SCHEMA_VERSION = max(SCHEMAS)
"""The version this code writes and reads into."""
_READER = SCHEMAS[SCHEMA_VERSION]
_FINGERPRINTS = {version: schema_fingerprint(s) for version, s in SCHEMAS.items()}
_WRITERS_BY_FINGERPRINT = {_FINGERPRINTS[version]: s for version, s in SCHEMAS.items()}
_COMMAND_FIELDS = {
    version: {branch["name"].rsplit(".", 1)[-1]: {f["name"] for f in branch["fields"]}
              for branch in next(f for f in schema["fields"] if f["name"] == "command")["type"]}
    for version, schema in SCHEMAS.items()
}
_COMMAND_TYPES: dict[str, type[Command]] = {t.__name__: t for t in (
    CreateDataset, DefineSchema, RenameDataset, DeleteDataset, RegisterLayer, UnregisterLayers,
    RegisterBlueprint, SetDefaultBlueprint, ScopeAsset, CreateTable, RegisterTable, RenameTable,
    DeleteTable, WriteTable, CreateTag, DeleteTag, CreateSearchIndex, DeleteSearchIndexes,
    MaintainSearchIndexes)}
_BYTES_FIELDS = ("arrow_schema", "properties", "properties_batch")


def encode(event: Event, *, schema_version: int = SCHEMA_VERSION) -> bytes:
    """Encode ``event`` with the given schema version (default: the newest). Fields an older
    version lacks are left out, as a producer of that version would.

    Examples:
        >>> decode(encode(Event(uuid.uuid4(), CreateDataset("droid")))).command
        CreateDataset(name='droid')
    """
    schema = SCHEMAS[schema_version]
    known_fields = _COMMAND_FIELDS[schema_version].get(event.event_type)
    if known_fields is None:
        raise ValueError(f"schema version {schema_version} has no {event.event_type} command")
    command = {name: value for name, value in vars(event.command).items() if name in known_fields}
    if isinstance(event.command, RegisterLayer):
        command["on_duplicate"] = str(event.command.on_duplicate)
        if "index_ranges" in command:
            command["index_ranges"] = [{**vars(r), "kind": str(r.kind)} for r in command["index_ranges"]]
    elif isinstance(event.command, WriteTable):
        command["mode"] = str(event.command.mode)
    elif isinstance(event.command, ScopeAsset):
        if event.command.expected_revision is not None and "expected_revision" not in known_fields:
            raise ValueError(f"schema version {schema_version} has no ScopeAsset.expected_revision: the "
                             "edit would lose its condition")
        command.update(edit=str(event.command.edit), mode=str(event.command.mode),
                       segments=list(event.command.segments))
    elif isinstance(event.command, CreateSearchIndex):
        command.update(kind=str(event.command.kind), distance_metric=str(event.command.distance_metric))
    record = {
        "event_id": str(event.event_id),
        "event_type": event.event_type,
        "schema_version": schema_version,
        "produced_at": event.produced_at,
        "producer_id": event.producer_id,
        "dataset_id": str(event.entry_id),
        "command": (f"strata.events.{event.event_type}", command),
    }
    out = io.BytesIO()
    out.write(MAGIC)
    out.write(_FINGERPRINTS[schema_version])
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def decode(data: bytes) -> Event:
    """Decode a record value written by any known schema version.

    Raises ``DecodeError`` naming what is wrong: no single-object header, a writer schema this
    reader does not know (for example one from a newer release), a truncated or corrupt body, or
    a command type it does not know.
    """
    if len(data) < HEADER_SIZE or data[:2] != MAGIC:
        raise DecodeError("not an Avro single-object encoded event (missing C3 01 header)")
    writer = _WRITERS_BY_FINGERPRINT.get(bytes(data[2:HEADER_SIZE]))
    if writer is None:
        raise DecodeError(
            f"unknown writer schema fingerprint {bytes(data[2:HEADER_SIZE]).hex()}: written by a "
            f"newer or foreign producer (this reader knows versions {sorted(SCHEMAS)})")
    body = io.BytesIO(data[HEADER_SIZE:])
    try:
        record = fastavro.schemaless_reader(body, writer, _READER, return_record_name=True)
    except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, ...
        raise DecodeError(f"corrupt or truncated Avro body: {type(exc).__name__}: {exc}") from exc
    if body.read(1):
        raise DecodeError("trailing bytes after the Avro body")
    return _event_from_record(cast(dict[str, Any], record))  # the envelope schema is a record


def _event_from_record(record: dict[str, Any]) -> Event:
    type_name, fields = record["command"]
    short_name = type_name.rsplit(".", 1)[-1]
    command_type = _COMMAND_TYPES.get(short_name)
    if command_type is None or record["event_type"] != short_name:
        raise DecodeError(f"unknown event type {record['event_type']!r} (command {type_name!r})")
    if command_type is RegisterLayer:
        fields = {**fields, "on_duplicate": OnDuplicate(fields["on_duplicate"]),
                  "index_ranges": tuple(IndexRange(r["timeline"], IndexKind(r["kind"]), r["start"], r["end"])
                                        for r in fields["index_ranges"])}
        # fastavro fills a bytes field's default from the schema's JSON string as str.
        for name in _BYTES_FIELDS:
            if isinstance(fields[name], str):
                fields[name] = fields[name].encode("latin-1")
    elif command_type is UnregisterLayers:
        fields = {name: tuple(values) for name, values in fields.items()}
    elif command_type is WriteTable:
        fields = {**fields, "mode": TableWriteMode(fields["mode"])}
    elif command_type is ScopeAsset:
        fields = {**fields, "edit": AssetScopeEdit(fields["edit"]), "mode": AssetMode(fields["mode"]),
                  "segments": tuple(fields["segments"])}
    elif command_type is CreateSearchIndex:
        fields = {**fields, "kind": SearchIndexKind(fields["kind"]),
                  "distance_metric": DistanceMetric(fields["distance_metric"])}
    elif command_type is MaintainSearchIndexes and fields["cleanup_before"] is not None:
        fields = {**fields, "cleanup_before": fields["cleanup_before"].astimezone(UTC)}
    return Event(
        entry_id=_as_uuid(record["dataset_id"], "dataset_id"),
        command=command_type(**fields),
        event_id=_as_uuid(record["event_id"], "event_id"),
        produced_at=record["produced_at"].astimezone(UTC),
        producer_id=record["producer_id"],
    )


def _as_uuid(value: uuid.UUID | str, name: str) -> uuid.UUID:
    # fastavro already parses the uuid logical type; a plain string reaches here only if it is not
    # a valid UUID.
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise DecodeError(f"{name} is not a UUID: {value!r}") from exc
