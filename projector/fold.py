"""The fold: what each command does to the catalog. Pure: no I/O, no clock, no Kafka, no Spark.

``fold(view, records)`` reads the current projection through the read-only ``FoldReader`` and
returns the ``Changes`` that the records make. Outcomes depend only on the records' order in the
log, never on clocks or batch boundaries.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pyarrow as pa

from events import (
    AssetMode,
    AssetScopeEdit,
    CreateDataset,
    CreateSearchIndex,
    CreateTable,
    CreateTag,
    DefineSchema,
    DeleteDataset,
    DeleteSearchIndexes,
    DeleteTable,
    DeleteTag,
    Event,
    MaintainSearchIndexes,
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
)
from events.names import (
    MAX_NAME_LENGTH,
    MAX_PROPERTIES_BYTES,
    check_dataset_name,
    check_id,
    check_table_name,
    check_tag_name,
)
from projector import registration, schemas, search_indexes, table_rows
from projector.model import (
    ENTRIES_TABLE_NAME,
    AssetScope,
    ChangeKind,
    Changes,
    Dataset,
    DatasetKind,
    Layer,
    LogRecord,
    Outcome,
    Rejection,
    SchemaRef,
    SearchIndex,
    Segment,
    Status,
    Table,
    TablePart,
    TableWrite,
    Tag,
    companion_id,
    companion_name,
)
from projector.overlay import FoldReader, Overlay

__all__ = ["MAX_NAME_LENGTH", "MAX_PROPERTIES_BYTES", "FoldReader", "InvalidCommand", "Refused",
           "apply_record", "fold", "log_order"]


class Refused(Exception):  # noqa: N818 - a decision, not an error of the fold
    """A command the fold decided not to apply; ``status`` says why in one word."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason

    @property
    def is_bad_input(self) -> bool:
        """Bad input is also kept in the rejections table; conflicts are only outcomes."""
        return self.status in (Status.INVALID, Status.NOT_FOUND)


class InvalidCommand(Refused):
    """A command that can never be applied."""

    def __init__(self, reason: str) -> None:
        super().__init__(Status.INVALID, reason)


def log_order(records: Iterable[LogRecord]) -> list[LogRecord]:
    """The order a batch is applied in: by (topic, partition, offset). strata writes one
    single-partition topic, so this is the log's own order."""
    return sorted(records, key=lambda r: r.position)


def fold(view: FoldReader, records: Iterable[LogRecord]) -> Changes:
    """Apply ``records`` in ``log_order`` on top of ``view``; return what changed.

    Every record advances its partition's next offset, whatever its outcome.
    """
    state = Overlay(view)
    ordered = log_order(records)
    registration.note_offsets(state.changes, ordered)
    for record in ordered:
        apply_record(state, record)
    return state.changes


def apply_record(state: Overlay, record: LogRecord) -> None:
    """Apply one record on top of ``state``: its outcome, and what it changes (``fold`` applies
    each record of a batch with it)."""
    event = record.event
    state.begin(record)
    if event is None:
        reason = record.decode_error or "undecodable record"
        state.changes.rejections.append(Rejection(record.position, record.raw, reason))
        state.note(ChangeKind.REJECTED, None, "", detail=reason)
        return
    if state.has_outcome(event.event_id):
        return  # the same event appended twice: it was decided the first time
    try:
        _HANDLERS[type(event.command)](state, record, event, event.command)
        outcome = Outcome(event.event_id, record.position, Status.ACCEPTED)
    except Refused as refused:  # handlers note their changes after their last check
        if refused.is_bad_input:
            state.changes.rejections.append(
                Rejection(record.position, record.raw, refused.reason, event.event_id))
            entry = state.dataset(event.entry_id) or state.table(event.entry_id)
            state.note(ChangeKind.REJECTED, event.entry_id, entry.name if entry else "",
                       detail=refused.reason)
        outcome = Outcome(event.event_id, record.position, refused.status, refused.reason)
    state.changes.outcomes[event.event_id] = outcome


def _checked(check: Callable[..., str], *args: object) -> str:
    try:
        return check(*args)
    except ValueError as exc:
        raise InvalidCommand(str(exc)) from None


