"""A dataset's assets, for every client: static recordings (meshes, a URDF, calibration)
registered as segments of the dataset's hidden asset dataset, each with a scope, the segments of
the dataset it applies to (``ScopeAsset`` commands, which the projector applies in log order).
Rerun's client keeps a scope as the asset's segment properties, the ``asset`` property
(``property:asset:mode`` and ``property:asset:segments``), edited at a revision: the same scope,
read and written in that form here."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from commands.catalog import Catalog
from commands.errors import RevisionConflictError
from commands.log import Write
from events import AssetMode, AssetScopeEdit, ScopeAsset
from projector import AssetScope, Dataset, DatasetKind
from recordings import LayerFile, layer_files

MODE_COLUMN = "property:asset:mode"
SEGMENTS_COLUMN = "property:asset:segments"
"""The columns of the ``asset`` property, as Rerun's client reads and writes an asset's scope."""
RERUN_MODES = {AssetMode.OPT_OUT: "OptOut", AssetMode.OPT_IN: "OptIn"}
"""The mode as that property spells it."""


def asset_mode(mode: AssetMode | str) -> AssetMode:
    """``mode`` as an ``AssetMode``; ``ValueError`` for another value."""
    try:
        return AssetMode(mode)
    except ValueError:
        raise ValueError(f"mode={mode!r}: an asset's mode is 'opt_out' (every segment but those "
                         "listed) or 'opt_in' (only those listed)") from None


def scope(catalog: Catalog, assets_id: uuid.UUID, asset: str, edit: AssetScopeEdit,
          segments: str | Sequence[str], mode: AssetMode, timeout_secs: float | None) -> None:
    """Edit the scope of ``asset``, a segment of the asset dataset ``assets_id``: set it to
    ``segments`` in ``mode``, or apply it to them or stop applying it to them in its mode, and wait
    until the catalog has the edit. ``NotFoundError`` for an asset that is not registered."""
    named = (segments,) if isinstance(segments, str) else tuple(segments)  # one id, or several
    catalog.command(assets_id, Write(f"scoping asset {asset!r}", (ScopeAsset(asset, edit, mode, named),)),
                    timeout_secs)


def properties(catalog: Catalog, assets_id: uuid.UUID, asset: str, *,
               offset: int | None = None) -> tuple[pa.RecordBatch, int] | None:
    """The ``asset`` property of ``asset`` (one row: its mode and segments) and its revision;
    None if it has no scope. With ``offset``, as of the log before it."""
    store = catalog.wait_for_store()
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


def _edit_at(catalog: Catalog, assets_id: uuid.UUID, asset: str, command: ScopeAsset,
             timeout_secs: float | None) -> int:
    """Send ``command``, an edit of ``asset``'s scope at its ``expected_revision``, wait for it,
    and return the scope's revision after it (0: it has none). ``RevisionConflictError`` if the
    scope changed since that revision, ``NotFoundError`` for an asset that is not registered."""
    submitted = catalog.command(assets_id, Write(f"editing the scope of asset {asset!r}", (command,)),
                                timeout_secs)
    after = submitted.positions[0].offset + 1  # the scope as this edit left it, not a later edit's
    found = properties(catalog, assets_id, asset, offset=after)
    return 0 if found is None else found[1]


def get_segment_properties(catalog: Catalog, dataset: Dataset, segment_id: str
                           ) -> tuple[pa.RecordBatch, int] | None:
    """The properties of segment ``segment_id`` of ``dataset`` kept beside its layers, and their
    revision; None if it has none. strata keeps one such property, the scope of an asset of an
    asset dataset."""
    if dataset.kind is not DatasetKind.ASSET:
        return None
    return properties(catalog, dataset.id, segment_id)


def set_segment_properties(catalog: Catalog, dataset: Dataset, segment_id: str,
                           batch: pa.RecordBatch | pa.Table, expected_revision: int | None,
                           timeout_secs: float | None) -> int:
    """Replace the properties of ``segment_id`` (an asset of the asset dataset ``dataset``) with
    ``batch``, the ``asset`` property, and return their new revision; with ``expected_revision``
    (0: it has none), only if they are still at that revision (``RevisionConflictError`` if not).
    ``ValueError`` for another property or a dataset that is not an asset dataset,
    ``NotFoundError`` for an asset that is not registered."""
    if dataset.kind is not DatasetKind.ASSET:
        raise ValueError(f"{dataset.name!r} is not an asset dataset: strata keeps segment properties "
                         "only for assets, their scope (register_asset, add_segments_to_asset)")
    mode, segments = scope_of(batch)
    command = ScopeAsset(segment_id, AssetScopeEdit.SET, mode, segments, expected_revision)
    return _edit_at(catalog, dataset.id, segment_id, command, timeout_secs)


def delete_segment_properties(catalog: Catalog, dataset: Dataset, segment_ids: str | Sequence[str],
                              expected_revisions: Mapping[str, int] | None,
                              timeout_secs: float | None) -> None:
    """Delete the properties of ``segment_ids`` of ``dataset``: an asset's scope, which then
    applies to every segment. Deleting properties a segment does not have is a no-op, as in
    Rerun. A segment in ``expected_revisions`` loses them only if they are still at that revision
    (``RevisionConflictError`` if not; the segments before it lost theirs)."""
    expected = dict(expected_revisions or {})
    for segment_id in [segment_ids] if isinstance(segment_ids, str) else list(segment_ids):
        revision = expected.get(segment_id)
        if revision is None and get_segment_properties(catalog, dataset, segment_id) is None:
            continue
        if dataset.kind is not DatasetKind.ASSET:  # no properties: any revision but 0 is stale
            if revision:
                raise RevisionConflictError(f"segment {segment_id!r} has no properties: expected "
                                            f"revision {revision}, found 0")
            continue
        command = ScopeAsset(segment_id, AssetScopeEdit.CLEAR, expected_revision=revision)
        _edit_at(catalog, dataset.id, segment_id, command, timeout_secs)


def for_segment(catalog: Catalog, assets_id: uuid.UUID, segment_id: str) -> list[str]:
    """The assets of the asset dataset ``assets_id`` that apply to ``segment_id``, in
    registration order."""
    store = catalog.wait_for_store()
    scopes = {s.segment_id: s for s in store.asset_scopes(assets_id)}
    return [s.segment_id for s in store.segments(assets_id)
            if scopes.get(s.segment_id, AssetScope(assets_id, s.segment_id)).applies_to(segment_id)]


def files_for_segment(catalog: Catalog, assets_id: uuid.UUID, segment_id: str) -> list[LayerFile]:
    """The files of the layers of the assets that apply to ``segment_id``, asset by asset in
    registration order."""
    applying = for_segment(catalog, assets_id, segment_id)
    if not applying:
        return []
    layers = catalog.wait_for_store().layer_table(assets_id)
    layers = layers.filter(pc.is_in(layers.column("segment_id"), pa.array(applying)))
    by_asset = layer_files(layers, catalog.object_store_config)
    return [file for asset in applying for file in by_asset[asset]]
