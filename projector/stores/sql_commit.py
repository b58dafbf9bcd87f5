"""The projector's writes to the SQL store: a batch's changes and the next offset of every
(topic, partition) it consumed, committed in one transaction (DESIGN invariant 2), and everything
that transaction writes besides the current rows: the history of the rows it replaces
(``projector.stores.sql_history`` says what is kept), the layer table's chunks it touches, and the
rows of created tables (``projector.stores.sql_tables``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from projector import layer_table
from projector.model import ChangeKind, Changes, LayerRun, Version, Versioned
from projector.ports import StaleBatchError
from projector.stores import sql_history, sql_rows, sql_tables
from projector.stores.sql_database import Database
from projector.stores.sql_schema import names, upsert

_LAYER_TABLE_COLUMNS = (
    "l.segment_id, l.layer_name, l.storage_url, l.size_bytes, l.registered_at, l.schema_sha256, "
    "coalesce(l.properties, ?), l.num_chunks, l.index_ranges, coalesce(l.properties_schema_sha256, ''), "
    "coalesce(l.properties_batch, ?), l.registered_offset, s.position")
"""A layer's columns in ``projector.layer_table`` order, of ``layers l`` joined with ``segments
s``; their parameters: the empty bytes, twice."""
_HISTORY_LAYERS = (
    f"select {_LAYER_TABLE_COLUMNS}, ?, l.event_id, l.registered_topic, l.registered_partition "
    "from layers l join segments s using (dataset_id, segment_id) where l.dataset_id = ?")
"""Stored layers as rows of ``layer_table.HISTORY_COLUMNS``; parameters: the empty bytes twice,
the closing offset, the dataset id."""
_CHUNK_LAYERS = (
    f"select {_LAYER_TABLE_COLUMNS} "
    "from segments s join layers l using (dataset_id, segment_id) "
    "where s.dataset_id = ? and s.position >= ? and s.position < ? "
    "order by s.position, l.registered_topic, l.registered_partition, l.registered_offset")
"""Its parameters: the empty bytes (twice), the dataset id, the first and the last position."""


def next_offsets(database: Database) -> dict[tuple[str, int], int]:
    """The offset after the last applied record, per (topic, partition)."""
    return {(r["topic"], r["partition"]): r["next_offset"]
            for r in database.query("select * from offsets")}


def next_offset(database: Database, topic: str, partition: int) -> int:
    """The offset after the last applied record of one partition; 0 before its first."""
    rows = database.query("select next_offset from offsets where topic = ? and partition = ?",
                          (topic, partition))
    return rows[0]["next_offset"] if rows else 0




def commit(database: Database, changes: Changes, *, expected_offsets: dict[tuple[str, int], int],
           deferred_chunks: set[tuple[str, int]] | None = None) -> None:
    """Write ``changes`` and their next offsets in one transaction. With ``deferred_chunks``, the
    layer table's chunks the changes touch are added to it instead of being written
    (``rewrite_chunks`` writes them later).

    Raises ``StaleBatchError`` (and writes nothing) if the stored offsets are no longer
    ``expected_offsets``, ``StoreUnavailableError`` (and writes nothing) if the store cannot be
    written.
    """
    committed_at = sql_rows.micros(datetime.now(UTC))
    rows = {
        "datasets": [sql_rows.dataset_values(d) for d in changes.datasets.values()],
        "segments": [sql_rows.segment_values(s) for s in changes.segments.values() if s is not None],
        "layers": [sql_rows.layer_values(x) for x in changes.layers.values() if x is not None],
        "asset_scopes": [sql_rows.scope_values(a) for a in changes.asset_scopes.values() if a is not None],
        "schemas": list(changes.schemas.items()),
        "tags": [sql_rows.tag_values(t) for t in changes.tags.values() if t is not None],
        "search_indexes": [sql_rows.search_index_values(i) for i in changes.search_indexes.values()
                           if i is not None],
        "tables": [sql_rows.table_values(t) for t in changes.tables.values()],
        "table_parts": [sql_rows.table_part_values(p) for p in changes.table_parts.values() if p is not None],
        "outcomes": [sql_rows.outcome_values(o) for o in changes.outcomes.values()],
        "offsets": [(t, p, o) for (t, p), o in changes.next_offsets.items()],
    }
    # Rows whose keys the store holds no row of: those keyed by the log position of the record
    # that made them (a commit folds each record once), and the layers runs make of new keys.
    added: dict[str, list[tuple[Any, ...]]] = {
        "rejections": [sql_rows.rejection_values(r) for r in changes.rejections],
        "feed": [sql_rows.change_values(c, committed_at) for c in changes.feed],
        "batches": [(t, p, first, changes.next_offsets[(t, p)], changes.records[(t, p)])
                    for (t, p), first in changes.first_offsets.items()],
        "layers": [],
    }
    for run in changes.runs:
        _add_run_rows(rows, added, run, committed_at)
    # The connection's context rolls the transaction back on any error, so a batch that
    # cannot be written (read-only or full disk) leaves the store exactly as it was.
    statements = sql_tables.Statements(database.execute, database.key_rows, database.key_in)
    with database.write_transaction():
        stored = {(t, p): o for t, p, o in
                  database.execute("select topic, partition, next_offset from offsets")}
        if stored != expected_offsets:
            raise StaleBatchError(
                f"store offsets moved from {expected_offsets} to {stored} during the batch")
        chunks = _touched_chunks(database, changes)
        _keep_history(database, changes.history, changes.runs)
        purged = [(str(dataset_id),) for dataset_id in changes.purged]
        for table in ("segments", "layers", "layer_chunks", "asset_scopes", "tags", "search_indexes"):
            database.executemany(f"delete from {table} where dataset_id = ?", purged)
        database.executemany("delete from tags where dataset_id = ? and name = ?",
                             [(str(d), n) for (d, n), tag in changes.tags.items() if tag is None])
        database.executemany("delete from search_indexes where dataset_id = ? and entity_path = ? "
                             "and component = ?",
                             [(str(d), e, c) for (d, e, c), index in changes.search_indexes.items()
                              if index is None])
        tables = sql_tables.Writer(statements)
        database.executemany(
            "delete from table_parts where table_id = ? and write_id = ? and part = ?",
            [(str(t), w, n) for (t, w, n), part in changes.table_parts.items() if part is None])
        database.executemany(
            "delete from segments where dataset_id = ? and segment_id = ?",
            [(str(d), s) for (d, s), segment in changes.segments.items() if segment is None])
        database.executemany(
            "delete from asset_scopes where dataset_id = ? and segment_id = ?",
            [(str(d), s) for (d, s), scope in changes.asset_scopes.items() if scope is None])
        database.executemany(
            "delete from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
            [(str(d), s, n) for (d, s, n), layer in changes.layers.items() if layer is None])
        for table, values in rows.items():
            if values:
                database.upsert_many(table, values)
        for table, values in added.items():
            if values:
                database.insert_many(table, values)
        if deferred_chunks is None:
            rewrite_chunks(database, chunks)
        else:
            deferred_chunks.update(chunks)  # a chunk written too many is written as it is
        for write in changes.table_writes:
            tables.apply(write)
        for version in changes.history:  # after the writes: a table deleted later in the batch
            if version.kind is Versioned.PURGE:
                tables.remove(str(version.key[0]), version.offset)
        tables.finish()


def _keep_history(database: Database, history: list[Version], runs: list[LayerRun]) -> None:
    """Lay down the batch's versions (``projector.stores.sql_history``): end the versions the
    store held where the batch first changed their rows or purged their entry, then add the
    batch's own, those of its runs too. Runs inside ``commit``'s transaction, before the current
    tables change."""
    found = sql_history.spans(history)
    closing: dict[Versioned, list[tuple[Any, ...]]] = {}
    for kind, key, offset in found.first_touches:
        closing.setdefault(kind, []).append((offset, *map(sql_rows.key_text, key)))
    closed_layers = _close_stored_layers(database, closing.pop(Versioned.LAYER, []), found.purges)
    for kind, rows in closing.items():
        kept = sql_history.KEPT[kind]
        where = " and ".join(f"{names([c])} = ?" for c in kept.key)
        database.executemany(f"update {kept.table} set valid_to = ? where {where} and valid_to is null", rows)
    for entry_id, offset in found.purges:
        for kind in (Versioned.SEGMENT, Versioned.ASSET_SCOPE, Versioned.TAG):
            database.execute(f"update {sql_history.KEPT[kind].table} set valid_to = ? "
                             "where dataset_id = ? and valid_to is null", (offset, str(entry_id)))
    merged_schemas: dict[bytes, str] = {}
    added: dict[str, list[tuple[Any, ...]]] = {}
    for span in found.spans:
        if span.kind is Versioned.LAYER:
            continue
        if span.kind is Versioned.DATASET:
            values = sql_rows.dataset_history_values(span.row, merged_schemas)
        else:
            values = sql_rows.HISTORY_VALUES[span.kind](span.row)
        added.setdefault(sql_history.KEPT[span.kind].table, []).append(
            (*values, span.valid_from, span.valid_to))
    if merged_schemas:
        database.upsert_many("schemas", [(digest, merged) for merged, digest in merged_schemas.items()])
    for run in runs:
        _add_run_history(added, closed_layers, run)
    for table, rows in added.items():
        database.insert_many(table, rows)
    _add_closed_layers(database, closed_layers, found.spans)


def _close_stored_layers(database: Database, first_touches: list[tuple[Any, ...]],
                         purges: list[tuple[Any, int]]) -> dict[str, list[tuple[Any, ...]]]:
    """The stored layers the batch replaces or removes (``first_touches``: (offset, dataset,
    segment, layer)) or purges, as rows of ``HISTORY_COLUMNS`` by dataset, closed at that
    offset; the replaced and removed ones are deleted from ``layers`` here."""
    closed: dict[str, list[tuple[Any, ...]]] = {}
    wanted: dict[str, dict[tuple[str, str], int]] = {}
    for offset, dataset, segment_id, layer_name in first_touches:
        wanted.setdefault(dataset, {})[(segment_id, layer_name)] = offset
    for dataset, keys in wanted.items():
        for statement, params in database.statements_in(
                _HISTORY_LAYERS + " and l.segment_id in ({})", (b"", b"", 0, dataset),
                sorted({segment_id for segment_id, _ in keys})):
            for row in database.execute(statement, params).fetchall():
                offset = keys.get((row[0], row[1]))
                if offset is not None:
                    closed.setdefault(dataset, []).append((*row[:13], offset, *row[14:]))
    database.executemany("delete from layers where dataset_id = ? and segment_id = ? and layer_name = ?",
                         [r[1:] for r in first_touches])
    for entry_id, offset in purges:
        rows = database.execute(_HISTORY_LAYERS, (b"", b"", offset, str(entry_id))).fetchall()
        if rows:
            closed.setdefault(str(entry_id), []).extend(rows)
    return closed


def _add_closed_layers(database: Database, closed: dict[str, list[tuple[Any, ...]]],
                       spans: list[sql_history.Span]) -> None:
    """Add the closed layers (``closed``, and the layer versions of ``spans`` that the batch
    both opened and closed) to ``layer_history``, each chunk they fall in rewritten once."""
    positions = _positions(database, spans)
    for span in spans:
        if span.kind is Versioned.LAYER and span.valid_to is not None:
            layer = span.row
            position = positions[(sql_rows.id_text(layer.dataset_id), layer.segment_id, span.valid_from)]
            closed.setdefault(sql_rows.id_text(layer.dataset_id), []).append(
                sql_rows.closed_layer_values(layer, position, span.valid_to))
    size = sql_history.HISTORY_CHUNK_OFFSETS
    for dataset, rows in closed.items():
        by_chunk: dict[int, list[tuple[Any, ...]]] = {}
        for row in rows:
            by_chunk.setdefault(row[13] // size, []).append(row)
        for chunk, chunk_rows in by_chunk.items():
            blobs = database.blobs("select layers from layer_history where dataset_id = ? and chunk = ?",
                                   (dataset, chunk))
            table = pa.concat_tables([layer_table.from_ipc(blobs, layer_table.HISTORY_COLUMNS),
                                      layer_table.from_rows(chunk_rows, layer_table.HISTORY_COLUMNS)])
            table = table.sort_by([("valid_to", "ascending"), ("segment_id", "ascending"),
                                   ("layer_name", "ascending")])
            database.execute(upsert("layer_history"), (dataset, chunk, layer_table.to_ipc(table)))


def _positions(database: Database, spans: list[sql_history.Span]) -> dict[tuple[str, str, int], int]:
    """The segment position of each layer version of ``spans`` that the batch closed, by
    (dataset, segment, the offset it was opened at): from the batch's segment versions, else
    from the store's segment (read before the batch changes it)."""
    segments: dict[tuple[str, str], list[sql_history.Span]] = {}
    for span in spans:
        if span.kind is Versioned.SEGMENT:
            segments.setdefault((sql_rows.id_text(span.key[0]), span.key[1]), []).append(span)
    found: dict[tuple[str, str, int], int] = {}
    missing: dict[str, set[str]] = {}
    for span in spans:
        if span.kind is not Versioned.LAYER or span.valid_to is None:
            continue
        key = (sql_rows.id_text(span.key[0]), span.key[1])
        opened = span.valid_from
        position = next((s.row.position for s in segments.get(key, ())
                         if s.valid_from <= opened and (s.valid_to is None or s.valid_to > opened)), None)
        if position is None:
            missing.setdefault(key[0], set()).add(key[1])
        else:
            found[(*key, opened)] = position
    stored: dict[tuple[str, str], int] = {}
    for dataset, segment_ids in missing.items():
        for statement, params in database.statements_in(
                "select segment_id, position from segments where dataset_id = ? and segment_id in ({})",
                (dataset,), sorted(segment_ids)):
            stored.update({(dataset, s): p for s, p in database.execute(statement, params)})
    for span in spans:
        if span.kind is Versioned.LAYER and span.valid_to is not None:
            key = (sql_rows.id_text(span.key[0]), span.key[1])
            if (*key, span.valid_from) not in found:
                found[(*key, span.valid_from)] = stored[key]
    return found


