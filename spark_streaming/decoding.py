"""Kafka records decoded by Spark's tasks, and the fold's records made of them in the driver.

Decoding is most of a registration's cost in the driver (fastavro, then the event's objects:
about 23 µs of the 28 µs it takes from Kafka's rows to the fold's records). A task decodes its
rows instead (``decode_partitions``, run by ``DataFrame.mapInArrow`` on each contiguous part of a
batch's offsets) into ``DECODED``: a registration's fields as columns, every other record as its
bytes alone (a few per batch: the driver decodes those itself). The driver then makes the fold's
records of those columns (``records``) in a fraction of the time, and what it makes is what
``folding.decode_batch`` makes of the same rows, record for record, so the fold's input, and the
fold, are unchanged.

A task answers one row: the first offset of its part and its columns as one Arrow IPC stream, so
the columns reach the driver as the task wrote them, whatever Spark's types would make of them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from events import DecodeError, Event, IndexKind, IndexRange, OnDuplicate, RegisterLayer, decode
from projector import LogPosition, LogRecord

_RANGE = pa.struct([("timeline", pa.string()), ("kind", pa.string()), ("start", pa.int64()),
                    ("end", pa.int64())])
DECODED = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("raw", pa.binary()),
    ("decode_error", pa.string()),
    # A registration's event; null for any other record.
    ("entry_id", pa.binary(16)), ("event_id", pa.binary(16)), ("produced_at_us", pa.int64()),
    ("producer_id", pa.string()),
    ("segment_id", pa.string()), ("layer_name", pa.string()), ("storage_url", pa.string()),
    ("on_duplicate", pa.string()), ("size_bytes", pa.int64()), ("schema_sha256", pa.string()),
    ("properties_schema_sha256", pa.string()), ("properties_batch", pa.binary()),
    ("arrow_schema", pa.binary()), ("properties", pa.binary()), ("num_chunks", pa.int64()),
    ("index_ranges", pa.list_(_RANGE)),
])
"""A batch's records as a task decodes them (see the module)."""

PART = "first_offset long, records long, decoded binary"
"""What each task answers (Spark's DDL): its part's first offset, its records, and ``DECODED``
as an Arrow IPC stream."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DUPLICATES = {mode.value: mode for mode in OnDuplicate}
_KINDS = {kind.value: kind for kind in IndexKind}
_EVENT_FIELDS = ("entry_id", "event_id", "produced_at_us", "producer_id")
_REGISTER_FIELDS = ("segment_id", "layer_name", "storage_url", "on_duplicate", "size_bytes", "schema_sha256",
                    "properties_schema_sha256", "properties_batch", "arrow_schema", "properties",
                    "num_chunks", "index_ranges")


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def decode_columns(rows: pa.Table) -> pa.Table:
    """Kafka rows (``folding.KAFKA_COLUMNS``) decoded into ``DECODED``."""
    columns: dict[str, list[object]] = {field.name: [] for field in DECODED}
    topics, partitions, offsets, values = (rows.column(name).to_pylist()
                                           for name in ("topic", "partition", "offset", "value"))
    for topic, partition, offset, value in zip(topics, partitions, offsets, values, strict=True):
        raw = value or b""
        columns["topic"].append(topic)
        columns["partition"].append(partition)
        columns["offset"].append(offset)
        columns["raw"].append(raw)
        event: Event | None = None
        try:
            event = decode(raw)
            columns["decode_error"].append(None)
        except DecodeError as exc:
            columns["decode_error"].append(exc.reason)
        command = event.command if event is not None else None
        if event is None or type(command) is not RegisterLayer:
            for name in (*_EVENT_FIELDS, *_REGISTER_FIELDS):
                columns[name].append(None)
            continue
        assert isinstance(command, RegisterLayer)
        columns["entry_id"].append(event.entry_id.bytes)
        columns["event_id"].append(event.event_id.bytes)
        columns["produced_at_us"].append(_micros(event.produced_at))
        columns["producer_id"].append(event.producer_id)
        for name in _REGISTER_FIELDS:
            columns[name].append(getattr(command, name))
        columns["on_duplicate"][-1] = command.on_duplicate.value
        columns["index_ranges"][-1] = [{"timeline": r.timeline, "kind": r.kind.value, "start": r.start,
                                        "end": r.end} for r in command.index_ranges]
    return pa.table(columns, schema=DECODED)


def records(decoded: pa.Table) -> list[LogRecord]:
    """The fold's records of ``DECODED`` rows: ``folding.decode_batch`` of the same Kafka rows."""
    found: list[LogRecord] = []
    column = {name: decoded.column(name).to_pylist() for name in DECODED.names}
    topics, partitions, offsets, raws, errors = (column[name] for name in
                                                 ("topic", "partition", "offset", "raw", "decode_error"))
    entry_ids, event_ids, produced, producers = (column[name] for name in _EVENT_FIELDS)
    segments, layers, urls, duplicates, sizes, digests, property_digests, batches, schemas, properties, \
        chunks, ranges = (column[name] for name in _REGISTER_FIELDS)
    entries: dict[bytes, uuid.UUID] = {}  # a batch's registrations name a few datasets
    for i, raw in enumerate(raws):
        position = LogPosition(topics[i], partitions[i], offsets[i])
        if errors[i] is not None:
            found.append(LogRecord(position, raw, decode_error=errors[i]))
            continue
        if segments[i] is None:  # not a registration: decoded here
            found.append(LogRecord(position, raw, event=decode(raw)))
            continue
        command = RegisterLayer(
            segments[i], layers[i], urls[i], _DUPLICATES[duplicates[i]], sizes[i], digests[i],
            property_digests[i], batches[i], schemas[i], properties[i], chunks[i],
            tuple(IndexRange(r["timeline"], _KINDS[r["kind"]], r["start"], r["end"]) for r in ranges[i]))
        entry = entries.get(entry_ids[i])
        if entry is None:
            entry = entries[entry_ids[i]] = uuid.UUID(bytes=entry_ids[i])
        event = Event(entry, command, uuid.UUID(bytes=event_ids[i]),
                      _EPOCH + timedelta(microseconds=produced[i]), producers[i])
        found.append(LogRecord(position, raw, event=event))
    return found


def decode_partitions(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """What ``DataFrame.mapInArrow`` runs on each task's Kafka rows: one row of ``PART``."""
    read = [batch for batch in batches if batch.num_rows]
    if not read:
        return
    rows = pa.Table.from_batches(read)
    decoded = decode_columns(rows)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, DECODED) as writer:
        writer.write_table(decoded)
    yield pa.RecordBatch.from_pydict(
        {"first_offset": [rows.column("offset")[0].as_py()], "records": [rows.num_rows],
         "decoded": [sink.getvalue().to_pybytes()]},
        schema=pa.schema([("first_offset", pa.int64()), ("records", pa.int64()), ("decoded", pa.binary())]))


def parts_in_order(parts: pa.Table) -> pa.Table:
    """The tasks' answers (``PART``) as one ``DECODED`` table, in offset order."""
    ordered = parts.sort_by("first_offset")
    tables = [pa.ipc.open_stream(blob).read_all() for blob in ordered.column("decoded").to_pylist()]
    return pa.concat_tables(tables) if tables else DECODED.empty_table()