def _live_dataset(state: Overlay, event: Event) -> Dataset:
    dataset = state.dataset(event.entry_id)
    if dataset is None or dataset.deleted:
        gone = "was deleted" if dataset else "does not exist"
        raise Refused(Status.NOT_FOUND, f"dataset {event.entry_id} {gone}")
    return dataset


def _touch(state: Overlay, dataset: Dataset, event: Event, **fields: Any) -> Dataset:
    """The dataset with ``fields`` changed and ``updated_at`` moved forward to the event."""
    updated = _touched(dataset, event, **fields)
    state.put_dataset(updated)
    return updated


def _touched(dataset: Dataset, event: Event, **fields: Any) -> Dataset:
    return replace(dataset, updated_at=max(dataset.updated_at, event.produced_at), **fields)


# -- entries ----------------------------------------------------------------------------------


def _new_entry(state: Overlay, event: Event, kind: str) -> None:
    if state.dataset(event.entry_id) is not None or state.table(event.entry_id) is not None:
        raise InvalidCommand(f"{kind} id {event.entry_id} is already used; ids are never reused")


def _name_free(state: Overlay, name: str, entry_id: uuid.UUID) -> None:
    """Entry names are unique across datasets and tables, and the system table's is taken."""
    if name == ENTRIES_TABLE_NAME:
        raise Refused(Status.ALREADY_EXISTS, f"already exists: {name!r} is the catalog's system table")
    dataset = state.dataset_by_name(name)
    if dataset is not None and dataset.id != entry_id:
        raise Refused(Status.ALREADY_EXISTS, f"already exists: a dataset named {name!r}")
    table = state.table_by_name(name)
    if table is not None and table.id != entry_id:
        raise Refused(Status.ALREADY_EXISTS, f"already exists: a table named {name!r}")


_DATASET_COMPANIONS = (DatasetKind.BLUEPRINT, DatasetKind.ASSET)
_TABLE_COMPANIONS = (DatasetKind.BLUEPRINT,)


def _companions_free(state: Overlay, owner_id: uuid.UUID, kinds: tuple[DatasetKind, ...]) -> None:
    for kind in kinds:
        if state.dataset(companion_id(owner_id, kind)) is not None:
            raise InvalidCommand(f"the {kind} dataset id of {owner_id} is already used; ids are never reused")
        _name_free(state, companion_name(owner_id, kind), companion_id(owner_id, kind))


def _create_companions(state: Overlay, event: Event, kinds: tuple[DatasetKind, ...]) -> None:
    """The owner's hidden datasets, checked free by ``_companions_free``."""
    for kind in kinds:
        dataset = Dataset(companion_id(event.entry_id, kind), companion_name(event.entry_id, kind),
                          event.produced_at, event.produced_at, kind=kind)
        state.put_dataset(dataset)
        state.note(ChangeKind.DATASET_CREATED, dataset.id, dataset.name, detail=kind)


def _delete_companions(state: Overlay, owner_id: uuid.UUID, event: Event) -> None:
    """Those of the owner's hidden datasets that were not deleted on their own."""
    for kind in _DATASET_COMPANIONS:
        companion = state.dataset(companion_id(owner_id, kind))
        if companion is not None and not companion.deleted:
            _drop_dataset(state, companion, event)


def _create_dataset(state: Overlay, record: LogRecord, event: Event, command: CreateDataset) -> None:
    name = _checked(check_dataset_name, command.name)
    _new_entry(state, event, "dataset")
    _name_free(state, name, event.entry_id)
    _companions_free(state, event.entry_id, _DATASET_COMPANIONS)
    state.put_dataset(Dataset(event.entry_id, name, event.produced_at, event.produced_at))
    state.note(ChangeKind.DATASET_CREATED, event.entry_id, name)
    _create_companions(state, event, _DATASET_COMPANIONS)


def _rename_dataset(state: Overlay, record: LogRecord, event: Event, command: RenameDataset) -> None:
    name = _checked(check_dataset_name, command.name)
    dataset = _live_dataset(state, event)
    _name_free(state, name, dataset.id)
    _touch(state, dataset, event, name=name)
    state.note(ChangeKind.DATASET_RENAMED, dataset.id, name, detail=dataset.name)


