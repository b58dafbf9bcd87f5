"""The projection's rows and the changes one batch makes to them, as frozen values."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Any, NamedTuple

import pyarrow as pa

from events import (
    AssetMode,
    CreateSearchIndex,
    DecodeError,
    Event,
    IndexRange,
    MaintainSearchIndexes,
    RegisterLayer,
    TableWriteMode,
    decode,
)


@dataclass(frozen=True, order=True)
class LogPosition:
    """A record's place in the log. Orders records within one partition, never across topics."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LogRecord:
    """A record as the fold receives it: decoded, or the reason it could not be."""

    position: LogPosition
    raw: bytes
    event: Event | None = None
    decode_error: str | None = None

    @classmethod
    def from_kafka(cls, topic: str, partition: int, offset: int, value: bytes | None) -> LogRecord:
        """A Kafka record, decoded, or carrying the reason it could not be."""
        raw = value or b""
        position = LogPosition(topic, partition, offset)
        try:
            return cls(position, raw, event=decode(raw))
        except DecodeError as exc:
            return cls(position, raw, decode_error=exc.reason)


class SchemaRef(NamedTuple):
    """One distinct layer schema of a dataset and how many of its current layers have it."""

    digest: str
    layers: int


class DatasetKind(StrEnum):
    """What a dataset holds. Every dataset and every table owns a hidden blueprint dataset, and
    every dataset a hidden asset dataset, as in Rerun: created, and deleted, with their owner."""

    DATASET = "dataset"
    BLUEPRINT = "blueprint"
    """The owner's blueprints (``.rbl`` files), one segment each."""
    ASSET = "asset"
    """Static recordings shared by the owner's segments."""


ENTRIES_TABLE_NAME = "__entries"
"""The name of the system table listing every entry, as in Rerun: no entry may take it."""


class EntryKind(IntEnum):
    """What an entry is, with rerun-sdk's values for the kinds strata has."""

    DATASET = 1
    TABLE = 3
    BLUEPRINT_DATASET = 5
    """A dataset's or a table's blueprints, one segment each: hidden."""
    ASSET_DATASET = 6
    """Static recordings shared by a dataset's segments: hidden."""

    def __repr__(self) -> str:
        return f"EntryKind.{self.name}"  # as rerun-sdk prints its kinds

    __str__ = __repr__


_ENTRY_KINDS = {DatasetKind.DATASET: EntryKind.DATASET, DatasetKind.BLUEPRINT: EntryKind.BLUEPRINT_DATASET,
                DatasetKind.ASSET: EntryKind.ASSET_DATASET}
_COMPANION_PREFIXES = {DatasetKind.BLUEPRINT: "__bp_", DatasetKind.ASSET: "__as_"}


def companion_id(owner_id: uuid.UUID, kind: DatasetKind) -> uuid.UUID:
    """The id of an entry's hidden dataset of ``kind``: derived from the owner's, so it is known
    without a lookup and the same in every replay."""
    return uuid.uuid5(owner_id, kind.value)


def companion_name(owner_id: uuid.UUID, kind: DatasetKind) -> str:
    """The name of an entry's hidden dataset of ``kind``, in Rerun's form (``__bp_<owner id>``)."""
    return _COMPANION_PREFIXES[kind] + owner_id.hex


@dataclass(frozen=True)
class Dataset:
    id: uuid.UUID
    name: str
    created_at: datetime
    updated_at: datetime
    deleted: bool = False
    """Deleted datasets stay as tombstones so their id is never reused; their name is free again."""
    schema: bytes = b""
    """The merged Arrow schema of its layers (an IPC schema message); empty when none has one."""
    schema_refs: tuple[SchemaRef, ...] = ()
    """The distinct schemas of its current layers, in order of first registration."""
    default_blueprint: str | None = None
    segments_created: int = 0
    """How many segments were ever created in it: the position of the next new segment."""
    kind: DatasetKind = DatasetKind.DATASET
    default_segment_table_blueprint: str | None = None
    schemaless_layers: int = 0
    """Its current layers registered without a schema (a producer may leave it out): ``schema``
    lacks theirs, which readers learn from the files."""

    @property
    def hidden(self) -> bool:
        """A blueprint or asset dataset: listed only when asked for (``include_hidden``)."""
        return self.kind is not DatasetKind.DATASET

    @property
    def entry_kind(self) -> EntryKind:
        return _ENTRY_KINDS[self.kind]


