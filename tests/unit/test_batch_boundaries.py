"""DESIGN invariant 1, as a property: random histories folded through the real SqliteStore give
identical tables, row by row, whether applied as one batch or cut into random batches (with
replayed overlaps, as after a crash), and the store answers the fold exactly like MemoryCatalog."""

from __future__ import annotations

import uuid
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from events import (
    AssetMode,
    AssetScopeEdit,
    CreateTag,
    DecodeError,
    DefineSchema,
    DeleteTable,
    DeleteTag,
    Event,
    IndexKind,
    IndexRange,
    OnDuplicate,
    RenameTable,
    ScopeAsset,
    WriteTable,
    decode,
    encode,
)
from profiles import examples
from projector import (
    Changes,
    DatasetKind,
    LogPosition,
    LogRecord,
    Status,
    apply_batch,
    companion_id,
    fold,
    layer_table,
    schemas,
)
from projector.layer_runs import materialized
from projector.stores.sqlite import SqliteStore
from stores import PROJECTION_TABLES, dump

from .conftest import (
    LABELS,
    MemoryCatalog,
    arrow_schema,
    at,
    create,
    create_table,
    define,
    delete,
    fold_into,
    register,
    register_blueprint,
    rename,
    set_default_blueprint,
    table_of,
    unregister,
    write,
)

TOPIC = "strata.catalog"
DATASET_IDS = [uuid.UUID(int=n) for n in range(1, 4)]
NAMES = ["alpha", "beta", "bad/name"]
SEGMENT_IDS = ["s1", "s2", "s3"]
LAYER_NAMES = ["base", "extra"]
BLUEPRINT_IDS = ["bp1", "bp2"]
SCHEMAS = [
    b"",
    arrow_schema(("x", pa.int64())),
    arrow_schema(("x", pa.int32())),  # conflicts with the one above
    arrow_schema(("x", pa.null()), ("pose", pa.struct([("a", pa.float64())]))),
    arrow_schema(("pose", pa.struct([("b", pa.float64())])), ("y", pa.string())),
    arrow_schema(("pose", pa.struct([("a", pa.float32())]))),  # conflicts inside the struct
]

PROPERTY_SCHEMA, _ = schemas.properties_parts(pa.table({"property:episode:n": [[0]]}))


def property_batch(version: int) -> bytes:
    return schemas.properties_parts(pa.table({"property:episode:n": [[version]]}))[1]


DEFINABLE = [*SCHEMAS[1:], *[PROPERTY_SCHEMA] * 3]

dataset_ids = st.sampled_from(DATASET_IDS)
busy_dataset_ids = st.sampled_from([DATASET_IDS[0]] * 3 + DATASET_IDS[1:])
"""Layer and blueprint commands mostly go to the first dataset, so that they meet each other."""
clocks = st.integers(0, 20).map(at)  # not in log order: the fold must never look at clocks

creates = st.builds(lambda d, n, t: create(d, n, when=t), dataset_ids, st.sampled_from(NAMES), clocks)


def _register(d, s, n, mode, schema, version, by_reference, t) -> Event:
    """Inline schema and properties (envelope v4 and before) or by reference (v5), which is
    refused if the schema was not defined earlier in the log."""
    if by_reference:
        inline = {"schema_sha256": schemas.digest(schema) if schema else "",
                  "properties_schema_sha256": schemas.digest(PROPERTY_SCHEMA),
                  "properties_batch": property_batch(version)}
    else:
        inline = {"schema": schema, "properties": bytes([version])}
    return register(
        d, s, n, on_duplicate=mode, url=f"file:///{s}/{n}/v{version}.rrd", when=t,
        size_bytes=version, num_chunks=version or None,
        index_ranges=(IndexRange("step", IndexKind.SEQUENCE, version, version + 5),) if version % 2 else (),
        **inline)


registers = st.builds(
    _register, busy_dataset_ids, st.sampled_from(SEGMENT_IDS), st.sampled_from(LAYER_NAMES),
    st.sampled_from(list(OnDuplicate)), st.sampled_from(SCHEMAS), st.integers(0, 9), st.booleans(),
    clocks)
# A schema defined (often twice, by any dataset), or now and then under a digest that is not its own.
defines = st.builds(
    lambda d, schema, honest, t: define(d, schema, when=t, sha256=None if honest else "0" * 64),
    dataset_ids, st.sampled_from(DEFINABLE), st.sampled_from([True] * 5 + [False]), clocks)
unregisters = st.builds(lambda d, s, n, t: unregister(d, s, n, when=t), busy_dataset_ids,
                        st.lists(st.sampled_from(SEGMENT_IDS), max_size=2, unique=True),
                        st.lists(st.sampled_from(LAYER_NAMES), max_size=2, unique=True), clocks)