def _delete_dataset(state: Overlay, record: LogRecord, event: Event, command: DeleteDataset) -> None:
    dataset = _live_dataset(state, event)
    _drop_dataset(state, dataset, event)
    _delete_companions(state, dataset.id, event)


def _drop_dataset(state: Overlay, dataset: Dataset, event: Event) -> None:
    layers = sorted(state.matching_layers(dataset.id, frozenset(), frozenset()),
                    key=lambda x: (x.segment_id, x.layer_name))
    for layer in layers:
        state.note(ChangeKind.LAYER_REMOVED, dataset.id, dataset.name, layer.segment_id, layer.layer_name)
    for segment_id in sorted({layer.segment_id for layer in layers}):
        state.note(ChangeKind.SEGMENT_REMOVED, dataset.id, dataset.name, segment_id)
    _touch(state, dataset, event, deleted=True, schema=b"", schema_refs=(), default_blueprint=None,
           default_segment_table_blueprint=None, schemaless_layers=0)
    state.purge(dataset.id)
    state.note(ChangeKind.DATASET_DELETED, dataset.id, dataset.name)


# -- schemas ----------------------------------------------------------------------------------


def _define_schema(state: Overlay, record: LogRecord, event: Event, command: DefineSchema) -> None:
    actual = schemas.digest(command.arrow_schema)
    if command.sha256 != actual:
        raise InvalidCommand(f"DefineSchema's sha256 {command.sha256!r} is not the SHA-256 of its "
                             f"arrow_schema ({actual})")
    if state.schema(actual) is not None:
        return  # content-addressed: defining it again changes nothing
    try:
        schemas.parse(command.arrow_schema)
    except schemas.SchemaConflict as exc:
        raise InvalidCommand(str(exc)) from None
    state.changes.schemas[actual] = command.arrow_schema


def _defined(state: Overlay, digest: str, field: str) -> bytes:
    found = state.schema(digest)
    if found is None:
        raise InvalidCommand(f"{field} {digest} names a schema that was never defined: produce a "
                             "DefineSchema event with its bytes before the first event that names it")
    return found


def _layer_schema(state: Overlay, command: RegisterLayer) -> bytes:
    """The layer's schema bytes, inline or by reference; empty when unknown."""
    if command.schema_sha256:
        if command.arrow_schema:
            raise InvalidCommand("RegisterLayer has both arrow_schema and schema_sha256; send one")
        return _defined(state, command.schema_sha256, "schema_sha256")
    if command.arrow_schema:
        try:
            schemas.parse(command.arrow_schema)
        except schemas.SchemaConflict as exc:  # not a schema at all: bad input, not a conflict
            raise InvalidCommand(str(exc)) from None
    return command.arrow_schema


def _layer_properties(state: Overlay, command: RegisterLayer) -> tuple[bytes, str, bytes]:
    """The layer's properties: inline (an Arrow IPC stream), or by reference (their schema's
    digest and the compressed batch, checked against the schema); empty when there are none."""
    if command.properties_schema_sha256 or command.properties_batch:
        if command.properties:
            raise InvalidCommand("RegisterLayer has both properties and properties_batch; send one")
        if not (command.properties_schema_sha256 and command.properties_batch):
            raise InvalidCommand("properties_batch and properties_schema_sha256 go together; "
                                 "one of them is empty")
        schema_bytes = _defined(state, command.properties_schema_sha256, "properties_schema_sha256")
        try:
            registration.properties_row(schema_bytes, command.properties_batch)
        except ValueError as exc:
            raise InvalidCommand(str(exc)) from None
        return b"", command.properties_schema_sha256, command.properties_batch
    problem = registration.inline_properties_problem(command.properties)
    if problem is not None:
        raise InvalidCommand(problem)
    return command.properties, "", b""


# -- layers -----------------------------------------------------------------------------------


