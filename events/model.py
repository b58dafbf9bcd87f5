"""Command events as frozen values. Dicts exist only inside ``events.codec``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum


class OnDuplicate(StrEnum):
    """What registering an existing (segment, layer) does; mirrors rerun's OnDuplicateSegmentLayer."""

    ERROR = "error"
    """The first registration in log order wins; later ones are rejected."""
    SKIP = "skip"
    """Later registrations succeed and change nothing."""
    REPLACE = "replace"
    """The last registration in log order wins."""

    @classmethod
    def parse(cls, value: OnDuplicate | str) -> OnDuplicate:
        """``value`` as a mode: a mode, or its name in any case (``"Replace"``), as Rerun's
        ``OnDuplicateSegmentLayer`` values are. ``ValueError`` naming the modes for any other.

        >>> OnDuplicate.parse("SKIP")
        <OnDuplicate.SKIP: 'skip'>
        """
        try:
            return cls(str(value.value if isinstance(value, cls) else value).lower())
        except ValueError:
            raise ValueError(f"on_duplicate must be one of {[m.value for m in cls]}, got {value!r}") from None


@dataclass(frozen=True)
class CreateDataset:
    name: str


class IndexKind(StrEnum):
    """What a timeline counts: Rerun's three kinds of index."""

    TIMESTAMP = "timestamp"
    DURATION = "duration"
    SEQUENCE = "sequence"


@dataclass(frozen=True)
class IndexRange:
    """The first and last value a recording has on one timeline (nanoseconds for times)."""

    timeline: str
    kind: IndexKind
    start: int
    end: int


@dataclass(frozen=True)
class DefineSchema:
    """An Arrow schema that later events name by its digest instead of carrying it.

    Produced once, before the first event that names it; defining a known schema again changes
    nothing.
    """

    sha256: str
    """Hex SHA-256 of ``arrow_schema``."""
    arrow_schema: bytes
    """An Arrow IPC schema message."""


@dataclass(frozen=True)
class RegisterLayer:
    """A recording registered as one layer of its segment.

    Its schema and its properties' schema travel by reference (``schema_sha256``,
    ``properties_schema_sha256``, each defined by an earlier ``DefineSchema``), or inline as
    events before schema version 5 carried them (``arrow_schema``, ``properties``).
    """

    segment_id: str
    layer_name: str
    storage_url: str
    on_duplicate: OnDuplicate = OnDuplicate.ERROR
    size_bytes: int = 0
    schema_sha256: str = ""
    """Digest of the layer's Arrow schema; empty when unknown or given inline."""
    properties_schema_sha256: str = ""
    """Digest of the Arrow schema of ``properties_batch``; empty when there are none."""
    properties_batch: bytes = b""
    """One row, one column per ``property:<entity>:<field>``: a zlib-compressed Arrow IPC record
    batch message in the schema named by ``properties_schema_sha256``."""
    arrow_schema: bytes = b""
    """Inline form: the Arrow IPC schema message of the layer's data."""
    properties: bytes = b""
    """Inline form: an Arrow IPC stream of the properties' one row."""
    num_chunks: int | None = None
    """Chunks in the recording; None when unknown (events before schema version 4)."""
    index_ranges: tuple[IndexRange, ...] = ()
    """Each timeline's first and last value, from the recording's chunk manifest."""


@dataclass(frozen=True)
class RenameDataset:
    name: str


@dataclass(frozen=True)
class DeleteDataset:
    """Removes the dataset and everything in it from every table; its id is never reused."""


@dataclass(frozen=True)
class UnregisterLayers:
    """Removes every (segment, layer) in the product of the two lists; an empty list means all.

    A segment whose last layer goes disappears.
    """

    segment_ids: tuple[str, ...] = ()
    layer_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class RegisterBlueprint:
    """Adds a blueprint (an ``.rbl`` recording) to the dataset, replacing one with the same id."""

    blueprint_id: str
    storage_url: str
    set_default: bool = True


@dataclass(frozen=True)
class SetDefaultBlueprint:
    """The default blueprint of a dataset or a table: a segment of its blueprint dataset."""

    blueprint_id: str | None
    """A blueprint's name, or None for no default."""
    segment_table: bool = False
    """The default of the dataset's segment table rather than of its recordings (datasets only)."""


class AssetMode(StrEnum):
    """Which segments of its dataset an asset applies to; Rerun's ``register_asset(mode=...)``."""

    OPT_OUT = "opt_out"
    """Every segment but those listed."""
    OPT_IN = "opt_in"
    """Only the segments listed."""


class AssetScopeEdit(StrEnum):
    SET = "set"
    """The asset's mode and segments become the command's."""
    APPLY = "apply"
    """The asset applies to the command's segments too: added to an opt-in list, removed from an
    opt-out one."""
    UNAPPLY = "unapply"
    """The asset stops applying to the command's segments."""
    CLEAR = "clear"
    """The asset's scope is removed: it applies to every segment, as one never scoped
    (Rerun's ``delete_segment_properties``)."""