TABLE_IDS = [uuid.UUID(int=101), uuid.UUID(int=102), DATASET_IDS[2]]
"""The last is also a dataset's id: whichever entry takes it first keeps it."""
TABLE_SCHEMAS = [LABELS, pa.schema([("id", pa.int64()), ("label", pa.string())])]  # the second has no index
ROWS = [[], [{"id": 1, "label": "a"}], [{"id": 1, "label": "b"}, {"id": 2, "label": None}],
        [{"id": 2, "label": "c"}, {"id": 3, "label": "d"}, {"id": 2, "label": "e"}],
        [{"id": None, "label": "f"}]]
table_ids = st.sampled_from(TABLE_IDS)
busy_table_ids = st.sampled_from([TABLE_IDS[0]] * 4 + TABLE_IDS[1:])
# Mostly whole writes; now and then a stray part of a write in several.
table_writes = st.builds(
    lambda d, mode, rows, write_id, part, t: write(
        d, mode, b"not arrow" if rows is None else pa.Table.from_pylist(
            rows, schema=TABLE_SCHEMAS[1]), write_id=write_id, part=part[0], parts=part[1], when=t),
    busy_table_ids, st.sampled_from(["append", "append", "overwrite", "upsert", "upsert"]),
    st.sampled_from([*ROWS] * 3 + [None]), st.sampled_from(["w1", "w2"]),
    st.sampled_from([(0, 1)] * 6 + [(1, 1), (1, 2), (2, 3)]), clocks)

def _write_in_parts(d, mode, rows, parts, skipped, write_id, t) -> tuple[str, list[Event]]:
    events = [write(d, mode, pa.Table.from_pylist(r, schema=TABLE_SCHEMAS[1]), write_id=write_id, part=n,
                    parts=parts, when=t) for n, r in enumerate(rows[:parts])]
    return ("parts", [e for n, e in enumerate(events) if n != skipped])


# One write's parts one after the other, now and then with one of them missing.
writes_in_parts = st.builds(
    _write_in_parts, busy_table_ids, st.sampled_from(["append", "overwrite", "upsert"]),
    st.lists(st.sampled_from(ROWS[:4]), min_size=3, max_size=3), st.integers(2, 3),
    st.sampled_from([None] * 4 + [0, 1]), st.sampled_from(["w1", "w2"]), clocks)
ASSETS = companion_id(DATASET_IDS[0], DatasetKind.ASSET)
"""The first dataset's asset dataset: assets registered, scoped, edited at a revision."""
scope_edits = st.builds(
    lambda s, edit, mode, named, revision, t: Event(ASSETS, ScopeAsset(s, edit, mode, tuple(named), revision),
                                                    produced_at=t),
    st.sampled_from(SEGMENT_IDS[:1] * 3 + SEGMENT_IDS[1:2]), st.sampled_from(list(AssetScopeEdit)),
    st.sampled_from(list(AssetMode)), st.lists(st.sampled_from(SEGMENT_IDS), max_size=2),
    st.one_of(st.none(), st.integers(0, 45)), clocks)
# An asset registered now and then, then edits of scopes, one after the other.
asset_commands = st.builds(
    lambda registered, edits, t: ("parts", [
        *[register(ASSETS, s, url=f"file:///assets/{s}.rrd", num_chunks=2, on_duplicate=OnDuplicate.REPLACE,
                   when=t) for s in registered], *edits]),
    st.lists(st.sampled_from(SEGMENT_IDS[:2]), max_size=1), st.lists(scope_edits, min_size=1, max_size=3),
    clocks)
# Repeats weight the kinds a real log has most of (one_of would ignore repeats).
command_choices = [
    creates,
    st.builds(lambda d, n, t: rename(d, n, when=t), dataset_ids, st.sampled_from(NAMES), clocks),
    st.builds(lambda d, t: delete(d, when=t), dataset_ids, clocks),
    *[registers] * 7,
    *[defines] * 2,
    unregisters,
    st.builds(lambda d, b, default, t: register_blueprint(d, b, set_default=default, when=t),
              busy_dataset_ids, st.sampled_from(BLUEPRINT_IDS), st.booleans(), clocks),
    st.builds(lambda d, b, t: set_default_blueprint(d, b, when=t), busy_dataset_ids,
              st.sampled_from([*BLUEPRINT_IDS, None]), clocks),
    st.builds(lambda d, n, schema, t: create_table(d, n, schema, when=t), table_ids,
              st.sampled_from(["labels", *NAMES]), st.sampled_from(TABLE_SCHEMAS), clocks),
    *[table_writes] * 4,
    st.one_of(  # tags, now and then
        st.builds(lambda d, n, k, t: Event(d, CreateTag(n, k), produced_at=t), busy_dataset_ids,
                  st.sampled_from(["t1", "t2", "7"]), st.integers(0, 45), clocks),
        st.builds(lambda d, n, t: Event(d, DeleteTag(n), produced_at=t), busy_dataset_ids,
                  st.sampled_from(["t1", "t2"]), clocks)),
    st.builds(lambda d, n, t: Event(d, RenameTable(n), produced_at=t), table_ids,
              st.sampled_from(["labels", *NAMES]), clocks),
    st.builds(lambda d, t: Event(d, DeleteTable(), produced_at=t), table_ids, clocks).filter(
        lambda e: e.entry_id != TABLE_IDS[0] or e.produced_at.second % 3 == 0),  # seldom the busy one
]
commands = st.sampled_from(command_choices).flatmap(lambda kind: kind)

