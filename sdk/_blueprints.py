"""An entry's blueprints: ``.rbl`` files registered as segments of the entry's hidden blueprint
dataset (one segment per blueprint, named by the blueprint's id), and the entry's default
blueprints (of its recordings, and for a dataset of its segment table), set by a
``SetDefaultBlueprint`` command in the log."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Protocol

from commands import entries
from events import OnDuplicate
from recordings import ObjectStoreSettings
from sdk._connection import Connection
from sdk._operations import Operation, RegistrationOperation


class BlueprintDataset(Protocol):
    """What an entry uses of its blueprint dataset (a ``DatasetEntry``)."""

    def register(self, uris: str | Sequence[str], *, on_duplicate: OnDuplicate | str = ...,
                 object_store_config: ObjectStoreSettings = ...) -> RegistrationOperation: ...

    def segment_ids(self) -> list[str]: ...


def register(internal: Connection, owner_id: uuid.UUID, owner_name: str, blueprints: BlueprintDataset | None,
             uri: str, *, make_default: bool, segment_table: bool,
             object_store_config: ObjectStoreSettings, timeout_secs: float | None) -> str:
    """Register the ``.rbl`` at ``uri`` in ``blueprints``, the blueprint dataset of the entry
    ``owner_id`` (named ``owner_name``), replacing a blueprint with its id, and with
    ``make_default`` make it the default (see ``set_default``); its id. ``LookupError`` for an
    entry without a blueprint dataset (``blueprints`` None), what the registration raises
    (``ValueError`` for a file that holds no blueprint)."""
    if blueprints is None:
        raise LookupError(f"a blueprint dataset is not configured for {owner_name!r}: "
                          "hidden datasets and the system table have none")
    registration = blueprints.register([uri], on_duplicate=OnDuplicate.REPLACE,
                                       object_store_config=object_store_config)
    [blueprint_id] = registration.wait(timeout_secs).segment_ids
    if make_default:
        set_default(internal, owner_id, blueprint_id, segment_table, timeout_secs)
    return blueprint_id


def names(blueprints: BlueprintDataset | None) -> list[str]:
    """The registered blueprints' names in registration order; none without a blueprint dataset."""
    return [] if blueprints is None else blueprints.segment_ids()


def set_default(internal: Connection, owner_id: uuid.UUID, blueprint_name: str | None, segment_table: bool,
                timeout_secs: float | None) -> None:
    """Make ``blueprint_name`` the default blueprint (None: no default) of the entry ``owner_id``'s
    recordings, or with ``segment_table`` of its segment table. Raises the command's refusal
    (``NotFoundError`` if the blueprint dataset was deleted), ``ProjectionTimeoutError`` if it is
    not applied in time."""
    Operation.send(internal, owner_id, entries.set_default_blueprint(blueprint_name, segment_table)).wait(
        timeout_secs)
