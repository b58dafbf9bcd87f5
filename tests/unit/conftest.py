"""Shared helpers for the unit tier: an in-memory ``FoldReader``, builders of events and log
records, Arrow schemas for layers, and the fixtures ``stack`` (a catalog without a broker or
Spark, ``in_process.InProcessStack``) and ``served`` (Rerun's catalog protocol served on it).

Everything here is plain Python: no Kafka, no Spark.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import events
import protocol
from events import (
    CreateDataset,
    CreateTable,
    DefineSchema,
    DeleteDataset,
    Event,
    OnDuplicate,
    RegisterBlueprint,
    RegisterLayer,
    RenameDataset,
    SetDefaultBlueprint,
    TableWriteMode,
    UnregisterLayers,
    WriteTable,
)
from projector import (
    AssetScope,
    Change,
    Changes,
    Dataset,
    Layer,
    LogPosition,
    LogRecord,
    Outcome,
    Rejection,
    SearchIndex,
    Segment,
    Table,
    TablePart,
    Tag,
    fold,
    layer_table,
    table_rows,
)
from protocol import descriptors

if TYPE_CHECKING:
    from .in_process import InProcessStack

T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
"""A fixed clock for events, with microseconds so exact round trips are tested."""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class MemoryCatalog:
    """``projector.fold.FoldReader`` on plain dicts, plus ``apply`` to merge a batch's Changes the
    way a store commits them."""

    def __init__(self) -> None:
        self.datasets: dict[uuid.UUID, Dataset] = {}
        """Also the deleted ones (tombstones)."""
        self.segments: dict[tuple[uuid.UUID, str], Segment] = {}
        self.layer_rows: dict[tuple[uuid.UUID, str, str], Layer] = {}
        self.scopes: dict[tuple[uuid.UUID, str], AssetScope] = {}
        self.tag_rows: dict[tuple[uuid.UUID, str], Tag] = {}
        self.index_rows: dict[tuple[uuid.UUID, str, str], SearchIndex] = {}
        self.schemas: dict[str, bytes] = {}
        self.outcomes: dict[uuid.UUID, Outcome] = {}
        self.rejections: list[Rejection] = []
        self.next_offsets: dict[tuple[str, int], int] = {}
        self.tables: dict[uuid.UUID, Table] = {}
        """Also the deleted ones (tombstones)."""
        self.parts: dict[tuple[uuid.UUID, str, int], TablePart] = {}
        self.rows: dict[uuid.UUID, pa.Table] = {}
        """Each created table's rows, in the order the writes leave them."""
        self.feed: list[Change] = []

    # -- FoldReader ----------------------------------------------------------------------------

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        return self.datasets.get(dataset_id)

    def dataset_by_name(self, name: str) -> Dataset | None:
        live = [d for d in self.datasets.values() if d.name == name and not d.deleted]
        assert len(live) <= 1, f"two live datasets named {name!r}: {live}"
        return live[0] if live else None

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        return self.segments.get((dataset_id, segment_id))

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        return self.layer_rows.get((dataset_id, segment_id, layer_name))

    def layers(self, dataset_id: uuid.UUID) -> list[Layer]:
        """Grouped by segment (in segment order), each segment's layers in registration order, as
        ``ProjectionWriter.layers`` lists them."""
        rank = {s.segment_id: s.created_by for (d, _), s in self.segments.items() if d == dataset_id}
        return sorted((x for (d, _, _), x in self.layer_rows.items() if d == dataset_id),
                      key=lambda x: (rank[x.segment_id], x.registered_by))

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        return [x for (d, s, n), x in self.layer_rows.items() if d == dataset_id
                and (not segment_ids or s in segment_ids) and (not layer_names or n in layer_names)]

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        return self.scopes.get((dataset_id, segment_id))

    def schema(self, digest: str) -> bytes | None:
        return self.schemas.get(digest)

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return event_id in self.outcomes

    def table(self, table_id: uuid.UUID) -> Table | None:
        return self.tables.get(table_id)

    def table_by_name(self, name: str) -> Table | None:
        live = [t for t in self.tables.values() if t.name == name and not t.deleted]
        assert len(live) <= 1, f"two live tables named {name!r}: {live}"
        return live[0] if live else None

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        return sorted((p for (t, w, _), p in self.parts.items() if (t, w) == (table_id, write_id)),
                      key=lambda p: p.part)

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        return self.tag_rows.get((dataset_id, name))

    def search_index(self, dataset_id: uuid.UUID, entity_path: str, component: str) -> SearchIndex | None:
        return self.index_rows.get((dataset_id, entity_path, component))

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        return [i for k, i in sorted(self.index_rows.items()) if k[0] == dataset_id]

    # -- merging a batch ------------------------------------------------------------------------

    def apply(self, changes: Changes) -> None:
        for table in (self.segments, self.layer_rows, self.scopes, self.tag_rows, self.index_rows):
            for key in [k for k in table if k[0] in changes.purged]:
                del table[key]
        self.datasets.update(changes.datasets)
        for table, changed in ((self.segments, changes.segments), (self.layer_rows, changes.layers),
                               (self.scopes, changes.asset_scopes), (self.tag_rows, changes.tags),
                               (self.index_rows, changes.search_indexes)):
            for key, value in changed.items():
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = value
        for digest, schema_bytes in changes.schemas.items():
            assert self.schemas.setdefault(digest, schema_bytes) == schema_bytes
        for key in [k for k in self.parts if k[0] in changes.purged]:
            del self.parts[key]
        self.tables.update(changes.tables)
        for key, part in changes.table_parts.items():
            if part is None:
                self.parts.pop(key, None)
            else:
                self.parts[key] = part
        for write in changes.table_writes:
            old = self.rows.get(write.table_id, write.rows.schema.empty_table())
            if write.mode == "overwrite":
                old = old.schema.empty_table()
            elif write.mode == "upsert":
                replaced = table_rows.key_texts(write.rows, write.index)
                old = old.filter(pc.invert(pc.is_in(table_rows.key_texts(old, write.index),
                                                    value_set=replaced.combine_chunks())))
            self.rows[write.table_id] = pa.concat_tables([old, write.rows])
        for table_id in changes.purged:  # after the writes, which may precede the delete in the batch
            self.rows.pop(table_id, None)
        self.outcomes.update(changes.outcomes)
        self.rejections.extend(changes.rejections)
        self.feed.extend(changes.feed)
        self.next_offsets.update(changes.next_offsets)

    # -- reads for tests ------------------------------------------------------------------------

    def ordered_layers(self, dataset_id: uuid.UUID, segment_id: str) -> list[Layer]:
        """A segment's layers in registration (log) order."""
        return [x for x in self.layers(dataset_id) if x.segment_id == segment_id]

    def segment_ids(self, dataset_id: uuid.UUID) -> list[str]:
        """The dataset's segments in the order they are listed (by their first layer)."""
        return [s.segment_id for s in sorted(
            (s for (d, _), s in self.segments.items() if d == dataset_id), key=lambda s: s.created_by)]

    def snapshot(self) -> dict[str, object]:
        """Everything, in comparable form."""
        return {
            "datasets": dict(self.datasets),
            "segments": dict(self.segments),
            "layers": dict(self.layer_rows),
            "scopes": dict(self.scopes),
            "tags": dict(self.tag_rows),
            "search_indexes": dict(self.index_rows),
            "schemas": dict(self.schemas),
            "tables": dict(self.tables),
            "parts": dict(self.parts),
            "rows": {t: rows.to_pylist() for t, rows in self.rows.items()},
            "outcomes": dict(self.outcomes),
            "rejections": sorted(self.rejections, key=lambda r: r.position),
            "feed": list(self.feed),
            "next_offsets": dict(self.next_offsets),
        }


