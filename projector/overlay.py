"""The fold's state while it applies a batch: the projection as the batch's records so far leave
it, laid over the store's read-only view of it before the batch (``FoldReader``), and the
``Changes`` those records make. Every write of the fold goes through it: it keeps the change
feed's entries attributed to their record and every change of a versioned row in the history.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from projector import derived, layer_runs
from projector.model import (
    AssetScope,
    Change,
    ChangeKind,
    Changes,
    Dataset,
    Layer,
    LayerRun,
    LogRecord,
    SearchIndex,
    Segment,
    Table,
    TablePart,
    Tag,
    Version,
    Versioned,
)


class FoldReader(Protocol):
    """The fold's read port: the projection as of the end of the previous batch."""

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        """Also a deleted one (a tombstone)."""
        ...

    def dataset_by_name(self, name: str) -> Dataset | None: ...

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None: ...

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None: ...

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        """The dataset's layers in the product of the two sets, an empty set meaning all; in no
        particular order."""
        ...

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None: ...

    def schema(self, digest: str) -> bytes | None: ...

    def has_outcome(self, event_id: uuid.UUID) -> bool: ...

    def table(self, table_id: uuid.UUID) -> Table | None:
        """Also a deleted one (a tombstone)."""
        ...

    def table_by_name(self, name: str) -> Table | None: ...

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        """The kept parts of a write, by part number."""
        ...

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None: ...

    def search_index(self, dataset_id: uuid.UUID, entity_path: str, component: str) -> SearchIndex | None: ...

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        """A dataset's search indexes, by entity path then component."""
        ...