@dataclass(frozen=True)
class Segment:
    dataset_id: uuid.UUID
    segment_id: str
    created_by: LogPosition
    """The event that registered the segment's first layer: segments are listed in this order."""
    updated_at: datetime
    position: int
    """Its place in the dataset's registration order: 0, 1, 2, ...; a removed segment leaves a gap."""


@dataclass(frozen=True)
class Layer:
    dataset_id: uuid.UUID
    segment_id: str
    layer_name: str
    storage_url: str
    size_bytes: int
    schema_sha256: str
    """Digest of the layer's Arrow schema (its bytes are in the schemas table); empty if unknown."""
    properties: bytes
    """Inline properties (events before envelope v5): a one-row Arrow IPC stream; empty if none."""
    registered_at: datetime
    registered_by: LogPosition
    """The event this layer came from: a segment's layers are listed in this order."""
    event_id: uuid.UUID
    num_chunks: int | None = None
    """Chunks in the recording; None if its registration did not say (before envelope v4)."""
    index_ranges: tuple[IndexRange, ...] = ()
    """The first and last value of each timeline the recording has data on."""
    properties_schema_sha256: str = ""
    """Properties by reference (envelope v5): the digest of their Arrow schema, in the schemas
    table, and ``properties_batch``, their one-row record batch message, zlib-compressed."""
    properties_batch: bytes = b""


@dataclass(frozen=True)
class AssetScope:
    """Which segments of the owner dataset an asset (a segment of its asset dataset) applies to.
    An asset without one applies to every segment, as an opt-out asset with an empty list."""

    dataset_id: uuid.UUID
    """The asset dataset."""
    segment_id: str
    mode: AssetMode = AssetMode.OPT_OUT
    segments: tuple[str, ...] = ()
    revision: int = 0
    """The log offset after the event that last changed it (0: an asset without a scope), which an
    edit of what was read names (``ScopeAsset.expected_revision``)."""

    def applies_to(self, segment_id: str) -> bool:
        """>>> AssetScope(uuid.UUID(int=0), "mesh", AssetMode.OPT_IN, ("ep1",)).applies_to("ep2")
        False
        """
        return (segment_id in self.segments) == (self.mode is AssetMode.OPT_IN)


@dataclass(frozen=True)
class Table:
    """A table entry. Created tables keep their rows in the projection (and a copy at
    ``storage_url`` if they have one); a registered one is a Lance table read at
    ``lance_version``, whose rows stay where they are."""

    id: uuid.UUID
    name: str
    created_at: datetime
    updated_at: datetime
    arrow_schema: bytes
    """Its Arrow schema, an IPC schema message, with the field metadata it was created with."""
    storage_url: str = ""
    """A registered table's Lance URL; for a created table, where the projector keeps a Lance copy
    of its rows (empty: none)."""
    lance_version: int | None = None
    """The version a registered table is read at; None for a created table."""
    deleted: bool = False
    """Deleted tables stay as tombstones so their id is never reused; their name is free again."""
    revision: int = 0
    """How many writes changed its rows: readers holding an older revision read again."""
    default_blueprint: str | None = None
    system: bool = False
    """The catalog's own ``__entries`` table (``views.ENTRIES_TABLE``): read-only, its rows made
    from the entries at each read, never stored."""

    @property
    def registered(self) -> bool:
        """A Lance table registered to be read, whose rows stay in Lance; else created in strata,
        its rows in the log and the projection."""
        return self.lance_version is not None


@dataclass(frozen=True)
class TablePart:
    """One part of a write sent in several, kept until the write's last part arrives."""

    table_id: uuid.UUID
    write_id: str
    part: int
    parts: int
    mode: TableWriteMode
    rows: bytes
    """The part's Arrow IPC stream, checked against the table's schema when it arrived."""


@dataclass(frozen=True)
class TableWrite:
    """Rows that change a created table, decided by the fold; the store applies them in order."""

    table_id: uuid.UUID
    mode: TableWriteMode
    rows: pa.Table
    """In the table's schema. For an upsert, at most one row per index value."""
    index: str | None = None
    """The table's index column, if it has one: the store keeps which rows hold each value."""
    ipc: bytes = b""
    """``rows`` as the Arrow IPC stream the command carried, when the store may keep it as it is
    (one part, the table's types, nothing dropped); empty otherwise."""
    offset: int = 0
    """The log offset of the write's (last) record: the rows are the table's from it on, and the
    rows it replaces were until it."""