def fold_into(catalog: MemoryCatalog, records: list[LogRecord]) -> Changes:
    """Fold one batch on top of ``catalog`` and merge the result, as the store would."""
    changes = fold(catalog, records)
    catalog.apply(changes)
    return changes


# -- log records ------------------------------------------------------------------------------


def log_record(event: Event, offset: int, partition: int = 0, topic: str | None = None) -> LogRecord:
    """The record the projector would see for ``event`` at the given position."""
    position = LogPosition(topic or events.topic_for(event.command), partition, offset)
    return LogRecord(position, events.encode(event), event=event)


def undecodable(raw: bytes, offset: int, *, topic: str = events.CATALOG_TOPIC, partition: int = 0,
                reason: str = "x") -> LogRecord:
    return LogRecord(LogPosition(topic, partition, offset), raw, event=None, decode_error=reason)


@dataclass
class Log:
    """Appends events like the broker does to the one catalog topic: offsets 0, 1, 2, ..."""

    records: list[LogRecord] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        return len(self.records)

    def append(self, event: Event) -> LogRecord:
        record = log_record(event, self.next_offset)
        assert record.position.topic == events.CATALOG_TOPIC
        self.records.append(record)
        return record

    def append_raw(self, raw: bytes, *, reason: str = "x") -> LogRecord:
        record = undecodable(raw, self.next_offset, reason=reason)
        self.records.append(record)
        return record