def _register_layer(state: Overlay, record: LogRecord, event: Event, command: RegisterLayer) -> None:
    problem = registration.invalid(command)
    if problem is not None:
        raise InvalidCommand(problem)
    layer_schema = _layer_schema(state, command)
    properties, properties_sha256, properties_batch = _layer_properties(state, command)
    dataset = _live_dataset(state, event)
    if dataset.kind is DatasetKind.ASSET and (command.num_chunks is None or command.index_ranges):
        timelines = ", ".join(r.timeline for r in command.index_ranges) or "unknown, no chunk manifest"
        raise InvalidCommand(f"{command.storage_url} is not static data only (timelines: {timelines}): an "
                             "asset is an .rrd of static data; log it with static=True")

    existing = state.layer(dataset.id, command.segment_id, command.layer_name)
    if existing is not None and not registration.replaces(command):
        refusal = registration.already_exists(command)
        if refusal is None:
            return  # skipped
        raise Refused(Status.ALREADY_EXISTS, refusal)
    # New, or OnDuplicate.REPLACE: this registration becomes the layer, last in the segment, and
    # so wins the merge of the segment's properties (projector.merge).
    digest = command.schema_sha256 or (schemas.digest(layer_schema) if layer_schema else "")
    refs = _without(dataset.schema_refs, existing.schema_sha256 if existing else "")
    merged = dataset.schema if refs == dataset.schema_refs else _merged_schema(state, refs)
    try:
        merged = schemas.merge_serialized(merged, layer_schema)
    except schemas.SchemaConflict as conflict:
        raise Refused(Status.SCHEMA_CONFLICT, str(conflict)) from None
    if command.arrow_schema:
        state.changes.schemas.setdefault(digest, layer_schema)
    state.put_layer(Layer(
        dataset_id=dataset.id,
        segment_id=command.segment_id,
        layer_name=command.layer_name,
        storage_url=command.storage_url,
        size_bytes=command.size_bytes,
        schema_sha256=digest,
        properties=properties,
        registered_at=event.produced_at,
        registered_by=record.position,
        event_id=event.event_id,
        num_chunks=command.num_chunks,
        index_ranges=command.index_ranges,
        properties_schema_sha256=properties_sha256,
        properties_batch=properties_batch,
    ))
    state.note(ChangeKind.LAYER_REPLACED if existing else ChangeKind.LAYER_ADDED, dataset.id,
               dataset.name, command.segment_id, command.layer_name, detail=command.storage_url)
    segment = state.segment(dataset.id, command.segment_id)
    created = dataset.segments_created
    if segment is None:
        state.put_segment(Segment(dataset.id, command.segment_id, record.position, event.produced_at,
                                  position=created))
        state.note(ChangeKind.SEGMENT_ADDED, dataset.id, dataset.name, command.segment_id)
        created += 1
    elif event.produced_at > segment.updated_at:
        state.put_segment(replace(segment, updated_at=event.produced_at), derivable=True)
    replaced_schemaless = existing is not None and not existing.schema_sha256
    schemaless = dataset.schemaless_layers + (not digest) - replaced_schemaless
    state.put_dataset(_touched(dataset, event, schema=merged, schema_refs=_with(refs, digest),
                               segments_created=created, schemaless_layers=schemaless), derivable=True)


def _unregister_layers(
    state: Overlay, record: LogRecord, event: Event, command: UnregisterLayers
) -> None:
    if not command.segment_ids and not command.layer_names:
        raise InvalidCommand("unregister needs segments or layers to drop (both lists are empty)")
    dataset = _live_dataset(state, event)
    # Looked up by segment or by layer name: the cost follows what is removed, not the dataset.
    dropped = state.matching_layers(dataset.id, frozenset(command.segment_ids),
                                    frozenset(command.layer_names))
    if not dropped:
        return  # unregistering what is not there changes nothing
    refs = dataset.schema_refs
    schemaless = dataset.schemaless_layers - sum(not layer.schema_sha256 for layer in dropped)
    for layer in sorted(dropped, key=lambda x: (x.segment_id, x.layer_name)):
        state.drop_layer(layer)
        state.note(ChangeKind.LAYER_REMOVED, dataset.id, dataset.name, layer.segment_id, layer.layer_name)
        refs = _without(refs, layer.schema_sha256)
    for segment_id in sorted({layer.segment_id for layer in dropped}):
        segment = state.segment(dataset.id, segment_id)
        assert segment is not None, f"layers of {segment_id} without their segment"
        if not state.matching_layers(dataset.id, frozenset([segment_id]), frozenset()):
            state.drop_segment(segment)
            if dataset.kind is DatasetKind.ASSET:  # an asset's scope goes with it
                state.put_scope((dataset.id, segment_id), None)
            state.note(ChangeKind.SEGMENT_REMOVED, dataset.id, dataset.name, segment_id)
        else:
            state.put_segment(replace(segment, updated_at=max(segment.updated_at, event.produced_at)))
    _touch(state, dataset, event, schema=_merged_schema(state, refs), schema_refs=refs,
           schemaless_layers=schemaless)