class Overlay:
    """The view with this batch's changes laid over it, so later records see earlier ones."""

    def __init__(self, view: FoldReader) -> None:
        self.view = view
        self.changes = Changes()
        self._names: dict[str, uuid.UUID | None] = {}
        self._table_names: dict[str, uuid.UUID | None] = {}
        self._changed_layers: dict[tuple[uuid.UUID, str], set[str]] = {}
        """The layer names of each (dataset, segment) that ``changes.layers`` has."""
        self._record: LogRecord | None = None
        self._record_feed_start = 0
        self.run_events: set[uuid.UUID] = set()
        """The events decided in runs of ``projector.batch_fold`` not yet put into ``changes``."""

    def take_run(self, run: LayerRun) -> None:
        """Put a run's registrations into ``changes``, as if each had been applied here."""
        for dataset_id, segment_id, layer_name in layer_runs.materialize_into(run, self.changes):
            self._changed_layers.setdefault((dataset_id, segment_id), set()).add(layer_name)
        self.run_events -= run.event_ids

    def begin(self, record: LogRecord) -> None:
        """``record`` is the one being applied: ``note`` attributes changes to it."""
        self._record = record
        self._record_feed_start = len(self.changes.feed)

    def note(self, kind: ChangeKind, entry_id: uuid.UUID | None, entry_name: str, segment_id: str = "",
             layer_name: str = "", *, detail: str = "") -> None:
        """Adds an entry to the change feed for the record being applied."""
        assert self._record is not None, "note() before begin()"
        feed = self.changes.feed
        feed.append(Change(self._record.position, len(feed) - self._record_feed_start, kind, entry_id,
                           entry_name, segment_id, layer_name, detail))

    def dataset(self, dataset_id: uuid.UUID) -> Dataset | None:
        if dataset_id in self.changes.datasets:
            return self.changes.datasets[dataset_id]
        return self.view.dataset(dataset_id)

    def dataset_by_name(self, name: str) -> Dataset | None:
        if name in self._names:
            holder = self._names[name]
            return None if holder is None else self.changes.datasets[holder]
        return self.view.dataset_by_name(name)

    def _overlaid(self, changed: dict[_Key, _Value | None], key: _Key,
                  stored: Callable[..., _Value | None]) -> _Value | None:
        """A row of one of a dataset's tables: as this batch left it, else (unless the batch
        deleted the dataset) as the view has it."""
        if key in changed:
            return changed[key]
        if key[0] in self.changes.purged:
            return None
        return stored(*key)

    def segment(self, dataset_id: uuid.UUID, segment_id: str) -> Segment | None:
        return self._overlaid(self.changes.segments, (dataset_id, segment_id), self.view.segment)

    def layer(self, dataset_id: uuid.UUID, segment_id: str, layer_name: str) -> Layer | None:
        return self._overlaid(self.changes.layers, (dataset_id, segment_id, layer_name), self.view.layer)

    def matching_layers(self, dataset_id: uuid.UUID, segment_ids: frozenset[str],
                        layer_names: frozenset[str]) -> list[Layer]:
        current: dict[tuple[str, str], Layer | None] = {} if dataset_id in self.changes.purged else {
            (x.segment_id, x.layer_name): x
            for x in self.view.matching_layers(dataset_id, segment_ids, layer_names)}
        if segment_ids:
            changed = [(s, n) for s in segment_ids for n in self._changed_layers.get((dataset_id, s), ())]
        else:
            changed = [(s, n) for d, s, n in self.changes.layers if d == dataset_id]
        for segment_id, layer_name in changed:
            if not layer_names or layer_name in layer_names:
                current[(segment_id, layer_name)] = self.changes.layers[(dataset_id, segment_id, layer_name)]
        return [x for x in current.values() if x is not None]

    def asset_scope(self, dataset_id: uuid.UUID, segment_id: str) -> AssetScope | None:
        return self._overlaid(self.changes.asset_scopes, (dataset_id, segment_id), self.view.asset_scope)

    def schema(self, digest: str) -> bytes | None:
        return self.changes.schemas.get(digest) or self.view.schema(digest)

    def has_outcome(self, event_id: uuid.UUID) -> bool:
        return (event_id in self.changes.outcomes or event_id in self.run_events
                or self.view.has_outcome(event_id))

    def table(self, table_id: uuid.UUID) -> Table | None:
        if table_id in self.changes.tables:
            return self.changes.tables[table_id]
        return self.view.table(table_id)

    def table_by_name(self, name: str) -> Table | None:
        if name in self._table_names:
            holder = self._table_names[name]
            return None if holder is None else self.changes.tables[holder]
        return self.view.table_by_name(name)

    def tag(self, dataset_id: uuid.UUID, name: str) -> Tag | None:
        return self._overlaid(self.changes.tags, (dataset_id, name), self.view.tag)

    def put_tag(self, key: tuple[uuid.UUID, str], tag: Tag | None) -> None:
        """A dataset's tag (None: deleted)."""
        self.changes.tags[key] = tag
        self._version(Versioned.TAG, key, tag)

    def search_index(self, dataset_id: uuid.UUID, entity_path: str, component: str) -> SearchIndex | None:
        return self._overlaid(self.changes.search_indexes, (dataset_id, entity_path, component),
                              self.view.search_index)

    def search_indexes(self, dataset_id: uuid.UUID) -> list[SearchIndex]:
        """The dataset's indexes, this batch's changes included."""
        found = {(i.entity_path, i.component): i for i in self.view.search_indexes(dataset_id)} \
            if dataset_id not in self.changes.purged else {}
        for (changed, entity_path, component), index in self.changes.search_indexes.items():
            if changed == dataset_id:
                found[(entity_path, component)] = index  # type: ignore[assignment]
        return [index for _, index in sorted(found.items()) if index is not None]

    def put_search_index(self, key: tuple[uuid.UUID, str, str], index: SearchIndex | None) -> None:
        """A dataset's index of a column (None: deleted)."""
        self.changes.search_indexes[key] = index

    def table_parts(self, table_id: uuid.UUID, write_id: str) -> list[TablePart]:
        parts: dict[int, TablePart | None] = {} if table_id in self.changes.purged else {
            p.part: p for p in self.view.table_parts(table_id, write_id)}
        for (changed_table, changed_write, number), part in self.changes.table_parts.items():
            if (changed_table, changed_write) == (table_id, write_id):
                parts[number] = part
        return [part for n in sorted(parts) if (part := parts[n]) is not None]

    def put_table(self, table: Table) -> None:
        previous = self.table(table.id)
        if previous is not None and not previous.deleted:
            self._table_names[previous.name] = None
        self.changes.tables[table.id] = table
        self._version(Versioned.TABLE, (table.id,), table)
        if not table.deleted:
            self._table_names[table.name] = table.id

    def put_part(self, part: TablePart) -> None:
        self.changes.table_parts[(part.table_id, part.write_id, part.part)] = part

    def drop_part(self, part: TablePart) -> None:
        self.changes.table_parts[(part.table_id, part.write_id, part.part)] = None

    def put_dataset(self, dataset: Dataset, *, derivable: bool = False) -> None:
        """The dataset's new value, and a version of it unless ``derivable`` (a registration's
        touch) and the change is one the history derives from the layers (``projector.derived``)."""
        previous = self.dataset(dataset.id)
        if previous is not None and not previous.deleted:
            self._names[previous.name] = None
        self.changes.datasets[dataset.id] = dataset
        if not (derivable and previous is not None and derived.same_version(previous, dataset)):
            self._version(Versioned.DATASET, (dataset.id,), dataset)
        if not dataset.deleted:
            self._names[dataset.name] = dataset.id

    def purge(self, dataset_id: uuid.UUID) -> None:
        """Everything of a deleted entry (dataset or table) goes."""
        self.changes.purged.add(dataset_id)
        self._version(Versioned.PURGE, (dataset_id,), None)
        _drop_entry(self.changes.segments, dataset_id)
        _drop_entry(self.changes.layers, dataset_id)
        _drop_entry(self.changes.asset_scopes, dataset_id)
        _drop_entry(self.changes.tags, dataset_id)
        _drop_entry(self.changes.search_indexes, dataset_id)
        _drop_entry(self.changes.table_parts, dataset_id)
        _drop_entry(self._changed_layers, dataset_id)

    def put_segment(self, segment: Segment, *, derivable: bool = False) -> None:
        """The segment's new value, and a version of it unless ``derivable``: a registration's
        later clock, which the history derives from the layer it leaves (``projector.derived``)."""
        if derivable:
            self.changes.segments[(segment.dataset_id, segment.segment_id)] = segment
        else:
            self._set_segment(segment, segment)

    def drop_segment(self, segment: Segment) -> None:
        self._set_segment(segment, None)

    def _set_segment(self, segment: Segment, value: Segment | None) -> None:
        key = (segment.dataset_id, segment.segment_id)
        self.changes.segments[key] = value
        self._version(Versioned.SEGMENT, key, value)

    def put_scope(self, key: tuple[uuid.UUID, str], scope: AssetScope | None) -> None:
        """An asset's scope (None: dropped, with its segment)."""
        self.changes.asset_scopes[key] = scope
        self._version(Versioned.ASSET_SCOPE, key, scope)

    def put_layer(self, layer: Layer) -> None:
        self._set_layer(layer, layer)

    def drop_layer(self, layer: Layer) -> None:
        self._set_layer(layer, None)

    def _set_layer(self, layer: Layer, value: Layer | None) -> None:
        key = (layer.dataset_id, layer.segment_id, layer.layer_name)
        self.changes.layers[key] = value
        self._changed_layers.setdefault((layer.dataset_id, layer.segment_id), set()).add(layer.layer_name)
        self._version(Versioned.LAYER, key, value)

    def _version(self, kind: Versioned, key: tuple[Any, ...], row: Any) -> None:
        assert self._record is not None, "a change before begin()"
        self.changes.history.append(Version(self._record.position.offset, kind, key, row))


_Key = TypeVar("_Key", bound=tuple[Any, ...])
_Value = TypeVar("_Value")


def _drop_entry(changed: dict[_Key, Any], entry_id: uuid.UUID) -> None:
    """Drops the keys of ``changed`` that start with ``entry_id``."""
    for key in [k for k in changed if k[0] == entry_id]:
        del changed[key]
