"""Decoding the log where Spark reads it: registrations of the newest envelope are read by Spark's
own Avro reader (``from_avro``) on the executors, in the JVM, and reach Python as Arrow columns;
every other record, and any the JVM's reading cannot vouch for, is decoded by ``events.codec``.

The JVM vouches for a record only if its header names the newest schema, its body reads as that
schema's envelope (``PERMISSIVE``: a corrupt body reads as nulls), its command is a
``RegisterLayer``, and writing the envelope back (``to_avro``) gives exactly as many bytes as the
body has: Avro's Java reader stops at the end of the record and would let trailing bytes by,
which ``events.codec.decode`` refuses. Python then builds the event with the codec's own
``event_from_record``, so both paths make the same event or the same ``DecodeError``.
"""

from __future__ import annotations

import functools
import json

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from events import codec
from projector import LogPosition, LogRecord

COLUMN = "registration"
"""The column ``decoded`` adds, true for the records the JVM read; their fields are in the
columns ``registration_<field>`` beside it."""
_COMMAND = "RegisterLayer"
_ENVELOPE_FIELDS = ("event_id", "event_type", "produced_at", "producer_id", "dataset_id")
_ENVELOPE = "__envelope"
_KAFKA = ("topic", "partition", "offset", "value")
_TEXT_FIELDS = ("event_id", "producer_id", "dataset_id")
_COMMAND_TEXT_FIELDS = ("segment_id", "layer_name", "storage_url", "schema_sha256",
                        "properties_schema_sha256")
"""The strings of a registration that Avro's Java reader takes as they come: Python's reading
refuses text that is not UTF-8 (enum symbols and the command's name are checked otherwise)."""


@functools.cache
def _command_member() -> tuple[str, list[str]]:
    """Spark's name for the ``RegisterLayer`` member of the command union (``memberN``, by its
    place in the union) and the command's field names."""
    schema = json.loads(codec.schema_text(codec.SCHEMA_VERSION))
    branches = next(f for f in schema["fields"] if f["name"] == "command")["type"]
    index = next(i for i, branch in enumerate(branches) if branch["name"] == _COMMAND)
    return f"member{index}", [f["name"] for f in branches[index]["fields"]]


def decoded(kafka: DataFrame) -> DataFrame:
    """Kafka rows (topic, partition, offset, value) with the registrations the JVM read: the
    column ``COLUMN``, true for those, and one column per field of theirs (``COLUMN_<field>``),
    null for any record Python decodes."""
    schema = codec.schema_text(codec.SCHEMA_VERSION)
    size = codec.HEADER_SIZE
    value = F.col("value")
    body = F.expr(f"substring(value, {size + 1}, length(value) - {size})")
    header = F.lit(codec.header(codec.SCHEMA_VERSION))
    columns = [F.col(name) for name in _KAFKA]
    read = F.col(_ENVELOPE)
    member, fields = _command_member()
    command = read["command"][member]
    texts = [read[name] for name in _TEXT_FIELDS] + [command[name] for name in _COMMAND_TEXT_FIELDS]
    vouched = (read["event_id"].isNotNull() & (read["event_type"] == _COMMAND) & command.isNotNull()
               & F.forall(command["index_ranges"], lambda r: F.is_valid_utf8(r["timeline"]))
               & functools.reduce(lambda a, b: a & b, [F.is_valid_utf8(text) for text in texts])
               & (F.length(to_avro(read, schema)) == F.length(body)))
    read_fields = [*((name, read[name]) for name in _ENVELOPE_FIELDS),
                   *((name, command[name]) for name in fields)]
    # One step each, so that the envelope is read once and vouched for once.
    return (kafka.select(*columns, F.when(F.substring(value, 1, size) == header, from_avro(
                body, schema, {"mode": "PERMISSIVE"})).alias(_ENVELOPE))
            .select(*columns, read, F.coalesce(vouched, F.lit(False)).alias(COLUMN))
            .select(*columns, COLUMN, *[F.when(F.col(COLUMN), column).alias(f"{COLUMN}_{name}")
                                        for name, column in read_fields]))


def log_records(table: pa.Table) -> list[LogRecord]:
    """Kafka rows (topic, partition, offset, value and ``COLUMN``) as the fold's records:
    the registrations the JVM read, built into events here, the rest decoded by the codec."""
    columns = [table.column(name).to_pylist() for name in ("topic", "partition", "offset", "value")]
    decoded = _registrations(table) if COLUMN in table.column_names else None
    if decoded is None:
        return [LogRecord.from_kafka(*row) for row in zip(*columns, strict=True)]
    records = []
    _, fields = _command_member()
    name = f"strata.events.{_COMMAND}"
    vouched, envelopes, commands = decoded
    for topic, partition, offset, value, read, envelope, command in zip(
            *columns, vouched, envelopes, commands, strict=True):
        if not read:
            records.append(LogRecord.from_kafka(topic, partition, offset, value))
            continue
        record = dict(zip(_ENVELOPE_FIELDS, envelope, strict=True))
        record["command"] = (name, dict(zip(fields, command, strict=True)))
        try:
            event = codec.event_from_record(record)
        except codec.DecodeError:
            records.append(LogRecord.from_kafka(topic, partition, offset, value))
            continue
        records.append(LogRecord(LogPosition(topic, partition, offset), value or b"", event=event))
    return records


_Fields = list[tuple[object, ...]]


def _registrations(table: pa.Table) -> tuple[list[bool], _Fields, _Fields] | None:
    """Which records the JVM read, and their envelope's and command's fields in the order of
    ``_ENVELOPE_FIELDS`` and of the command's schema; None if a value does not convert (a time
    out of Python's range), so that the codec decodes the batch and says why."""
    vouched = table.column(COLUMN).to_pylist()
    if not any(vouched):
        return vouched, [()] * len(vouched), [()] * len(vouched)
    _, fields = _command_member()
    try:
        envelopes = list(zip(*(table.column(f"{COLUMN}_{name}").to_pylist() for name in _ENVELOPE_FIELDS),
                             strict=True))
        commands = list(zip(*(table.column(f"{COLUMN}_{name}").to_pylist() for name in fields), strict=True))
    except (UnicodeDecodeError, ValueError, OverflowError):
        return None
    return vouched, envelopes, commands
