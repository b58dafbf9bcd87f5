"""A dataset's assets: static recordings (meshes, a URDF, calibration) registered as segments of
the dataset's hidden asset dataset, each with a scope, the segments of the dataset it applies to
(``ScopeAsset`` commands, which the projector applies in log order). Rerun's client keeps a scope
as the asset's segment properties, the ``asset`` property (``property:asset:mode`` and
``property:asset:segments``), edited at a revision: the same scope, read and written in that
form here."""

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

MODE_COLUMN = "property:asset:mode"
SEGMENTS_COLUMN = "property:asset:segments"
"""The columns of the ``asset`` property, as Rerun's client reads and writes an asset's scope."""
RERUN_MODES = {AssetMode.OPT_OUT: "OptOut", AssetMode.OPT_IN: "OptIn"}
"""The mode as that property spells it."""


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


def properties(internal: Connection, assets_id: uuid.UUID, asset: str, *,
               offset: int | None = None) -> tuple[pa.RecordBatch, int] | None:
    """The ``asset`` property of ``asset`` (one row: its mode and segments) and its revision;
    None if it has no scope. With ``offset``, as of the log before it."""
    store = internal.wait_for_store()
    read = store if offset is None else store.at(offset)
    scopes = {s.segment_id: s for s in read.asset_scopes(assets_id)}
    found = scopes.get(asset)
    if found is None:
        return None
    strings = pa.list_(pa.utf8())
    batch = pa.RecordBatch.from_arrays(
        [pa.array([[RERUN_MODES[found.mode]]], strings), pa.array([list(found.segments)], strings)],
        names=[MODE_COLUMN, SEGMENTS_COLUMN])
    return batch, found.revision


def scope_of(batch: pa.RecordBatch | pa.Table) -> tuple[AssetMode, tuple[str, ...]]:
    """The mode and segments an ``asset`` property says. ``ValueError`` for another property, or
    not one row of lists of strings."""
    other = sorted(set(batch.schema.names) - {MODE_COLUMN, SEGMENTS_COLUMN})
    if other or batch.num_rows != 1:
        raise ValueError(
            f"strata keeps one segment property, the scope of an asset ({MODE_COLUMN}, {SEGMENTS_COLUMN}), "
            f"in one row: got {batch.num_rows} rows" + (f" and {', '.join(other)}" if other else ""))
    row = batch.to_pylist()[0]
    modes, segments = row.get(MODE_COLUMN) or [], row.get(SEGMENTS_COLUMN) or []
    if not all(isinstance(v, str) for v in [*modes, *segments]) or len(modes) > 1:
        raise ValueError(f"{MODE_COLUMN} is one string and {SEGMENTS_COLUMN} a list of strings")
    named = {spelled: mode for mode, spelled in RERUN_MODES.items()} | {str(m): m for m in AssetMode}
    if modes and modes[0] not in named:
        raise ValueError(f"{MODE_COLUMN} is {modes[0]!r}: an asset's mode is OptOut or OptIn")
    return (named[modes[0]] if modes else AssetMode.OPT_OUT), tuple(segments)


def edit_at(internal: Connection, assets_id: uuid.UUID, asset: str, command: ScopeAsset,
            timeout_secs: float | None) -> int:
    """Send ``command``, an edit of ``asset``'s scope at its ``expected_revision``, wait for it,
    and return the scope's revision after it (0: it has none). ``RevisionConflictError`` if the
    scope changed since that revision, ``NotFoundError`` for an asset that is not registered."""
    operation = Operation.submit(internal, assets_id, command, f"editing the scope of asset {asset!r}")
    operation.wait(timeout_secs)
    found = properties(internal, assets_id, asset, offset=operation.position.offset + 1)  # not a later edit's
    return 0 if found is None else found[1]


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
