"""The SDK's shape of the catalog's reads of a dataset (``commands.reads``): an overview
(``DatasetInfo``) and the segment table as a DataFrame, joined with the caller's. The recordings'
data is ``DatasetSelection``'s."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass

import datafusion

from commands import reads
from projector import Dataset
from sdk._connection import Connection


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


def info(internal: Connection, dataset: Dataset) -> DatasetInfo:
    """Segments, bytes, segments per layer, property columns and schema width of ``dataset``."""
    layers = reads.layer_table(internal, dataset.id)
    table = reads.segment_table(internal, dataset.id)
    return DatasetInfo(
        dataset_name=dataset.name,
        num_segments=table.num_rows,
        size_bytes=sum(layers.column("size_bytes").to_pylist()),
        layers=frozenset(LayerInfo(name, count) for name, count in
                         Counter(layers.column("layer_name").to_pylist()).items()),
        property_columns=frozenset(n for n in table.column_names if n.startswith("property:")),
        num_component_columns=len(reads.arrow_schema(internal, dataset)),
    )


def segment_table(internal: Connection, dataset_id: uuid.UUID, join_meta: datafusion.DataFrame | None,
                  join_key: str) -> datafusion.DataFrame:
    """The dataset's segment table (``commands.reads.segment_table``), with ``join_meta``
    left-joined on ``join_key``. ``ValueError`` if either side lacks ``join_key``."""
    table = internal.dataframe(reads.segment_table(internal, dataset_id))
    if join_meta is None:
        return table
    if join_key not in table.schema().names:
        raise ValueError(f"Dataset segment table must contain join_key column '{join_key}'.")
    if join_key not in join_meta.schema().names:
        raise ValueError(f"join_meta must contain join_key column '{join_key}'.")
    renamed = f"{join_key}_meta"
    return table.join(join_meta.with_column_renamed(join_key, renamed), left_on=join_key,
                      right_on=renamed, how="left").drop(renamed)