steps = st.sampled_from([
    *command_choices * 3,
    writes_in_parts,
    *[asset_commands] * 6,
    st.tuples(st.just("again"), st.integers(0, 1000)),  # an earlier event appended once more
    st.tuples(st.just("raw"), st.sampled_from([b"", b"\xc3\x01\x00\x00", b"not avro"])),
    st.tuples(st.just("truncated"), commands),
]).flatmap(lambda kind: kind)


# Every history starts by creating the first dataset and trying the second (its name may clash or
# be invalid), and by creating a table with an index, so that most later commands find a live
# entry and the third id is still free for a later create; hypothesis likes short lists, hence the
# minimum length.
histories = st.builds(
    lambda name, rest: [create(DATASET_IDS[0], NAMES[0]), create(DATASET_IDS[1], name),
                        create_table(TABLE_IDS[0], "labels"), *rest],
    st.sampled_from([NAMES[1], *NAMES]), st.lists(steps, min_size=10, max_size=40))


def build_log(history: list) -> list[LogRecord]:
    """The records a broker would hold for ``history``, decoded as the projector decodes them."""
    raws: list[bytes] = []
    appended: list[Event] = []
    for step in history:
        if isinstance(step, Event):
            appended.append(step)
            raws.append(encode(step))
        elif step[0] == "again":
            raws.append(encode(appended[step[1] % len(appended)]) if appended else b"")
        elif step[0] == "parts":
            appended += step[1]
            raws += [encode(e) for e in step[1]]
        elif step[0] == "raw":
            raws.append(step[1])
        else:
            raws.append(encode(step[1])[:-1])
    records = []
    for offset, raw in enumerate(raws):
        position = LogPosition(TOPIC, 0, offset)
        try:
            records.append(LogRecord(position, raw, event=decode(raw)))
        except DecodeError as error:
            records.append(LogRecord(position, raw, decode_error=error.reason))
    return records


@st.composite
def histories_and_batches(draw):
    """A history and a way to feed it: batches [start, end) where start may reach back into what
    was already committed (a replay after a crash)."""
    records = build_log(draw(histories))
    cut_after = draw(st.lists(st.booleans(), min_size=len(records) - 1, max_size=len(records) - 1))
    bounds = [0, *[i + 1 for i, cut in enumerate(cut_after) if cut], len(records)]
    batches = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        overlap = draw(st.integers(0, min(start, 3)))
        batches.append((start - overlap, start, end))
    return records, batches


def fold_in_memory(records: list[LogRecord], batches: list[list[LogRecord]]) -> dict[str, object]:
    catalog = MemoryCatalog()
    for batch in batches:
        fold_into(catalog, batch)
    return catalog.snapshot()


@settings(max_examples=examples(60), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=histories_and_batches())
def test_batch_boundaries_never_change_the_tables(tmp_path_factory, case):
    with mock.patch.object(layer_table, "CHUNK_SEGMENTS", 2):  # chunks of two segment positions
        check_batch_boundaries(tmp_path_factory.mktemp("history"), *case)