def split(records: list[LogRecord], cuts: list[int]) -> list[list[LogRecord]]:
    """``records`` cut into consecutive batches before each index in ``cuts``."""
    bounds = [0, *sorted(cuts), len(records)]
    return [records[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


# -- events -----------------------------------------------------------------------------------


def create(dataset_id: uuid.UUID, name: str, *, when: datetime = T0, **kwargs) -> Event:
    return Event(dataset_id, CreateDataset(name), produced_at=when, **kwargs)


def rename(dataset_id: uuid.UUID, name: str, *, when: datetime = T0, **kwargs) -> Event:
    return Event(dataset_id, RenameDataset(name), produced_at=when, **kwargs)


def delete(dataset_id: uuid.UUID, *, when: datetime = T0, **kwargs) -> Event:
    return Event(dataset_id, DeleteDataset(), produced_at=when, **kwargs)


def register(
    dataset_id: uuid.UUID,
    segment_id: str,
    layer_name: str = "base",
    *,
    on_duplicate: OnDuplicate = OnDuplicate.ERROR,
    url: str | None = None,
    size_bytes: int = 10,
    when: datetime = T0,
    properties: bytes = b"",
    schema: bytes = b"",
    num_chunks: int | None = None,
    index_ranges: tuple = (),
    schema_sha256: str = "",
    properties_schema_sha256: str = "",
    properties_batch: bytes = b"",
    **kwargs,
) -> Event:
    """A RegisterLayer event; ``schema`` and ``properties`` inline, as before envelope v5, or the
    by-reference fields."""
    command = RegisterLayer(
        segment_id=segment_id,
        layer_name=layer_name,
        storage_url=url or f"file:///data/{segment_id}.{layer_name}.rrd",
        on_duplicate=on_duplicate,
        size_bytes=size_bytes,
        arrow_schema=schema,
        properties=properties,
        num_chunks=num_chunks,
        index_ranges=index_ranges,
        schema_sha256=schema_sha256,
        properties_schema_sha256=properties_schema_sha256,
        properties_batch=properties_batch,
    )
    return Event(dataset_id, command, produced_at=when, **kwargs)


def define(dataset_id: uuid.UUID, schema: bytes, *, sha256: str | None = None, when: datetime = T0,
           **kwargs) -> Event:
    """A DefineSchema event, with the schema's own digest unless ``sha256`` says otherwise."""
    digest = hashlib.sha256(schema).hexdigest() if sha256 is None else sha256
    return Event(dataset_id, DefineSchema(digest, schema), produced_at=when, **kwargs)


def unregister(dataset_id: uuid.UUID, segment_ids=(), layer_names=(), *, when: datetime = T0,
               **kwargs) -> Event:
    return Event(dataset_id, UnregisterLayers(tuple(segment_ids), tuple(layer_names)),
                 produced_at=when, **kwargs)


def register_blueprint(dataset_id: uuid.UUID, blueprint_id: str, *, url: str | None = None,
                       set_default: bool = True, when: datetime = T0, **kwargs) -> Event:
    url = f"file:///blueprints/{blueprint_id}.rbl" if url is None else url
    command = RegisterBlueprint(blueprint_id, url, set_default)
    return Event(dataset_id, command, produced_at=when, **kwargs)


def set_default_blueprint(dataset_id: uuid.UUID, blueprint_id: str | None, *, when: datetime = T0,
                          **kwargs) -> Event:
    return Event(dataset_id, SetDefaultBlueprint(blueprint_id), produced_at=when, **kwargs)


# -- tables -----------------------------------------------------------------------------------

LABELS = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"rerun:is_table_index": b"true"}),
                    pa.field("label", pa.string())])
