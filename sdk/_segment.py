"""Handles of one segment and of one layer name of a dataset, as rerun-sdk's ``Segment`` and
``Layer`` (``DatasetEntry.segment()``, ``DatasetEntry.layer()``): an id or a name and the dataset,
every read asked of the projection when it is called (nothing is kept)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow.compute as pc

from commands import reads
from sdk._connection import Connection
from sdk._operations import Operation
from sdk.errors import NotFoundError

if TYPE_CHECKING:
    from rerun.catalog import Schema


class HandledDataset(Protocol):
    """What a segment's or a layer's handle asks of its dataset (a ``DatasetEntry``)."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def name(self) -> str: ...

    def segment_ids(self) -> list[str]: ...

    def segment_store(self, segment_id: str, *, include_assets: bool = True) -> Any: ...

    def unregister(self, *, segments_to_drop: str | Sequence[str] = (),
                   layers_to_drop: str | Sequence[str] = ()) -> Operation: ...


class Segment:
    """One segment of a dataset. ``NotFoundError`` from its reads once it has no layer left."""

    __slots__ = ("_dataset", "_id", "_internal")

    def __init__(self, internal: Connection, dataset: HandledDataset, segment_id: str) -> None:
        self._internal = internal
        self._dataset = dataset
        self._id = segment_id

    def __repr__(self) -> str:
        return f'Segment(dataset_id={self._dataset.id.hex}, id="{self._id}")'

    @property
    def id(self) -> str:
        """The segment's id within its dataset."""
        return self._id

    @property
    def dataset(self) -> HandledDataset:
        """The dataset this handle was made from."""
        return self._dataset

    def schema(self, *, include_assets: bool = False) -> Schema:
        """The schema of the segment's layers now (with ``include_assets``, and of the assets that
        apply to it), as rerun-sdk's ``Schema``: the one ``segment_store()`` serves. Raises
        ``NotFoundError`` if the segment has no layer."""
        store: Any = self._dataset.segment_store(self._id, include_assets=include_assets)
        schema: Schema = store.schema()
        return schema

    def layers(self) -> set[str]:
        """The names of the segment's layers now. Raises ``NotFoundError`` if it has none."""
        layers = reads.layer_table(self._internal, self._dataset.id)
        mine = layers.filter(pc.equal(layers.column("segment_id"), self._id))
        names = set(mine.column("layer_name").to_pylist())
        if not names:
            raise NotFoundError(f"Segment {self._id!r} not found in dataset {self._dataset.name!r}")
        return names

    def delete_layer(self, name: str) -> Operation:
        """Unregister the segment's layer ``name`` (a command through the log); ``wait()`` on the
        operation waits for it. A layer or segment that is not there is a no-op."""
        return self._dataset.unregister(segments_to_drop=[self._id], layers_to_drop=[name])


class Layer:
    """One layer name of a dataset, across its segments."""

    __slots__ = ("_dataset", "_internal", "_name")

    def __init__(self, internal: Connection, dataset: HandledDataset, name: str) -> None:
        self._internal = internal
        self._dataset = dataset
        self._name = name

    def __repr__(self) -> str:
        return f'Layer(dataset_id={self._dataset.id.hex}, name="{self._name}")'

    @property
    def name(self) -> str:
        """The layer's name within its dataset."""
        return self._name

    @property
    def dataset(self) -> HandledDataset:
        """The dataset this handle was made from."""
        return self._dataset

    def segment_ids(self) -> list[str]:
        """The ids of the segments that have this layer now, in the order they were registered;
        empty if none has."""
        layers = reads.layer_table(self._internal, self._dataset.id)
        having = set(layers.filter(pc.equal(layers.column("layer_name"), self._name))
                     .column("segment_id").to_pylist())
        return [segment_id for segment_id in self._dataset.segment_ids() if segment_id in having]