def check_batch_boundaries(directory, records: list[LogRecord], batches: list[tuple[int, int, int]]) -> None:

    whole = SqliteStore(directory / "whole.db")
    apply_batch(whole, records)
    whole.close()
    expected = dump(directory / "whole.db")

    in_batches = SqliteStore(directory / "batches.db")
    memory = MemoryCatalog()
    try:
        for replay_from, start, end in batches:
            from_store = apply_batch(in_batches, records[replay_from:end])
            from_memory = fold(memory, records[start:end])
            memory.apply(from_memory)
            # Replayed records change nothing, and the store answers like the in-memory view.
            assert materialized(from_store) == from_memory
        # The layer chunks hold exactly the layer rows.
        for dataset_id in DATASET_IDS:
            positions = {s.segment_id: s.position for s in in_batches.segments(dataset_id)}
            assert in_batches.layer_table(dataset_id) == table_of(in_batches.layers(dataset_id), positions)
        # The chunks hold each table's rows as the writes, applied one by one, leave them.
        for table in in_batches.tables():
            expected_rows = memory.rows.get(table.id)
            assert in_batches.table_data(table).to_pylist() == (
                [] if expected_rows is None else expected_rows.to_pylist())
    finally:
        in_batches.close()

    assert dump(directory / "batches.db") == expected
    assert set(expected) == set(PROJECTION_TABLES)
    # The same through MemoryCatalog, down to one record per batch.
    assert memory.snapshot() == fold_in_memory(records, [records]) == fold_in_memory(
        records, [[record] for record in records])
    assert expected["offsets"] == [(TOPIC, 0, len(records))]
    # Every record got an outcome or a rejection (or was a repeat of a decided event).
    decided = {row[0] for row in expected["outcomes"]}
    for record in records:
        assert record.event is None or str(record.event.event_id) in decided




# -- the generator is rich enough to prove something -----------------------------------------------


def folded(history: list) -> Changes:
    return fold(MemoryCatalog(), build_log(history))


def has_status(status: Status):
    return lambda history, changes: any(o.status is status for o in changes.outcomes.values())


def defined_twice(history: list, changes: Changes) -> bool:
    """One schema defined twice, both accepted: the second changed nothing."""
    accepted = [e.command.sha256 for e in _events(history)
                if isinstance(e.command, DefineSchema)
                and changes.outcomes[e.event_id].status is Status.ACCEPTED]
    return len(accepted) > len(set(accepted))


GOALS = {
    **{f"status-{status}": has_status(status) for status in Status},
    "undecodable": lambda h, c: any(r.event_id is None for r in c.rejections),
    "purge-with-layers": lambda h, c: bool(c.purged) and c.schemas != {},
    "segment-removed": lambda h, c: None in c.segments.values(),
    "replaced-layer": lambda h, c: any(x is not None and x.size_bytes > 0 for x in c.layers.values())
    and len(c.outcomes) > 3,
    "register-before-its-schema": lambda h, c: any("never defined" in o.reason for o in c.outcomes.values()),
    "by-reference-after-its-schema": lambda h, c: any(
        x is not None and x.schema_sha256 and x.properties_schema_sha256 == schemas.digest(PROPERTY_SCHEMA)
        for x in c.layers.values()),
    "schema-defined-twice": defined_twice,
    "two-datasets-share-a-schema": lambda h, c: any(len(users) > 1 for users in _schema_users(c).values()),
    "upsert-replaces-a-row": lambda h, c: any(
        w.mode == "upsert" and w.rows.num_rows and w.table_id in {x.table_id for x in c.table_writes[:i]}
        for i, w in enumerate(c.table_writes)),
    "write-in-parts-applied": lambda h, c: any(
        isinstance(e.command, WriteTable) and e.command.parts > 1 and e.command.part == e.command.parts - 1
        and c.outcomes[e.event_id].status is Status.ACCEPTED for e in _events(h)),
    "write-in-parts-dropped": lambda h, c: any("dropped" in o.reason for o in c.outcomes.values()),
    "entry-name-taken-across-kinds": lambda h, c: any(
        "a dataset named" in o.reason for o in c.outcomes.values()) and bool(c.tables),
    "table-deleted": lambda h, c: any(t.deleted for t in c.tables.values()),
    "tag-created": lambda h, c: any(tag is not None for tag in c.tags.values()),
    "asset-scope-cleared": lambda h, c: None in c.asset_scopes.values(),
}


def _events(history: list) -> list[Event]:
    """The events of a history, those of writes in parts included."""
    found = []
    for step in history:
        if isinstance(step, Event):
            found.append(step)
        elif step[0] == "parts":
            found += step[1]
    return found


def _schema_users(changes: Changes) -> dict[str, set[uuid.UUID]]:
    users: dict[str, set[uuid.UUID]] = {}
    for layer in changes.layers.values():
        if layer is not None and layer.schema_sha256:
            users.setdefault(layer.schema_sha256, set()).add(layer.dataset_id)
    return users


@pytest.mark.parametrize("goal", GOALS.values(), ids=GOALS.keys())
def test_generated_histories_reach(goal):
    # Not a property: it fails if the strategies above can no longer produce this case, so the
    # batch-boundary property would silently stop covering it. The rarest goals take a few hundred
    # examples, now and then over a thousand: the bound keeps such a run from failing.
    find(histories, lambda history: goal(history, folded(history)),
         settings=settings(max_examples=10_000, deadline=None, database=None, phases=[Phase.generate]))
