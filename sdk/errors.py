"""Every error the SDK raises, importable from ``sdk``.

    StrataError
    ├── AlreadyExistsError      an entry (dataset or table) name is taken
    ├── NotFoundError (LookupError, from recordings)
    │                           no dataset or table with that id, or no file at a registered URI
    ├── RecordingChangedError (ValueError, from recordings)
    │                           a registered recording's file changed since its registration
    ├── ProjectionTimeoutError (TimeoutError, from projector)
    │                           the projection did not reach an event's offset in time
    ├── StoreUnavailableError (RuntimeError, from projector)
    │                           the projection store cannot be opened or read: a missing file,
    │                           a PostgreSQL server down or refusing the credentials
    ├── ObjectStoreError (ConnectionError, from recordings)
    │                           an s3:// endpoint cannot be reached or refuses the credentials
    ├── MissingExtraError (ImportError, from events)
    │                           a part used without its optional dependencies; names the
    │                           extra to install (pip install 'strata[postgres]', ...)
    ├── EndpointUnavailableError (ConnectionError)
    │                           no strata endpoint answers at a rerun+http:// URL
    ├── EndpointRefusedError (PermissionError)
    │                           the endpoint needs a token, and the client has none or it
    │                           is refused (expired, signed with another secret)
    ├── DeliveryError (ConnectionError, from producers)
    │                           Kafka did not acknowledge an event in time
    ├── RevisionConflictError (RuntimeError)
    │                           an edit at a revision of what changed since (an asset's
    │                           scope, as Rerun's segment properties): read it again
    ├── WriteRefusedError (ValueError)
    │                           writes the catalog refused after they returned (a table
    │                           deleted meanwhile): raised by the client's next read or flush()
    └── WorkerError (RuntimeError, from recordings)
                                a worker process of the client died while reading a segment
                                or a file, twice (it is replaced; the call names what it read)

Bad arguments, failed registrations and rows that do not fit a table raise the builtin
``ValueError``; an unknown dataset or table name raises the builtin ``LookupError``, as in
rerun-sdk. ``AlreadyExistsError`` and ``NotFoundError`` are also rerun-sdk's own
(``rerun.catalog.AlreadyExistsError``, ``rerun.catalog.NotFoundError``), so code written for
Rerun catches them as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from commands.errors import AlreadyExistsError, RevisionConflictError
from events import MissingExtraError, StrataError
from producers import DeliveryError
from projector import ProjectionTimeoutError, StoreUnavailableError
from recordings import NotFoundError, ObjectStoreError, RecordingChangedError, WorkerError

if TYPE_CHECKING:
    from sdk._writes import WriteOutcome


class EndpointUnavailableError(StrataError, ConnectionError):
    """Nothing answers at the ``rerun+http://`` URL a ``CatalogClient`` was given: no endpoint of
    Rerun's catalog protocol runs there, or it cannot be reached."""


class EndpointRefusedError(StrataError, PermissionError):
    """The endpoint at the ``rerun+http://`` URL a ``CatalogClient`` was given needs a token, and
    the client has none (``token=``, ``REDAP_TOKEN``) or the endpoint refuses it; the message
    says why."""


class WriteRefusedError(StrataError, ValueError):
    """Writes of this client that Kafka acknowledged and the catalog then refused (a table or
    dataset deleted meanwhile, rows the table no longer takes), raised by the client's next read
    or ``flush()``: ``refused`` lists each write with its reason, ``outcomes`` every write the
    read or flush settled, accepted ones too. The accepted writes are applied."""

    def __init__(self, refused: Sequence[WriteOutcome], outcomes: Sequence[WriteOutcome]) -> None:
        lines = "\n".join(f"- {outcome}" for outcome in refused)
        count = f"{len(refused)} write{'s' * (len(refused) != 1)}"
        super().__init__(f"the catalog refused {count} of this client, after Kafka had "
                         f"acknowledged {'them' if len(refused) != 1 else 'it'}:\n{lines}")
        self.refused = list(refused)
        self.outcomes = list(outcomes)


__all__ = [
    "AlreadyExistsError",
    "DeliveryError",
    "EndpointRefusedError",
    "EndpointUnavailableError",
    "MissingExtraError",
    "NotFoundError",
    "ObjectStoreError",
    "ProjectionTimeoutError",
    "RecordingChangedError",
    "RevisionConflictError",
    "StoreUnavailableError",
    "StrataError",
    "WorkerError",
    "WriteRefusedError",
]