def _with(refs: tuple[SchemaRef, ...], digest: str) -> tuple[SchemaRef, ...]:
    if not digest:
        return refs
    if any(ref.digest == digest for ref in refs):
        return tuple(SchemaRef(digest, r.layers + 1) if r.digest == digest else r for r in refs)
    return (*refs, SchemaRef(digest, 1))


def _without(refs: tuple[SchemaRef, ...], digest: str) -> tuple[SchemaRef, ...]:
    if not digest:
        return refs
    return tuple(SchemaRef(digest, r.layers - 1) if r.digest == digest else r
                 for r in refs if r.digest != digest or r.layers > 1)


def _merged_schema(state: Overlay, refs: tuple[SchemaRef, ...]) -> bytes:
    merged = b""
    for ref in refs:
        merged = schemas.merge_serialized(merged, state.schema(ref.digest))
    return merged


# -- tags -------------------------------------------------------------------------------------
# A tag names a point of a dataset's history; reading the dataset as of it is the store's work.


def _create_tag(state: Overlay, record: LogRecord, event: Event, command: CreateTag) -> None:
    name = _checked(check_tag_name, command.name)
    dataset = _live_dataset(state, event)
    own = record.position.offset
    if not 0 <= command.offset <= own:
        raise InvalidCommand(f"tag {name!r} points at offset {command.offset}: a tag names an offset "
                             f"from 0 to its own event's ({own})")
    existing = state.tag(dataset.id, name)
    if existing is not None:
        raise Refused(Status.ALREADY_EXISTS, f"already exists: tag {name!r} of dataset {dataset.name!r} "
                      f"(at offset {existing.offset}); delete it first to move it")
    state.put_tag((dataset.id, name), Tag(dataset.id, name, command.offset, event.produced_at))
    state.note(ChangeKind.TAG_CREATED, dataset.id, dataset.name, detail=f"{name} {command.offset}")


def _delete_tag(state: Overlay, record: LogRecord, event: Event, command: DeleteTag) -> None:
    dataset = _live_dataset(state, event)
    if state.tag(dataset.id, command.name) is None:
        raise Refused(Status.NOT_FOUND, f"dataset {dataset.name!r} has no tag {command.name!r}")
    state.put_tag((dataset.id, command.name), None)
    state.note(ChangeKind.TAG_DELETED, dataset.id, dataset.name, detail=command.name)


# -- search indexes ---------------------------------------------------------------------------
# An index is defined here; its rows are derived from the layers by the follower in ``search``.


def _create_search_index(state: Overlay, record: LogRecord, event: Event, command: CreateSearchIndex) -> None:
    dataset = _live_dataset(state, event)
    if dataset.kind is not DatasetKind.DATASET:
        raise InvalidCommand(f"{dataset.name!r} is a hidden {dataset.kind} dataset: index the dataset it "
                             "belongs to")
    schema = schemas.parse(dataset.schema) if dataset.schema else pa.schema([])
    refused = search_indexes.refusal(schema, command)
    if refused is not None:
        raise InvalidCommand(f"cannot index dataset {dataset.name!r}: {refused}")
    key = (dataset.id, command.entity_path, command.component)
    state.put_search_index(key, SearchIndex(*key, command, record.position.offset, event.produced_at))
    column = search_indexes.column_name(command.entity_path, command.component)
    state.note(ChangeKind.SEARCH_INDEX_CREATED, dataset.id, dataset.name,
               detail=f"{column} {command.kind} on {command.time_index}")


def _delete_search_indexes(state: Overlay, record: LogRecord, event: Event,
                           command: DeleteSearchIndexes) -> None:
    dataset = _live_dataset(state, event)
    column = search_indexes.column_name(command.entity_path, command.component)
    key = (dataset.id, command.entity_path, command.component)
    if state.search_index(*key) is None:
        raise Refused(Status.NOT_FOUND, f"dataset {dataset.name!r} has no index on {column!r}")
    state.put_search_index(key, None)
    state.note(ChangeKind.SEARCH_INDEX_DELETED, dataset.id, dataset.name, detail=column)


