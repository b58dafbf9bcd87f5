"""A dataset narrowed to some segments and some contents, as ``rerun.catalog.DatasetSelection``.

``DatasetEntry.filter_segments()`` and ``filter_contents()`` return one; either call narrows it
again. Nothing is read until ``reader()``'s DataFrame is executed (see ``recordings.segments``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import datafusion
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datafusion import col, lit
from datafusion import functions as F

from commands import search as searches
from commands.reads import layer_table, manifest_of
from projector import Dataset, views
from recordings import (
    SEGMENT_ID,
    Contents,
    LayerFile,
    ReadOptions,
    expressions,
    index_names,
    layer_files,
    output_schema,
    rerun_schema,
    segments_dataset,
    selected_schema,
    with_manifest_ranges,
)
from sdk import _search
from sdk._connection import Connection

if TYPE_CHECKING:
    from rerun.catalog import Schema

EVERYTHING = ("/**",)
"""The contents of an unfiltered selection: every entity but the properties, as in Rerun."""


class SelectedDataset(Protocol):
    """What a selection reads of its dataset (a ``DatasetEntry``)."""

    @property
    def id(self) -> uuid.UUID: ...

    def arrow_schema(self) -> pa.Schema: ...

    def segment_ids(self) -> list[str]: ...

    @property
    def record(self) -> Dataset:
        """The dataset's record, as the projection has it after this client's writes."""
        ...

    def segment_table(self, join_meta: datafusion.DataFrame | None = None,
                      join_key: str = SEGMENT_ID) -> datafusion.DataFrame: ...


class DatasetSelection:
    """A dataset plus segment and content filters; ``reader()`` reads what they select.

    Examples:
        >>> joints = dataset.filter_contents(["/action/**", "/observation/**"])  # doctest: +SKIP
        >>> joints.filter_segments(["ep_1"]).reader(index="real_time")  # doctest: +SKIP
    """

    def __init__(self, internal: Connection, dataset: SelectedDataset,
                 segment_ids: frozenset[str] | None = None,
                 content_groups: tuple[tuple[str, ...], ...] = ()) -> None:
        self._internal = internal
        self._dataset = dataset
        self._segment_ids = segment_ids
        self._content_groups = content_groups

    def __repr__(self) -> str:
        segments = "all segments" if self._segment_ids is None else f"{len(self._segment_ids)} segments"
        contents = (f"content_filters={[list(g) for g in self._content_groups]!r}"
                    if self._content_groups else "no content filter")
        return f"DatasetSelection({self._dataset!r}, {segments}, {contents})"

    @property
    def dataset(self) -> SelectedDataset:
        """The dataset this selection narrows (a ``DatasetEntry``)."""
        return self._dataset

    # -- narrowing ----------------------------------------------------------------------------

    def filter_segments(self, segment_ids: str | Sequence[str] | datafusion.DataFrame) -> DatasetSelection:
        """Keep only these segments: an id, a list of ids, or a DataFrame with a
        ``rerun_segment_id`` column (other columns are ignored). Unknown ids select nothing, as
        in Rerun. Raises ``ValueError`` for a DataFrame without that column."""
        if isinstance(segment_ids, datafusion.DataFrame):
            if SEGMENT_ID not in segment_ids.schema().names:
                raise ValueError(f"filter_segments() needs a DataFrame with a {SEGMENT_ID!r} column; "
                                 f"this one has {segment_ids.schema().names}")
            ids = pa.table(segment_ids.select(SEGMENT_ID)).column(SEGMENT_ID).to_pylist()
        elif isinstance(segment_ids, str):
            ids = [segment_ids]
        else:
            ids = list(segment_ids)
        if not all(isinstance(i, str) for i in ids):
            raise ValueError(f"segment ids are strings, got {ids!r}")
        wanted = frozenset(ids)
        if self._segment_ids is not None:
            wanted &= self._segment_ids
        return DatasetSelection(self._internal, self._dataset, wanted, self._content_groups)

    def filter_contents(self, exprs: Contents) -> DatasetSelection:
        """Keep only the entities the expressions select (Rerun's entity path filter syntax:
        ``/points/**``, ``-/text/**``, exact paths, or a ``ContentFilter``). A second call narrows
        further: an entity must pass both. ``[]`` selects nothing. Raises ``ValueError`` for an
        expression that is not a string; an expression without a leading ``/`` names the same path
        (``points/**`` is ``/points/**``), as in Rerun."""
        return DatasetSelection(self._internal, self._dataset, self._segment_ids,
                                (*self._content_groups, expressions(exprs)))

    # -- reads --------------------------------------------------------------------------------

    def segment_ids(self) -> list[str]:
        """The selected segments' ids, in registration order."""
        ids = self._dataset.segment_ids()
        return ids if self._segment_ids is None else [s for s in ids if s in self._segment_ids]

    def schema(self) -> Schema:
        """Rerun's ``Schema`` of the selection: the index columns and the component columns the
        content filters select."""
        return rerun_schema(self.arrow_schema())

    def arrow_schema(self) -> pa.Schema:
        """``schema()`` as an Arrow schema, with Rerun's field metadata."""
        return selected_schema(self._dataset.arrow_schema(), self._content_groups or (EVERYTHING,))

    def search_vector(self, query: Any, column: Any, top_k: int, *,
                      where: Any = None) -> datafusion.DataFrame:
        """``DatasetEntry.search_vector`` among the selected segments (taken before the top k)."""
        entity_path, component = _search.column_of(self._dataset.arrow_schema(), column)
        ids = _search.selected_ids(self._dataset.segment_table, self._selected(), where)
        found = searches.search_vector(self._internal, self._dataset.record, entity_path, component,
                                             query, top_k, ids)
        return self._internal.dataframe(found)

    def search_fts(self, query: str, column: Any, *, where: Any = None,
                   limit: int | None = None) -> datafusion.DataFrame:
        """``DatasetEntry.search_fts`` among the selected segments."""
        entity_path, component = _search.column_of(self._dataset.arrow_schema(), column)
        ids = _search.selected_ids(self._dataset.segment_table, self._selected(), where)
        found = searches.search_text(self._internal, self._dataset.record, entity_path, component,
                                           query, ids, limit)
        return self._internal.dataframe(found)

    def _selected(self) -> list[str] | None:
        return None if self._segment_ids is None else sorted(self._segment_ids)

    def segment_table(self, join_meta: datafusion.DataFrame | None = None,
                      join_key: str = SEGMENT_ID) -> datafusion.DataFrame:
        """The dataset's segment table, only the selected segments (see
        ``DatasetEntry.segment_table``)."""
        table = self._dataset.segment_table(join_meta, join_key)
        if self._segment_ids is None:
            return table
        return table.filter(F.in_list(col(SEGMENT_ID), [lit(s) for s in sorted(self._segment_ids)]))

    def manifest(self) -> datafusion.DataFrame:
        """The dataset's manifest (see ``DatasetEntry.manifest``), only the selected segments'
        layers: the properties of the others are not read, so one segment's costs as little in a
        dataset of many."""
        return self._internal.dataframe(manifest_of(self._internal, self._layers()))

    def get_index_ranges(self) -> datafusion.DataFrame:
        """One row per selected segment: ``rerun_segment_id``, ``<index>:start`` and
        ``<index>:end`` for each timeline of the dataset (null where a segment has no data)."""
        return self._internal.ctx.from_arrow(_ranges(self._layers(), self._dataset.arrow_schema()))

    def reader(
        self,
        index: str | None,
        *,
        include_semantically_empty_columns: bool = False,
        include_tombstone_columns: bool = False,
        fill_latest_at: bool = False,
        using_index_values: Any = None,
    ) -> datafusion.DataFrame:
        """The selected data as a DataFusion DataFrame: ``rerun_segment_id``, every index column,
        one column per selected component (``/entity:Archetype:field``, with Rerun's field
        metadata); one row per index value of each segment, all layers of a segment read as one
        recording. ``index=None`` reads static data, a row per segment that has some.
        Properties appear only if the contents include ``/__properties/**``.

        ``using_index_values`` resamples at given index values: an array (for every segment whose
        index range covers each value), a dict ``{segment_id: values}`` or a DataFrame with
        ``rerun_segment_id`` and the index column; unknown segment ids are ignored.

        Filters on ``rerun_segment_id`` reach the reader: a query of one segment opens only that
        segment's files. Nothing is read before the DataFrame is executed, and then one segment
        at a time.

        Raises ``ValueError`` for an index the dataset does not have (listing its timelines),
        ``NotFoundError`` or ``RecordingChangedError`` naming the segment, layer and URL if a
        registered file is gone or changed.

        Examples:
            >>> dataset.reader(index="real_time").filter(col("rerun_segment_id") == "ep_1")  # doctest: +SKIP
        """
        layers, segments, options, schema, values = self._plan(
            index, include_semantically_empty_columns, include_tombstone_columns, fill_latest_at,
            using_index_values)
        ranges = None
        if index is not None and values is None:  # resampled rows may lie outside a segment's range
            ranges = _known_ranges(layers, index, schema.field(index).type)
        return self._internal.ctx.read_table(
            segments_dataset(segments, options, schema, self._internal.workers, values, ranges))

    def to_spark(
        self,
        spark: Any,
        index: str | None,
        *,
        include_semantically_empty_columns: bool = False,
        include_tombstone_columns: bool = False,
        fill_latest_at: bool = False,
        using_index_values: Any = None,
        segments_per_partition: int | None = None,
    ) -> Any:
        """What ``reader()`` gives, as a Spark DataFrame whose tasks each read whole segments on
        an executor (which needs strata and rerun-sdk installed, and the files at their URLs).
        Segments are packed into partitions as Spark packs small files (see ``sdk._spark``);
        ``segments_per_partition=1`` gives a partition per segment.

        The rows and column names are ``reader()``'s. Types Spark lacks are converted without
        loss (see ``sdk._spark``): timestamps and durations become int64 nanoseconds, byte lists
        binary, unsigned integers wider signed ones. Raises what ``reader()`` raises, and
        ``ValueError`` for a selected column Spark cannot hold.

        Examples:
            >>> joints = dataset.filter_contents("/observation/**")  # doctest: +SKIP
            >>> joints.to_spark(spark, "real_time").count()  # doctest: +SKIP
        """
        from sdk import _spark

        _, segments, options, schema, values = self._plan(
            index, include_semantically_empty_columns, include_tombstone_columns, fill_latest_at,
            using_index_values)
        return _spark.read_dataset(spark, segments, options, schema, values,
                                   segments_per_partition=segments_per_partition)

    def _plan(self, index: str | None, include_semantically_empty_columns: bool,
              include_tombstone_columns: bool, fill_latest_at: bool, using_index_values: Any
              ) -> tuple[pa.Table, dict[str, list[LayerFile]], ReadOptions, pa.Schema,
                         dict[str, Any] | None]:
        """What a read needs, from one read of the store: the selected layers, the segments'
        checked files, the options, the output schema and the per-segment index values."""
        dataset_schema = self._dataset.arrow_schema()
        options = self._options(index, static=index is None,
                                include_semantically_empty_columns=include_semantically_empty_columns,
                                include_tombstone_columns=include_tombstone_columns,
                                fill_latest_at=fill_latest_at)
        schema = output_schema(dataset_schema, options)
        layers = self._layers()
        segments = layer_files(layers, self._internal.object_store_config)
        values = None
        if using_index_values is not None:
            values = self._index_values(index, using_index_values, layers, dataset_schema)
            segments = {s: segments[s] for s in values if s in segments}
        for files in segments.values():
            for file in files:
                file.path()
        return layers, segments, options, schema, values

    # -- helpers ------------------------------------------------------------------------------

    def _options(self, index: str | None, *, static: bool, **flags: bool) -> ReadOptions:
        return ReadOptions(index if not static else None, self._content_groups or (EVERYTHING,), **flags)

    def _layers(self) -> pa.Table:
        """The store's layer table, only the selected segments."""
        layers = layer_table(self._internal, self._dataset.id)
        if self._segment_ids is None:
            return layers
        wanted = pa.array(sorted(self._segment_ids), pa.string())  # typed: an empty selection too
        return layers.filter(pc.is_in(layers.column("segment_id"), wanted))

    def _index_values(self, index: str | None, values: Any, layers: pa.Table,
                      dataset_schema: pa.Schema) -> dict[str, Any]:
        """``using_index_values`` as ``{segment_id: values}``, in each of Rerun's three forms."""
        if index is None:
            raise ValueError("index must be provided when using_index_values is specified")
        if isinstance(values, Mapping):
            return dict(values)
        if isinstance(values, datafusion.DataFrame):
            names = values.schema().names
            if SEGMENT_ID not in names:
                raise ValueError(f"using_index_values DataFrame must have a {SEGMENT_ID!r} column")
            if index not in names:
                raise ValueError(f"using_index_values DataFrame must have an {index!r} column")
            table = pa.table(values.select(SEGMENT_ID, index))
            ids = table.column(SEGMENT_ID).to_numpy(zero_copy_only=False)
            points, _ = _as_int64(table.column(index))
            order = np.lexsort((points, ids))
            grouped: dict[str, list[int]] = {}
            for segment_id, point in zip(ids[order], points[order], strict=True):
                grouped.setdefault(segment_id, []).append(point)
            return {s: np.array(v, np.int64) for s, v in grouped.items()}
        points = _index_values_array(values, index)
        ranges = _ranges(layers, dataset_schema)
        starts, valid = _as_int64(ranges.column(f"{index}:start"))
        ends, _ = _as_int64(ranges.column(f"{index}:end"))
        covered = {}
        for segment_id, start, end, ok in zip(ranges.column(SEGMENT_ID).to_pylist(), starts, ends, valid,
                                              strict=True):
            inside = points[(points >= start) & (points <= end)] if ok else points[:0]
            if len(inside):
                covered[segment_id] = inside
        return covered


def _ranges(layers: pa.Table, dataset_schema: pa.Schema) -> pa.Table:
    """``rerun_segment_id`` and every index's ``:start`` and ``:end``, per segment of ``layers``
    (layers registered before envelope v4: from their files' manifests)."""
    table = views.index_ranges(with_manifest_ranges(layers)).sort_by(SEGMENT_ID)
    columns = {SEGMENT_ID: table.column(SEGMENT_ID)}
    for name in index_names(dataset_schema):
        kind = dataset_schema.field(name).type
        for marker in ("start", "end"):
            column = f"{name}:{marker}"
            columns[column] = (table.column(column).cast(kind) if column in table.column_names
                               else pa.nulls(table.num_rows, kind))
    return pa.table(columns)


def _known_ranges(layers: pa.Table, index: str, kind: pa.DataType) -> dict[str, tuple[pa.Scalar, pa.Scalar]]:
    """Each segment's first and last value on ``index``, for the segments whose every layer
    reported its ranges; from the store's layers only, no file is read."""
    table = views.index_ranges(layers)
    if f"{index}:start" not in table.column_names:
        return {}
    table = table.filter(pc.and_(table.column("rerun_num_chunks").is_valid(),
                                 table.column(f"{index}:start").is_valid()))
    starts = table.column(f"{index}:start").cast(kind)
    ends = table.column(f"{index}:end").cast(kind)
    return {segment_id: (starts[row], ends[row])
            for row, segment_id in enumerate(table.column(SEGMENT_ID).to_pylist())}


def _as_int64(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Index values as int64 (nanoseconds for times), whatever their Arrow type, and where they
    are not null."""
    values = column.cast(pa.int64())
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    return values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), valid


def _index_values_array(values: Any, index: str) -> np.ndarray:
    from rerun_bindings import _IndexValuesLikeInternal  # Rerun's own normalisation of index values

    try:
        return np.asarray(_IndexValuesLikeInternal(values).to_index_values(), np.int64)
    except TypeError as err:
        raise TypeError("using_index_values must be index values, a dict of segment ID to index "
                        f"values, or a datafusion.DataFrame with 'rerun_segment_id' and '{index}' "
                        f"columns: {err}") from err
