"""A dataset's assets: static recordings (meshes, a URDF, calibration) registered as segments of
the dataset's hidden asset dataset, each with a scope, the segments of the dataset it applies to
(``ScopeAsset`` commands, which the projector applies in log order)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from events import AssetMode, AssetScopeEdit, OnDuplicate, ScopeAsset
from projector import AssetScope
from recordings import LayerFile, ObjectStoreSettings, layer_files
from sdk._connection import Connection
from sdk._operations import Operation, RegistrationOperation


class AssetDataset(Protocol):
    """What a dataset uses of its asset dataset (a ``DatasetEntry``)."""

    @property
    def id(self) -> uuid.UUID: ...

    def register(self, uris: str | Sequence[str], *, on_duplicate: OnDuplicate | str = ...,
                 object_store_config: ObjectStoreSettings = ...) -> RegistrationOperation: ...

    def unregister(self, *, segments_to_drop: str | Sequence[str] = ...,
                   layers_to_drop: str | Sequence[str] = ...) -> Operation: ...

    def segment_ids(self) -> list[str]: ...


def asset_mode(mode: AssetMode | str) -> AssetMode:
    """``mode`` as an ``AssetMode``; ``ValueError`` for another value."""
    try:
        return AssetMode(mode)
    except ValueError:
        raise ValueError(f"mode={mode!r}: an asset's mode is 'opt_out' (every segment but those "
                         "listed) or 'opt_in' (only those listed)") from None


def names(assets: AssetDataset | None) -> list[str]:
    """The segment ids of the registered assets in registration order; none without an asset
    dataset."""
    return [] if assets is None else assets.segment_ids()


def register(internal: Connection, assets: AssetDataset, uri: str, mode: AssetMode,
             segments: str | Sequence[str] | None, object_store_config: ObjectStoreSettings,
             timeout_secs: float | None) -> str:
    """Register the ``.rrd`` at ``uri`` in ``assets``, replacing an asset with its recording id,
    scoped in ``mode`` to ``segments``; its recording id. Raises what the registration raises
    (``ValueError`` for a file with temporal data), ``NotFoundError`` if the asset dataset was
    deleted."""
    registration = assets.register([uri], on_duplicate=OnDuplicate.REPLACE,
                                   object_store_config=object_store_config)
    [segment_id] = registration.wait(timeout_secs).segment_ids
    scope(internal, assets.id, segment_id, AssetScopeEdit.SET, segments or (), mode, timeout_secs)
    return segment_id


def unregister(assets: AssetDataset, segment_id: str, timeout_secs: float | None) -> None:
    """Unregister the asset ``segment_id`` and its scope; one that is not registered is a no-op."""
    assets.unregister(segments_to_drop=[segment_id]).wait(timeout_secs)


def scope(internal: Connection, assets_id: uuid.UUID, asset: str, edit: AssetScopeEdit,
          segments: str | Sequence[str], mode: AssetMode, timeout_secs: float | None) -> None:
    """Edit the scope of ``asset``, a segment of the asset dataset ``assets_id``: set it to
    ``segments`` in ``mode``, or apply it to them or stop applying it to them in its mode, and wait
    until the catalog has the edit. ``NotFoundError`` for an asset that is not registered."""
    named = (segments,) if isinstance(segments, str) else tuple(segments)  # one id, or several
    Operation.submit(internal, assets_id, ScopeAsset(asset, edit, mode, named),
                     f"scoping asset {asset!r}").wait(timeout_secs)


def for_segment(internal: Connection, assets: AssetDataset, segment_id: str) -> list[str]:
    """The assets that apply to ``segment_id``, in registration order."""
    scopes = {s.segment_id: s for s in internal.wait_for_store().asset_scopes(assets.id)}
    return [asset for asset in assets.segment_ids()
            if scopes.get(asset, AssetScope(assets.id, asset)).applies_to(segment_id)]


def files_for_segment(internal: Connection, assets: AssetDataset, segment_id: str) -> list[LayerFile]:
    """The files of the layers of the assets that apply to ``segment_id``, asset by asset in
    registration order."""
    applying = for_segment(internal, assets, segment_id)
    if not applying:
        return []
    layers = internal.wait_for_store().layer_table(assets.id)
    layers = layers.filter(pc.is_in(layers.column("segment_id"), pa.array(applying)))
    by_asset = layer_files(layers, internal.object_store_config)
    return [file for asset in applying for file in by_asset[asset]]