def _maintain_search_indexes(state: Overlay, record: LogRecord, event: Event,
                             command: MaintainSearchIndexes) -> None:
    dataset = _live_dataset(state, event)
    for index in state.search_indexes(dataset.id):
        state.put_search_index((dataset.id, index.entity_path, index.component),
                               replace(index, maintenance=command, maintained_offset=record.position.offset))
    asked = [name for name in ("optimize_indexes", "retrain_indexes", "compact_fragments")
             if getattr(command, name)] + (["cleanup"] if command.cleanup_before is not None else [])
    state.note(ChangeKind.SEARCH_INDEXES_MAINTAINED, dataset.id, dataset.name,
               detail=" ".join(asked) or "none")


# -- blueprints -------------------------------------------------------------------------------
# A blueprint is a segment of the owner's hidden blueprint dataset, registered there as any
# recording is; the owner keeps only the name of its default.


def _register_blueprint(
    state: Overlay, record: LogRecord, event: Event, command: RegisterBlueprint
) -> None:
    """Logs from before hidden blueprint datasets: the blueprint becomes the segment
    ``blueprint_id`` of the dataset's blueprint dataset, its layer ``base`` replaced."""
    _checked(check_id, "blueprint_id", command.blueprint_id)
    _live_dataset(state, event)
    as_layer = RegisterLayer(command.blueprint_id, "base", command.storage_url, OnDuplicate.REPLACE)
    owner_event = event
    event = replace(event, entry_id=companion_id(event.entry_id, DatasetKind.BLUEPRINT))
    _blueprints_of(state, owner_event, "dataset")
    _register_layer(state, record, event, as_layer)
    if command.set_default:
        _set_default_blueprint(state, record, owner_event, SetDefaultBlueprint(command.blueprint_id))


def _blueprints_of(state: Overlay, event: Event, kind: str) -> Dataset:
    """The live blueprint dataset of the event's entry (a ``kind``: dataset or table)."""
    blueprints = state.dataset(companion_id(event.entry_id, DatasetKind.BLUEPRINT))
    if blueprints is None or blueprints.deleted:
        raise Refused(Status.NOT_FOUND, f"{kind} blueprint dataset does not exist: "
                                        f"{companion_name(event.entry_id, DatasetKind.BLUEPRINT)} "
                                        f"{'was deleted' if blueprints else 'was never created'}")
    return blueprints


def _set_default_blueprint(
    state: Overlay, record: LogRecord, event: Event, command: SetDefaultBlueprint
) -> None:
    """Any name, as Rerun's server takes it, while the blueprint dataset exists."""
    if command.blueprint_id is not None:
        _checked(check_id, "blueprint_id", command.blueprint_id)
    table = state.table(event.entry_id)
    if table is not None and not table.deleted:
        if command.segment_table:
            raise InvalidCommand(f"table {table.name!r} has no segment table: a segment table "
                                 "blueprint is a dataset's")
        _blueprints_of(state, event, "table")
        _touch_table(state, table, event, default_blueprint=command.blueprint_id)
        name = table.name
    else:
        dataset = _live_dataset(state, event)
        _blueprints_of(state, event, "dataset")
        field = "default_segment_table_blueprint" if command.segment_table else "default_blueprint"
        _touch(state, dataset, event, **{field: command.blueprint_id})
        name = dataset.name
    state.note(ChangeKind.DEFAULT_BLUEPRINT_SET, event.entry_id, name,
               detail=("segment table " if command.segment_table else "") + (command.blueprint_id or ""))


# -- assets -----------------------------------------------------------------------------------