"""A table schema with an index column, as Rerun marks one."""


def rows_ipc(rows: pa.Table | list[dict], schema: pa.Schema = LABELS) -> bytes:
    """Rows as an Arrow IPC stream, the way ``WriteTable`` carries them."""
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def create_table(table_id: uuid.UUID, name: str, schema: pa.Schema = LABELS, *, when: datetime = T0,
                 **kwargs) -> Event:
    return Event(table_id, CreateTable(name, schema.serialize().to_pybytes()), produced_at=when, **kwargs)


def write(table_id: uuid.UUID, mode: str, rows: pa.Table | list[dict] | bytes, *, when: datetime = T0,
          write_id: str = "", part: int = 0, parts: int = 1, **kwargs) -> Event:
    data = rows if isinstance(rows, bytes) else rows_ipc(rows)
    return Event(table_id, WriteTable(TableWriteMode(mode), data, write_id, part, parts),
                 produced_at=when, **kwargs)


# -- Arrow schemas ----------------------------------------------------------------------------


def arrow_schema(*fields: pa.Field | tuple[str, pa.DataType]) -> bytes:
    """A layer's schema as the SDK sends it: an Arrow IPC schema message."""
    return pa.schema(list(fields)).serialize().to_pybytes()


def parsed(schema_bytes: bytes) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(schema_bytes))


@pytest.fixture
def catalog() -> MemoryCatalog:
    return MemoryCatalog()


@pytest.fixture
def log() -> Log:
    return Log()


def table_of(layers: list[Layer], positions: dict[str, int] | None = None) -> pa.Table:
    """``Layer`` values, in this order, as the layer table ``SqliteStore.layer_table`` gives, their
    segments at ``positions`` (segment id: position; by default in order of first appearance)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    if positions is None:
        first_seen = dict.fromkeys(x.segment_id for x in layers)
        positions = {segment_id: n for n, segment_id in enumerate(first_seen)}
    return layer_table.from_rows([(x.segment_id, x.layer_name, x.storage_url, x.size_bytes,
                                   (x.registered_at - epoch) // timedelta(microseconds=1),
                                   x.schema_sha256, x.properties, x.num_chunks,
                                   layer_table.ranges_text(x.index_ranges), x.properties_schema_sha256,
                                   x.properties_batch, x.registered_by.offset, positions[x.segment_id])
                                  for x in layers])


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessStack]:
    from .in_process import InProcessStack  # it builds its events with this module's helpers

    made = InProcessStack(tmp_path, monkeypatch)
    yield made
    made.close()


@pytest.fixture
def served(stack: InProcessStack) -> Iterator[protocol.ProtocolServer]:
    """Rerun's catalog protocol on ``stack``'s catalog, on a free port."""
    with protocol.serve(stack.catalog, port=0) as server:
        yield server


def rpc(server: protocol.ProtocolServer, name: str, request: object = None,
        metadata: tuple[tuple[str, str], ...] = (), timeout_secs: float = 30) -> object:
    """The answer of the RPC ``name`` (a list for a server stream). ``request`` is a message, its
    bytes, or a list of them for a client stream; None is the empty request (no request, for a
    client stream)."""
    method = descriptors.service().methods_by_name[name]
    output = descriptors.message_class(method.output_type.full_name)
    if request is None:
        request = [] if method.client_streaming else descriptors.message_class(method.input_type.full_name)()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        kind = {(False, False): channel.unary_unary, (False, True): channel.unary_stream,
                (True, False): channel.stream_unary, (True, True): channel.stream_stream}[
                    (method.client_streaming, method.server_streaming)]
        stub = kind(f"/{protocol.SERVICE}/{name}",
                    request_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
                    response_deserializer=output.FromString)
        answer = stub(iter(request) if method.client_streaming else request,  # type: ignore[call-overload]
                      metadata=metadata, timeout=timeout_secs)
        return list(answer) if method.server_streaming else answer