def _touched_chunks(database: Database, changes: Changes) -> set[tuple[str, int]]:
    """The (dataset id, chunk) of every segment the batch adds, changes or removes: where it
    is now and where it will be. Runs inside ``commit``'s transaction, before its writes."""
    chunks = {(sql_rows.id_text(s.dataset_id), s.position // layer_table.CHUNK_SEGMENTS)
              for s in changes.segments.values() if s is not None}
    for run in changes.runs:  # their segments are where they were, or new
        dataset_text = sql_rows.id_text(run.dataset_id)
        chunks.update((dataset_text, position // layer_table.CHUNK_SEGMENTS)
                      for position in {write.position for write in run.writes})
    touched: dict[str, set[str]] = {}
    for dataset_id, segment_id in [*changes.segments, *((d, s) for d, s, _ in changes.layers)]:
        if dataset_id not in changes.purged:
            touched.setdefault(sql_rows.id_text(dataset_id), set()).add(segment_id)
    for dataset_text, segment_ids in touched.items():
        for statement, params in database.statements_in(
                "select position from segments where dataset_id = ? and segment_id in ({})",
                (dataset_text,), sorted(segment_ids)):
            chunks.update((dataset_text, position // layer_table.CHUNK_SEGMENTS)
                          for (position,) in database.execute(statement, params))
    return chunks


def _add_run_rows(rows: dict[str, list[tuple[Any, ...]]], added: dict[str, list[tuple[Any, ...]]],
                  run: LayerRun, committed_at: int) -> None:
    """The current rows of a run (``projector.layer_runs``): the layers it leaves (``added`` those
    of keys the store held no layer of), the segments it created or moved, its outcomes and its
    entries of the change feed."""
    dataset_text = sql_rows.id_text(run.dataset_id)
    topic, partition = run.topic, run.partition
    writes = run.writes
    replaced = {(layer.segment_id, layer.layer_name) for layer, _, _ in run.replaced}
    for key, index in run.latest.items():
        (rows if key in replaced else added)["layers"].append(
            sql_rows.run_layer_values(dataset_text, topic, partition, writes[index]))
    rows["segments"] += [(dataset_text, segment_id, s.created_by.topic, s.created_by.partition,
                          s.created_by.offset, sql_rows.micros(s.updated_at), s.position)
                         for segment_id, s in run.segments.items() if s.changed]
    rows["outcomes"] += [(str(event_id), topic, partition, offset, str(run.status(reason)), reason)
                         for offset, event_id, reason in run.outcomes]
    feed = added["feed"]
    for write in writes:
        command = write.command
        feed.append((topic, partition, write.offset, 0, str(write.change_kind), dataset_text,
                     write.entry_name, command.segment_id, command.layer_name, command.storage_url,
                     committed_at))
        if write.created:
            feed.append((topic, partition, write.offset, 1, str(ChangeKind.SEGMENT_ADDED), dataset_text,
                         write.entry_name, command.segment_id, "", "", committed_at))


def _add_run_history(added: dict[str, list[tuple[Any, ...]]], closed: dict[str, list[tuple[Any, ...]]],
                     run: LayerRun) -> None:
    """A run's versions: the first version of each segment it created, and the layers it
    closed (the stored ones it replaced, and its own replaced later in the run)."""
    dataset_text = sql_rows.id_text(run.dataset_id)
    added.setdefault("segment_history", []).extend(
        (dataset_text, write.command.segment_id, run.topic, run.partition, write.offset,
         sql_rows.micros(write.registered_at), write.position, write.offset, None)
        for write in run.writes if write.created)
    ended = closed.setdefault(dataset_text, [])
    ended += [sql_rows.closed_layer_values(layer, position, offset)
              for layer, position, offset in run.replaced]
    ended += [sql_rows.closed_layer_values(run.layer(write), write.position, offset)
              for write, offset in run.closed_writes()]
    if not ended:
        del closed[dataset_text]


def rewrite_chunks(database: Database, chunks: set[tuple[str, int]]) -> None:
    """Write each of ``chunks`` ((dataset id, chunk)) of the layer table again from the layers
    its segments hold now, or delete it if they hold none. Runs inside ``commit``'s transaction,
    after the batch's layers and segments are written."""
    size = layer_table.CHUNK_SEGMENTS
    for dataset_id, chunk in sorted(chunks):
        start = chunk * size
        rows = database.execute(_CHUNK_LAYERS, (b"", b"", dataset_id, start, start + size)).fetchall()
        if rows:
            database.execute(upsert("layer_chunks"),
                             (dataset_id, chunk, layer_table.to_ipc(layer_table.from_rows(rows))))
        else:
            database.execute("delete from layer_chunks where dataset_id = ? and chunk = ?",
                             (dataset_id, chunk))