def _scope_asset(state: Overlay, record: LogRecord, event: Event, command: ScopeAsset) -> None:
    _checked(check_id, "segment_id", command.segment_id)
    for segment_id in command.segments:
        _checked(check_id, "segments", segment_id)
    dataset = _live_dataset(state, event)
    if dataset.kind is not DatasetKind.ASSET:
        raise InvalidCommand(f"dataset {dataset.name!r} is not an asset dataset: an asset is scoped in "
                             "its dataset's asset dataset")
    if state.segment(dataset.id, command.segment_id) is None:
        raise Refused(Status.NOT_FOUND, f"no asset {command.segment_id!r} in {dataset.name}: register "
                                        "it with register_asset() first")
    stored = state.asset_scope(dataset.id, command.segment_id)
    current = stored or AssetScope(dataset.id, command.segment_id)
    if command.expected_revision is not None and command.expected_revision != current.revision:
        raise Refused(Status.REVISION_CONFLICT,
                      f"the scope of asset {command.segment_id!r} was changed meanwhile: expected revision "
                      f"{command.expected_revision}, found {current.revision}")
    named = tuple(dict.fromkeys(command.segments))
    scope: AssetScope | None
    if command.edit is AssetScopeEdit.CLEAR:
        scope = None
    elif command.edit is AssetScopeEdit.SET:
        scope = AssetScope(dataset.id, command.segment_id, command.mode, named)
    elif (command.edit is AssetScopeEdit.APPLY) == (current.mode is AssetMode.OPT_IN):
        scope = replace(current, segments=tuple(dict.fromkeys([*current.segments, *named])))
    else:
        scope = replace(current, segments=tuple(s for s in current.segments if s not in set(named)))
    if scope is not None:
        if stored is not None and (scope.mode, scope.segments) == (stored.mode, stored.segments):
            return
        scope = replace(scope, revision=record.position.offset + 1)
    elif stored is None:
        return
    state.put_scope((dataset.id, command.segment_id), scope)
    _touch(state, dataset, event)
    detail = "cleared" if scope is None else f"{scope.mode} {','.join(scope.segments)}".rstrip()
    state.note(ChangeKind.ASSET_SCOPED, dataset.id, dataset.name, command.segment_id, detail=detail)


# -- tables -----------------------------------------------------------------------------------


def _live_table(state: Overlay, event: Event) -> Table:
    table = state.table(event.entry_id)
    if table is None or table.deleted:
        gone = "was deleted" if table else "does not exist"
        raise Refused(Status.NOT_FOUND, f"table {event.entry_id} {gone}")
    return table


def _touch_table(state: Overlay, table: Table, event: Event, **fields: Any) -> None:
    state.put_table(replace(table, updated_at=max(table.updated_at, event.produced_at), **fields))


def _create_table(state: Overlay, record: LogRecord, event: Event, command: CreateTable) -> None:
    name = _checked(check_table_name, command.name)
    _checked(table_rows.table_schema, command.arrow_schema)
    if command.storage_url:
        _checked(check_id, "storage_url", command.storage_url)
    _new_entry(state, event, "table")
    _name_free(state, name, event.entry_id)
    _companions_free(state, event.entry_id, _TABLE_COMPANIONS)
    state.put_table(Table(event.entry_id, name, event.produced_at, event.produced_at,
                          command.arrow_schema, storage_url=command.storage_url))
    state.note(ChangeKind.TABLE_CREATED, event.entry_id, name, detail=command.storage_url)
    _create_companions(state, event, _TABLE_COMPANIONS)


def _register_table(state: Overlay, record: LogRecord, event: Event, command: RegisterTable) -> None:
    name = _checked(check_table_name, command.name)
    _checked(check_id, "storage_url", command.storage_url)
    _checked(table_rows.table_schema, command.arrow_schema)
    if command.version < 1:
        raise InvalidCommand(f"a Lance table's versions start at 1, got {command.version}")
    _new_entry(state, event, "table")
    _name_free(state, name, event.entry_id)
    _companions_free(state, event.entry_id, _TABLE_COMPANIONS)
    state.put_table(Table(event.entry_id, name, event.produced_at, event.produced_at,
                          command.arrow_schema, storage_url=command.storage_url,
                          lance_version=command.version))
    state.note(ChangeKind.TABLE_CREATED, event.entry_id, name, detail=command.storage_url)
    _create_companions(state, event, _TABLE_COMPANIONS)


def _rename_table(state: Overlay, record: LogRecord, event: Event, command: RenameTable) -> None:
    name = _checked(check_table_name, command.name)
    table = _live_table(state, event)
    _name_free(state, name, table.id)
    _touch_table(state, table, event, name=name)
    state.note(ChangeKind.TABLE_RENAMED, table.id, name, detail=table.name)


