"""The catalog's reads of a dataset, for every client, from the projection once it has the
catalog's writes: its Arrow schema (with the schemas of layers registered without one,
``commands.file_schemas``), its segment ids, layer table, segment table and manifest (as the
projector's views make them, once per commit of the projector), and the files of a segment's
layers. ``sdk`` gives them as DataFrames; the protocol in Rerun's columns."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.compute as pc

from commands.catalog import Catalog
from commands.file_schemas import with_file_schemas
from projector import Dataset, Table, views
from recordings import LayerFile, NotFoundError, layer_files


def layer_table(catalog: Catalog, dataset_id: uuid.UUID) -> pa.Table:
    """One row per (segment, layer) of the dataset, as the projection has it: read once per
    commit of the projector."""
    return catalog.kept(("layers", dataset_id), lambda: catalog.wait_for_store().layer_table(dataset_id))


def arrow_schema(catalog: Catalog, dataset: Dataset) -> pa.Schema:
    """The merged Arrow schema of the layers of ``dataset`` (a record read once the projection has
    the catalog's writes), those registered without one read from their files; empty before the
    first layer. ``ValueError`` naming a layer whose file's schema conflicts."""
    schema = dataset.schema
    if dataset.schemaless_layers:
        schema = with_file_schemas(schema, layer_table(catalog, dataset.id), catalog.objects(),
                                   catalog.workers)
    return pa.ipc.read_schema(pa.py_buffer(schema)) if schema else pa.schema([])


def segment_ids(catalog: Catalog, dataset_id: uuid.UUID) -> list[str]:
    """The dataset's segment ids, in registration order."""
    return [s.segment_id for s in catalog.wait_for_store().segments(dataset_id)]


def segment_table(catalog: Catalog, dataset_id: uuid.UUID) -> pa.Table:
    """The dataset's segment table (``views.segment_table``), made once per commit of the
    projector."""
    def read() -> pa.Table:
        layers = layer_table(catalog, dataset_id)
        return views.segment_table(layers, property_schemas(catalog, layers))

    return catalog.kept(("segment_table", dataset_id), read)


def manifest(catalog: Catalog, dataset_id: uuid.UUID) -> pa.Table:
    """The dataset's manifest, one row per (segment, layer) (``views.manifest_table``), made
    once per commit of the projector."""
    return catalog.kept(("manifest", dataset_id),
                        lambda: manifest_of(catalog, layer_table(catalog, dataset_id)))


def manifest_of(catalog: Catalog, layers: pa.Table) -> pa.Table:
    """The manifest of ``layers`` (rows of a dataset's layer table): their properties only are
    read."""
    return views.manifest_table(layers, property_schemas(catalog, layers))


def segment_files(catalog: Catalog, dataset_id: uuid.UUID, dataset_name: str,
                  segment_id: str) -> list[LayerFile]:
    """The files of the segment's layers, in registration order. ``NotFoundError`` naming the
    segment if the dataset (named ``dataset_name``) has none of that id."""
    layers = layer_table(catalog, dataset_id)
    layers = layers.filter(pc.equal(layers.column("segment_id"), segment_id))
    if not layers.num_rows:
        raise NotFoundError(f"Segment {segment_id!r} not found in dataset {dataset_name!r}")
    return layer_files(layers, catalog.object_store_config)[segment_id]


def property_schemas(catalog: Catalog, layers: pa.Table) -> dict[str, bytes]:
    """The schemas the layers' properties name, by digest."""
    return views.property_schemas(catalog.wait_for_store(), layers)


def table_url(table: Table) -> str:
    """A table's URL: a registered table's Lance URL; a created table's ``url``, where the
    projector keeps a Lance copy of its rows, or without one ``strata://tables/<id>`` (the rows
    themselves are in strata's log and projection); none for the system table."""
    if table.system:
        return ""
    return table.storage_url or f"strata://tables/{table.id}"
