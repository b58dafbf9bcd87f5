"""A dataset's assets through its asset dataset's entry: registering an asset file (then its
scope, ``commands.assets``) and unregistering it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from commands import assets as scopes
from events import AssetMode, AssetScopeEdit, OnDuplicate
from recordings import ObjectStoreSettings
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
    scopes.scope(internal, assets.id, segment_id, AssetScopeEdit.SET, segments or (), mode, timeout_secs)
    return segment_id


def unregister(assets: AssetDataset, segment_id: str, timeout_secs: float | None) -> None:
    """Unregister the asset ``segment_id`` and its scope; one that is not registered is a no-op."""
    assets.unregister(segments_to_drop=[segment_id]).wait(timeout_secs)