class Status(StrEnum):
    """What became of a command. Everything but ``ACCEPTED`` changed nothing."""

    ACCEPTED = "accepted"
    ALREADY_EXISTS = "already_exists"
    """The name, or the (segment, layer) with on_duplicate=error, is taken."""
    NOT_FOUND = "not_found"
    """The dataset (or blueprint) it names does not exist, or no longer does."""
    INVALID = "invalid"
    """The command can never be applied: bad names, empty fields, ..."""
    SCHEMA_CONFLICT = "schema_conflict"
    """The layer's schema clashes with the dataset's."""
    REVISION_CONFLICT = "revision_conflict"
    """What the command edits changed since the revision it names."""


@dataclass(frozen=True)
class Outcome:
    """What the projector decided for one event, for the SDK to report."""

    event_id: uuid.UUID
    position: LogPosition
    status: Status
    reason: str = ""


@dataclass(frozen=True)
class Rejection:
    """A record that was bad input: kept with its raw bytes so nothing is lost."""

    position: LogPosition
    raw: bytes
    reason: str
    event_id: uuid.UUID | None = None


class ChangeKind(StrEnum):
    """What one change in the feed did. ``Change.detail`` says more for some kinds."""

    DATASET_CREATED = "dataset_created"
    DATASET_RENAMED = "dataset_renamed"
    """detail: the dataset's previous name."""
    DATASET_DELETED = "dataset_deleted"
    """After the removal of each of its layers and segments, which come first."""
    SEGMENT_ADDED = "segment_added"
    """After the change of the layer that made it."""
    SEGMENT_REMOVED = "segment_removed"
    """After the removal of its last layer."""
    LAYER_ADDED = "layer_added"
    """detail: the recording's storage URL."""
    LAYER_REPLACED = "layer_replaced"
    """Registered again with on_duplicate=replace. detail: the new storage URL."""
    LAYER_REMOVED = "layer_removed"
    DEFAULT_BLUEPRINT_SET = "default_blueprint_set"
    """detail: the blueprint's id, after ``segment table `` for the segment table's default;
    empty when the default was cleared."""
    ASSET_SCOPED = "asset_scoped"
    """Which segments an asset (the change's segment, in an asset dataset) applies to changed.
    detail: its mode and segments, e.g. ``opt_in ep1,ep2``."""
    TABLE_CREATED = "table_created"
    """Created in strata, or registered (detail: the Lance table's URL)."""
    TABLE_RENAMED = "table_renamed"
    """detail: the table's previous name."""
    TABLE_DELETED = "table_deleted"
    TABLE_ROWS_WRITTEN = "table_rows_written"
    """detail: the write's mode and how many rows it had, e.g. ``append 3 rows``."""
    TAG_CREATED = "tag_created"
    """The change's layer_name is empty; detail: the tag's name and offset, e.g. ``train 1200``."""
    TAG_DELETED = "tag_deleted"
    """detail: the tag's name."""
    SEARCH_INDEX_CREATED = "search_index_created"
    """detail: the column, its kind and timeline, e.g. ``/camera:embedding vector on frame``."""
    SEARCH_INDEX_DELETED = "search_index_deleted"
    """detail: the column."""
    SEARCH_INDEXES_MAINTAINED = "search_indexes_maintained"
    """detail: the maintenance asked for, e.g. ``optimize_indexes retrain_indexes``."""
    REJECTED = "rejected"
    """A record that was bad input (see ``Rejection``). detail: the reason."""


@dataclass(frozen=True)
class Change:
    """One entry of the change feed: a change a record made to the catalog. A record makes none
    (a conflict, a duplicate) or several (a layer and the segment it created), numbered by
    ``seq``; the feed is in (offset, seq) order, which is log order."""

    position: LogPosition
    """The record that made the change."""
    seq: int
    kind: ChangeKind
    entry_id: uuid.UUID | None
    """The dataset or table changed; for a rejection, the entry its command named, if any."""
    entry_name: str = ""
    """The entry's name after the change (before it, for a deletion); empty if none."""
    segment_id: str = ""
    layer_name: str = ""
    detail: str = ""
    committed_at: datetime | None = None
    """When the store committed it; set by the store when the change is read back."""

    @property
    def cursor(self) -> tuple[int, int]:
        """Where the change is in the feed: (offset, seq)."""
        return self.position.offset, self.seq


