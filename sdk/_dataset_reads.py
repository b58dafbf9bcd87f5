"""The catalog's reads of a dataset, from the projection once it has this client's writes: its
Arrow schema (with the schemas of layers registered without one, ``sdk._file_schemas``), its
segment ids, an overview (``DatasetInfo``), the segment table, the manifest, and the files of a
segment's layers. The recordings' data is ``DatasetSelection``'s."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

import datafusion
import pyarrow as pa
import pyarrow.compute as pc

from projector import Dataset, views
from recordings import LayerFile, NotFoundError, layer_files
from sdk._connection import Connection
from sdk._file_schemas import with_file_schemas


@dataclass(frozen=True)
class LayerInfo:
    name: str
    num_segments: int
    """Number of segments that have this layer."""


@dataclass(frozen=True)
class DatasetInfo:
    """An overview of a dataset, as ``DatasetEntry.info()`` returns it."""

    dataset_name: str
    num_segments: int
    size_bytes: int
    layers: frozenset[LayerInfo]
    property_columns: frozenset[str]
    num_component_columns: int
    """Columns of the dataset schema."""

    def __repr__(self) -> str:
        lines = [f"DatasetInfo({self.dataset_name}: {self.num_segments} segments, "
                 f"{self.size_bytes} bytes)",
                 f"  contents: {self.num_component_columns} columns",
                 f"  properties: {', '.join(sorted(self.property_columns)) or '(none)'}"]
        lines += [f"    {x.name}: in {x.num_segments} segments"
                  for x in sorted(self.layers, key=lambda x: x.name)]
        return "\n".join(lines)


def layer_table(internal: Connection, dataset_id: uuid.UUID) -> pa.Table:
    """One row per (segment, layer) of the dataset, as the projection has it: read once per
    commit of the projector."""
    return internal.kept(("layers", dataset_id), lambda: internal.wait_for_store().layer_table(dataset_id))


def arrow_schema(internal: Connection, dataset: Dataset) -> pa.Schema:
    """The merged Arrow schema of the layers of ``dataset`` (a record read once the projection has
    this client's writes), those registered without one read from their files; empty before the
    first layer. ``ValueError`` naming a layer whose file's schema conflicts."""
    schema = dataset.schema
    if dataset.schemaless_layers:
        schema = with_file_schemas(schema, layer_table(internal, dataset.id), internal.objects(),
                                   internal.workers)
    return pa.ipc.read_schema(pa.py_buffer(schema)) if schema else pa.schema([])


def segment_ids(internal: Connection, dataset_id: uuid.UUID) -> list[str]:
    """The dataset's segment ids, in registration order."""
    return [s.segment_id for s in internal.wait_for_store().segments(dataset_id)]


def info(internal: Connection, dataset: Dataset) -> DatasetInfo:
    """Segments, bytes, segments per layer, property columns and schema width of ``dataset``."""
    layers = layer_table(internal, dataset.id)
    table = views.segment_table(layers, _property_schemas(internal, layers))
    return DatasetInfo(
        dataset_name=dataset.name,
        num_segments=table.num_rows,
        size_bytes=sum(layers.column("size_bytes").to_pylist()),
        layers=frozenset(LayerInfo(name, count) for name, count in
                         Counter(layers.column("layer_name").to_pylist()).items()),
        property_columns=frozenset(n for n in table.column_names if n.startswith("property:")),
        num_component_columns=len(arrow_schema(internal, dataset)),
    )


def segment_table(internal: Connection, dataset_id: uuid.UUID, join_meta: datafusion.DataFrame | None,
                  join_key: str) -> datafusion.DataFrame:
    """The dataset's segment table (``views.segment_table``, made once per commit of the
    projector), with ``join_meta`` left-joined on ``join_key``. ``ValueError`` if either side
    lacks ``join_key``."""
    def read() -> pa.Table:
        layers = layer_table(internal, dataset_id)
        return views.segment_table(layers, _property_schemas(internal, layers))

    table = internal.dataframe(internal.kept(("segment_table", dataset_id), read))
    if join_meta is None:
        return table
    if join_key not in table.schema().names:
        raise ValueError(f"Dataset segment table must contain join_key column '{join_key}'.")
    if join_key not in join_meta.schema().names:
        raise ValueError(f"join_meta must contain join_key column '{join_key}'.")
    renamed = f"{join_key}_meta"
    return table.join(join_meta.with_column_renamed(join_key, renamed), left_on=join_key,
                      right_on=renamed, how="left").drop(renamed)


def manifest(internal: Connection, dataset_id: uuid.UUID) -> datafusion.DataFrame:
    """The dataset's manifest, one row per (segment, layer) (``views.manifest_table``), made
    once per commit of the projector."""
    table = internal.kept(("manifest", dataset_id),
                          lambda: _manifest_table(internal, layer_table(internal, dataset_id)))
    return internal.dataframe(table)


def manifest_of(internal: Connection, layers: pa.Table) -> datafusion.DataFrame:
    """The manifest of ``layers`` (rows of a dataset's layer table): their properties only are
    read."""
    return internal.dataframe(_manifest_table(internal, layers))


def _manifest_table(internal: Connection, layers: pa.Table) -> pa.Table:
    return views.manifest_table(layers, _property_schemas(internal, layers))


def segment_files(internal: Connection, dataset_id: uuid.UUID, dataset_name: str,
                  segment_id: str) -> list[LayerFile]:
    """The files of the segment's layers, in registration order. ``NotFoundError`` naming the
    segment if the dataset (named ``dataset_name``) has none of that id."""
    layers = layer_table(internal, dataset_id)
    layers = layers.filter(pc.equal(layers.column("segment_id"), segment_id))
    if not layers.num_rows:
        raise NotFoundError(f"Segment {segment_id!r} not found in dataset {dataset_name!r}")
    return layer_files(layers, internal.object_store_config)[segment_id]


def _property_schemas(internal: Connection, layers: pa.Table) -> dict[str, bytes]:
    """The schemas the layers' properties name, by digest."""
    return views.property_schemas(internal.wait_for_store(), layers)