@dataclass(frozen=True)
class ScopeAsset:
    """Which segments of the owner dataset an asset applies to. Acts on the asset dataset; the
    asset is its segment ``segment_id``. Edits are applied in log order by the fold, so two
    clients editing one asset's list never lose each other's edits; a client that edits what it
    read gives the revision it read (``expected_revision``), and the edit is refused if another
    came first."""

    segment_id: str
    edit: AssetScopeEdit
    mode: AssetMode = AssetMode.OPT_OUT
    """Read by ``SET`` only."""
    segments: tuple[str, ...] = ()
    expected_revision: int | None = None
    """Apply the edit only if the scope is at this revision (``AssetScope.revision``; 0: the
    asset has no scope); None: whatever it is."""


@dataclass(frozen=True)
class CreateTable:
    """A new, empty table entry; its rows are kept in the projection (and, with a
    ``storage_url``, copied to a Lance dataset there)."""

    name: str
    arrow_schema: bytes
    """An Arrow IPC schema message. A field whose metadata has ``rerun:is_table_index = true`` is
    the key ``upsert`` matches rows by."""
    storage_url: str = ""
    """Where the projector also keeps the table's rows as a Lance dataset (Rerun's ``url``); empty
    for none. The rows themselves are in the log and the projection either way."""


@dataclass(frozen=True)
class RegisterTable:
    """A table entry for an existing Lance table, read at ``version``; the rows stay in Lance."""

    name: str
    storage_url: str
    arrow_schema: bytes
    version: int


@dataclass(frozen=True)
class RenameTable:
    name: str


@dataclass(frozen=True)
class DeleteTable:
    """Removes the table and its rows; its id is never reused."""


class TableWriteMode(StrEnum):
    APPEND = "append"
    OVERWRITE = "overwrite"
    """The write's rows replace every row of the table."""
    UPSERT = "upsert"
    """A row whose index value is in the table replaces that row; the others are appended."""


@dataclass(frozen=True)
class WriteTable:
    """Rows for a created table. A write larger than one Kafka record travels as ``parts``
    events sharing ``write_id``; it applies, all together, when its last part is folded."""

    mode: TableWriteMode
    rows: bytes
    """An Arrow IPC stream in the table's schema: this part's rows."""
    write_id: str = ""
    part: int = 0
    parts: int = 1


@dataclass(frozen=True)
class CreateTag:
    """Names a point of a dataset's history: the catalog as of log offset ``offset`` (the records
    before it), read later with ``dataset.as_of(name)``. At most the offset of its own event."""

    name: str
    offset: int


@dataclass(frozen=True)
class DeleteTag:
    """Removes a tag of a dataset; the name may be given to another point afterwards."""

    name: str


class SearchIndexKind(StrEnum):
    """What a search index answers: nearest vectors, or full-text queries ranked by BM25."""

    VECTOR = "vector"
    FULL_TEXT = "full_text"


class DistanceMetric(StrEnum):
    """A vector index's distance, with the seed's names (``rerun.catalog.VectorDistanceMetric``)."""

    L2 = "L2"
    COSINE = "Cosine"
    DOT = "Dot"
    HAMMING = "Hamming"


@dataclass(frozen=True)
class CreateSearchIndex:
    """Indexes one component column of a dataset (``entity_path`` and ``component``, as in the
    dataset's schema) on the timeline ``time_index``; replaces the column's index if it has one.
    A vector index takes fixed-size lists of floats (``Hamming``: of bytes, 8 bits each), a
    full-text index strings. The parameters are the seed's ``create_vector_index`` and
    ``create_fts_index`` ones."""

    entity_path: str
    component: str
    time_index: str
    kind: SearchIndexKind
    distance_metric: DistanceMetric = DistanceMetric.L2
    num_partitions: int | None = None
    target_partition_num_rows: int | None = None
    num_sub_vectors: int = 16
    store_position: bool = False
    base_tokenizer: str = "simple"


@dataclass(frozen=True)
class DeleteSearchIndexes:
    """Removes the index of one component column of a dataset."""

    entity_path: str
    component: str


@dataclass(frozen=True)
class MaintainSearchIndexes:
    """Asks for the seed's ``do_maintenance`` on every index of a dataset; the follower that keeps
    the indexes does it. ``cleanup_before``: drop index versions older than this time."""

    optimize_indexes: bool = False
    retrain_indexes: bool = False
    compact_fragments: bool = False
    cleanup_before: datetime | None = None
    unsafe_allow_recent_cleanup: bool = False


Command = (CreateDataset | DefineSchema | RenameDataset | DeleteDataset | RegisterLayer | UnregisterLayers
           | RegisterBlueprint | SetDefaultBlueprint | ScopeAsset | CreateTable | RegisterTable
           | RenameTable | DeleteTable | WriteTable | CreateTag | DeleteTag | CreateSearchIndex
           | DeleteSearchIndexes | MaintainSearchIndexes)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Event:
    """One command, as appended to the log. ``entry_id`` is the id of the entry it acts on: a
    dataset, or a table for the table commands (on the wire, the Avro field ``dataset_id``, its
    name since the first schema version).

    Examples:
        >>> Event(entry_id=uuid.uuid4(), command=CreateDataset("droid")).event_type
        'CreateDataset'
    """

    entry_id: uuid.UUID
    command: Command
    event_id: uuid.UUID = field(default_factory=uuid.uuid4)
    produced_at: datetime = field(default_factory=_now)
    producer_id: str = "strata"

    @property
    def event_type(self) -> str:
        return type(self.command).__name__