def _delete_table(state: Overlay, record: LogRecord, event: Event, command: DeleteTable) -> None:
    table = _live_table(state, event)
    _touch_table(state, table, event, deleted=True, default_blueprint=None)
    state.purge(table.id)
    state.note(ChangeKind.TABLE_DELETED, table.id, table.name)
    _delete_companions(state, table.id, event)


def _write_table(state: Overlay, record: LogRecord, event: Event, command: WriteTable) -> None:
    """Rows for a table, in one part or several. A write in several parts applies when its last
    part is folded, if parts 0 to the last came in order and all were good; any other part drops
    the write. An upsert's rows replace the rows with their index values, the last of a write's
    rows with one value winning; the store applies writes in log order."""
    table = _live_table(state, event)
    if table.registered:
        raise InvalidCommand(f"table {table.name!r} is the Lance table at {table.storage_url}, "
                             "registered to be read: strata writes only the tables it created")
    schema = table_rows.table_schema(table.arrow_schema)
    index = table_rows.index_column(schema)
    if command.mode is TableWriteMode.UPSERT and index is None:
        raise InvalidCommand(f"table {table.name!r} has no index column (a field with metadata "
                             "rerun:is_table_index = true): upsert needs one; use append or overwrite")
    if not 0 <= command.part < command.parts:
        raise InvalidCommand(f"part {command.part} of a write in {command.parts} parts")
    if command.parts > 1 and not command.write_id:
        raise InvalidCommand("a write in several parts needs a write_id")
    earlier = state.table_parts(table.id, command.write_id) if command.parts > 1 else []
    try:
        if [p.part for p in earlier] != list(range(command.part)) or any(
                (p.parts, p.mode) != (command.parts, command.mode) for p in earlier):
            raise ValueError(
                f"part {command.part} of {command.parts} of write {command.write_id!r} follows parts "
                f"{[p.part for p in earlier]}: a write's parts come in order, with one mode and count")
        rows = decoded = table_rows.read_rows(schema, command.rows)
        if command.part < command.parts - 1:
            state.put_part(TablePart(table.id, command.write_id, command.part, command.parts,
                                     command.mode, command.rows))
            return
        if earlier:
            rows = pa.concat_tables([table_rows.read_rows(schema, p.rows) for p in earlier] + [rows])
        if command.mode is TableWriteMode.UPSERT and index is not None:  # refused above if None
            rows = table_rows.last_per_index(rows, index)
        elif index is not None:
            table_rows.check_index(rows, index)
    except ValueError as exc:
        for part in earlier:
            state.drop_part(part)
        dropped = f" (write {command.write_id!r} dropped)" if command.parts > 1 else ""
        raise InvalidCommand(f"{exc}{dropped}") from None
    for part in earlier:
        state.drop_part(part)
    as_sent = not earlier and rows is decoded and table_rows.storable(schema, command.rows)
    state.changes.table_writes.append(
        TableWrite(table.id, command.mode, rows, index, command.rows if as_sent else b"",
                   record.position.offset))
    _touch_table(state, table, event, revision=table.revision + 1)
    state.note(ChangeKind.TABLE_ROWS_WRITTEN, table.id, table.name,
               detail=f"{command.mode} {rows.num_rows} row{'s' * (rows.num_rows != 1)}")


_HANDLERS: dict[type, Callable[..., None]] = {
    CreateDataset: _create_dataset,
    DefineSchema: _define_schema,
    RenameDataset: _rename_dataset,
    DeleteDataset: _delete_dataset,
    RegisterLayer: _register_layer,
    UnregisterLayers: _unregister_layers,
    RegisterBlueprint: _register_blueprint,
    SetDefaultBlueprint: _set_default_blueprint,
    ScopeAsset: _scope_asset,
    CreateTable: _create_table,
    RegisterTable: _register_table,
    RenameTable: _rename_table,
    DeleteTable: _delete_table,
    WriteTable: _write_table,
    CreateTag: _create_tag,
    DeleteTag: _delete_tag,
    CreateSearchIndex: _create_search_index,
    DeleteSearchIndexes: _delete_search_indexes,
    MaintainSearchIndexes: _maintain_search_indexes,
}