@dataclass(frozen=True)
class Tag:
    """A name for a point of a dataset's history: the catalog as of log offset ``offset``."""

    dataset_id: uuid.UUID
    name: str
    offset: int
    created_at: datetime


@dataclass(frozen=True)
class SearchIndex:
    """A search index of one component column of a dataset, as its last ``CreateSearchIndex``
    defined it. Its rows are derived (``search``): ``created_offset`` tells a rebuilt or
    replaced index from the one before, ``maintained_offset`` the last maintenance asked for."""

    dataset_id: uuid.UUID
    entity_path: str
    component: str
    definition: CreateSearchIndex
    created_offset: int
    created_at: datetime
    maintenance: MaintainSearchIndexes | None = None
    maintained_offset: int = -1

    @property
    def column(self) -> str:
        """The column's name in the dataset's schema, ``<entity_path>:<component>``."""
        return f"{self.entity_path}:{self.component}"


class Versioned(StrEnum):
    """The projection's rows whose past is kept: ``Version.key`` is the row's key in its kind."""

    DATASET = "dataset"
    SEGMENT = "segment"
    LAYER = "layer"
    ASSET_SCOPE = "asset_scope"
    TABLE = "table"
    TAG = "tag"
    PURGE = "purge"
    """Every segment, layer, asset scope and tag of the entry ``key[0]`` goes (a deleted dataset)."""


class Version(NamedTuple):
    """A row as one record of the log left it: from ``offset`` on, the row of ``key`` is ``row``
    (None: there is none), until a later version of the same key."""

    offset: int
    kind: Versioned
    key: tuple[Any, ...]
    row: Any


class RunWrite(NamedTuple):
    """An accepted registration that made a new version of its layer."""

    offset: int
    event_id: uuid.UUID
    command: RegisterLayer
    registered_at: datetime
    replaced: bool
    """It replaced a layer of the same (segment, layer name): the feed says ``layer_replaced``."""
    created: bool
    """It created its segment."""
    position: int
    """Its segment's position."""
    entry_name: str
    """The dataset's name when it was folded, as the feed names it."""

    @property
    def change_kind(self) -> ChangeKind:
        """What the feed says the write did to its layer."""
        return ChangeKind.LAYER_REPLACED if self.replaced else ChangeKind.LAYER_ADDED


@dataclass(slots=True)
class RunSegment:
    """A segment whose row a run holds: one it created, or a stored one it registered into."""

    created_by: LogPosition
    position: int
    updated_at: datetime
    changed: bool
    """Its row differs from the stored one: created, or its ``updated_at`` moved."""


