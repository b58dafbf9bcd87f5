"""A dataset's tables over the protocol: its schema (``GetDatasetSchema``), its segment table
(``GetSegmentTableSchema``, ``ScanSegmentTable``) and its manifest
(``GetDatasetManifestSchema``, ``ScanDatasetManifest``), read from the store's views through the
catalog (``commands.reads``) and written in Rerun's columns: the fixed ones with Rerun's types and
nullability first, then the ``property:`` columns, then (segment table) the index ranges ordered
by name, as Rerun's server orders them."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import Message

from commands import Catalog, reads
from projector import Dataset
from protocol.dataframes import encode, schema_message
from protocol.descriptors import cloud
from protocol.errors import InvalidRequestError
from protocol.ids import entry_id
from protocol.requests import Request, Streaming, Unary

NAMES = pa.list_(pa.field("item", pa.string(), nullable=False))
TIMESTAMP = pa.timestamp("ns")
SEGMENT_TABLE = pa.schema([
    pa.field("rerun_segment_id", pa.string(), nullable=False),
    pa.field("rerun_layer_names", NAMES, nullable=False),
    pa.field("rerun_storage_urls", NAMES, nullable=False),
    pa.field("rerun_last_updated_at", TIMESTAMP, nullable=False),
    pa.field("rerun_num_chunks", pa.uint64(), nullable=False),
    pa.field("rerun_size_bytes", pa.uint64(), nullable=False),
])
"""The segment table's fixed columns, as Rerun's ``ScanSegmentTable`` has them."""
MANIFEST = pa.schema([
    pa.field("rerun_layer_name", pa.string(), nullable=False),
    pa.field("rerun_segment_id", pa.string(), nullable=False),
    pa.field("rerun_storage_url", pa.string(), nullable=False),
    pa.field("rerun_layer_type", pa.string(), nullable=False),
    pa.field("rerun_registration_time", TIMESTAMP, nullable=False),
    pa.field("rerun_last_updated_at", TIMESTAMP, nullable=False),
    pa.field("rerun_num_chunks", pa.uint64()),
    pa.field("rerun_size_bytes", pa.uint64()),
    pa.field("rerun_schema_sha256", pa.binary(32)),
    pa.field("rerun_registration_status", pa.string(), nullable=False),
])
"""The manifest's fixed columns, as Rerun's ``ScanDatasetManifest`` has them."""
CONSTANTS = {"rerun_layer_type": "rrd", "rerun_registration_status": "done"}
"""The manifest's columns of one value in strata: every layer is a recording, registered once
the projection has it."""
ROWS_PER_PART = 16_384
"""Rows per ``DataframePart`` of a scan."""


def _column(table: pa.Table, field: pa.Field) -> pa.ChunkedArray | pa.Array:
    """``table``'s column of ``field``'s name as ``field`` types it; a column it lacks is filled:
    with its one value (``CONSTANTS``), else nulls."""
    if field.name not in table.column_names:
        if field.name in CONSTANTS:
            return pa.array([CONSTANTS[field.name]] * table.num_rows, pa.string())
        return pa.nulls(table.num_rows, field.type)
    column = table.column(field.name)
    if field.name == "rerun_num_chunks" and not field.nullable:
        column = column.fill_null(0)  # a layer whose producer did not count its chunks counts none
    if field.name == "rerun_schema_sha256":  # no digest: null, not 32 bytes
        column = pc.if_else(pc.equal(pc.binary_length(column), 32), column, pa.scalar(None, column.type))
    if pa.types.is_list(field.type):
        return pa.chunked_array([pa.ListArray.from_arrays(chunk.offsets, chunk.values, type=field.type)
                                 for chunk in column.chunks], type=field.type)
    return column.cast(field.type)


def _in_rerun_columns(table: pa.Table, fixed: pa.Schema, *, index_ranges: bool) -> pa.Table:
    """``table`` with ``fixed`` first, then the property columns, then (``index_ranges``) the
    ``<timeline>:start|end`` columns by name; the fixed columns typed as ``fixed`` says."""
    rest = [field for field in table.schema if field.name not in fixed.names]
    properties = [field for field in rest if field.name.startswith("property:")]
    others = [field for field in rest if not field.name.startswith("property:")]
    if index_ranges:
        others.sort(key=lambda field: field.name)
    fields = [*fixed, *properties, *others]
    columns = [_column(table, field) for field in fixed]
    columns += [table.column(field.name) for field in [*properties, *others]]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def segment_table(catalog: Catalog, dataset: Dataset) -> pa.Table:
    """The dataset's segment table in Rerun's columns."""
    return _in_rerun_columns(reads.segment_table(catalog, dataset.id), SEGMENT_TABLE, index_ranges=True)


def manifest(catalog: Catalog, dataset: Dataset) -> pa.Table:
    """The dataset's manifest in Rerun's columns."""
    return _in_rerun_columns(reads.manifest(catalog, dataset.id), MANIFEST, index_ranges=False)


def _meta(dataset: Dataset) -> Message:
    return cloud("DatasetResponseMeta", entry_id=entry_id(dataset.id))


def project(table: pa.Table, columns: list[str]) -> pa.Table:
    """``table`` with only ``columns``, in their order (all of them for none).
    ``InvalidRequestError`` for a column it lacks or one asked for twice."""
    if not columns:
        return table
    seen: set[str] = set()
    for name in columns:
        if name not in table.column_names:
            raise InvalidRequestError(f"projected column {name!r} not found in schema")
        if name in seen:
            raise InvalidRequestError(f"projected column {name!r} was requested twice")
        seen.add(name)
    return table.select(columns)


def _segments_wanted(table: pa.Table, message: Message) -> pa.Table:
    """The rows a ``segment_id_filter`` keeps (a hint Rerun's client applies again itself)."""
    if not message.HasField("segment_id_filter"):
        return table
    hint = message.segment_id_filter
    strategy = hint.WhichOneof("strategy")
    if strategy is None:
        return table
    ids = pa.array(list(getattr(hint, strategy).segment_ids), pa.string())
    kept = pc.is_in(table.column("rerun_segment_id"), value_set=ids)
    return table.filter(kept if strategy == "scan_only" else pc.invert(kept))


def parts(table: pa.Table, response: str, meta: Message) -> Iterator[Message]:
    """``table`` in ``DataframePart``s of at least one batch (an empty table is one empty part),
    the first response carrying ``meta``."""
    batches = table.combine_chunks().to_batches(max_chunksize=ROWS_PER_PART) or [
        pa.RecordBatch.from_pylist([], schema=table.schema)]
    for number, batch in enumerate(batches):
        message = cloud(response, data=encode(batch))
        if number == 0:
            message.meta.CopyFrom(meta)
        yield message


def get_dataset_schema(request: Request) -> Message:
    """The merged schema of the dataset's layers (empty before the first)."""
    dataset = request.dataset()
    schema = reads.arrow_schema(request.catalog, dataset)
    return cloud("GetDatasetSchemaResponse", schema=schema_message(schema), meta=_meta(dataset))


def get_segment_table_schema(request: Request) -> Message:
    dataset = request.dataset()
    return cloud("GetSegmentTableSchemaResponse",
                 schema=schema_message(segment_table(request.catalog, dataset).schema),
                 meta=_meta(dataset))


def scan_segment_table(request: Request) -> Iterator[Message]:
    """The segment table, only the ``columns`` asked for, in their order."""
    dataset = request.dataset()
    table = _segments_wanted(segment_table(request.catalog, dataset), request.message)
    return parts(project(table, list(request.message.columns)), "ScanSegmentTableResponse", _meta(dataset))


def get_dataset_manifest_schema(request: Request) -> Message:
    dataset = request.dataset()
    return cloud("GetDatasetManifestSchemaResponse",
                 schema=schema_message(manifest(request.catalog, dataset).schema),
                 meta=_meta(dataset))


def scan_dataset_manifest(request: Request) -> Iterator[Message]:
    """The manifest, only the ``columns`` asked for; the segment and layer filters applied."""
    dataset = request.dataset()
    table = _segments_wanted(manifest(request.catalog, dataset), request.message)
    if request.message.HasField("layer_name_filter"):
        hint = request.message.layer_name_filter
        strategy = hint.WhichOneof("strategy")
        if strategy is not None:
            kept = pc.is_in(table.column("rerun_layer_name"),
                            value_set=pa.array(list(getattr(hint, strategy).layer_names), pa.string()))
            table = table.filter(kept if strategy == "scan_only" else pc.invert(kept))
    return parts(project(table, list(request.message.columns)), "ScanDatasetManifestResponse",
                  _meta(dataset))


UNARY: dict[str, Unary] = {
    "GetDatasetSchema": get_dataset_schema,
    "GetSegmentTableSchema": get_segment_table_schema,
    "GetDatasetManifestSchema": get_dataset_manifest_schema,
}
"""The datasets' RPCs with one response, by name."""
STREAMING: dict[str, Streaming] = {
    "ScanSegmentTable": scan_segment_table,
    "ScanDatasetManifest": scan_dataset_manifest,
}
"""The datasets' RPCs with a stream of responses, by name."""