@dataclass
class LayerRun:
    """Registrations into one dataset, from one (topic, partition), in log order, folded as lists
    (``projector.batch_fold``): what ``projector.fold.fold`` would have made of them as one
    ``Outcome``, ``Layer``, ``Segment``, ``Change`` and ``Version`` each, which
    ``projector.layer_runs.materialize_into`` makes."""

    dataset_id: uuid.UUID
    topic: str
    partition: int
    outcomes: list[tuple[int, uuid.UUID, str]] = field(default_factory=list)
    """(offset, event id, reason) of every record folded into the run: accepted when the reason
    is empty, else refused as already existing (``on_duplicate="error"``)."""
    writes: list[RunWrite] = field(default_factory=list)
    latest: dict[tuple[str, str], int] = field(default_factory=dict)
    """(segment, layer name): the index in ``writes`` of the layer's current version."""
    replaced: list[tuple[Layer, int, int]] = field(default_factory=list)
    """The stored layers the run replaced: (layer, its segment's position, the offset of the
    registration that replaced it)."""
    segments: dict[str, RunSegment] = field(default_factory=dict)
    event_ids: set[uuid.UUID] = field(default_factory=set)
    """Every event the run decided."""

    def position(self, offset: int) -> LogPosition:
        return LogPosition(self.topic, self.partition, offset)

    @staticmethod
    def status(reason: str) -> Status:
        """The status of an outcome of ``outcomes`` with ``reason``."""
        return Status.ALREADY_EXISTS if reason else Status.ACCEPTED

    def layer(self, write: RunWrite) -> Layer:
        """The layer a write made, as the per-event fold makes it."""
        command = write.command
        return Layer(
            dataset_id=self.dataset_id, segment_id=command.segment_id, layer_name=command.layer_name,
            storage_url=command.storage_url, size_bytes=command.size_bytes,
            schema_sha256=command.schema_sha256, properties=b"", registered_at=write.registered_at,
            registered_by=self.position(write.offset), event_id=write.event_id,
            num_chunks=command.num_chunks, index_ranges=command.index_ranges,
            properties_schema_sha256=command.properties_schema_sha256,
            properties_batch=command.properties_batch)

    def segment(self, segment_id: str, row: RunSegment) -> Segment:
        return Segment(self.dataset_id, segment_id, row.created_by, row.updated_at, row.position)

    def closed_writes(self) -> list[tuple[RunWrite, int]]:
        """The writes a later write of the same layer replaced within the run, each with the
        offset of the one that replaced it."""
        following: dict[tuple[str, str], int] = {}
        closed = []
        for write in reversed(self.writes):
            key = (write.command.segment_id, write.command.layer_name)
            if key in following:
                closed.append((write, following[key]))
            following[key] = write.offset
        closed.reverse()
        return closed


@dataclass
class Changes:
    """Everything one batch changes, committed by the store in one transaction."""

    datasets: dict[uuid.UUID, Dataset] = field(default_factory=dict)
    segments: dict[tuple[uuid.UUID, str], Segment | None] = field(default_factory=dict)
    """None: the segment was removed."""
    layers: dict[tuple[uuid.UUID, str, str], Layer | None] = field(default_factory=dict)
    """None: the layer was removed."""
    asset_scopes: dict[tuple[uuid.UUID, str], AssetScope | None] = field(default_factory=dict)
    """None: the asset's scope was dropped (its segment was removed)."""
    schemas: dict[str, bytes] = field(default_factory=dict)
    """Layer schemas by digest; content-addressed, so never changed once written."""
    tables: dict[uuid.UUID, Table] = field(default_factory=dict)
    table_writes: list[TableWrite] = field(default_factory=list)
    """In log order: the store applies them one after the other."""
    table_parts: dict[tuple[uuid.UUID, str, int], TablePart | None] = field(default_factory=dict)
    """Parts of writes still waiting for their last part; None: the part is no longer kept."""
    tags: dict[tuple[uuid.UUID, str], Tag | None] = field(default_factory=dict)
    """None: the tag was deleted."""
    search_indexes: dict[tuple[uuid.UUID, str, str], SearchIndex | None] = field(default_factory=dict)
    """By (dataset id, entity path, component); None: the index was deleted."""
    purged: set[uuid.UUID] = field(default_factory=set)
    """Deleted datasets: every segment and layer of theirs goes, before the rest."""
    history: list[Version] = field(default_factory=list)
    """Every change of a versioned row, in log order, the batch's intermediate states included:
    what the store keeps to answer "as of" an offset."""
    outcomes: dict[uuid.UUID, Outcome] = field(default_factory=dict)
    rejections: list[Rejection] = field(default_factory=list)
    feed: list[Change] = field(default_factory=list)
    """The batch's entries of the change feed, in log order."""
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """For every (topic, partition) in the batch: the offset after its last record."""
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """For every (topic, partition) in the batch: the offset of its first record."""
    records: dict[tuple[str, int], int] = field(default_factory=dict)
    """For every (topic, partition) in the batch: how many of its records were folded."""
    runs: list[LayerRun] = field(default_factory=list)
    """Registrations the batch fold (``projector.batch_fold``) kept as columns: their outcomes,
    layers, segments, history and feed entries are in these runs, not in the fields above, and
    touch none of the rows those hold (``projector.layer_runs.materialized`` moves them there)."""

    def statuses(self) -> list[Status]:
        """The status of every outcome, those of the runs included."""
        found = [outcome.status for outcome in self.outcomes.values()]
        for run in self.runs:
            found += [run.status(reason) for _, _, reason in run.outcomes]
        return found
