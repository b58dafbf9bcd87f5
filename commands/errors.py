"""The errors a write's outcome raises for every client (``sdk.errors`` lists them with the rest):
an entry name already taken, an edit at a revision that changed since. Rerun's client raises
``AlreadyExistsError`` as its own class, so this one is also rerun-sdk's."""

from __future__ import annotations

from rerun_bindings import AlreadyExistsError as RerunAlreadyExistsError

from events import StrataError
from projector import Outcome, Status
from recordings import NotFoundError


class AlreadyExistsError(StrataError, RerunAlreadyExistsError):
    """Raised when trying to create a resource that already exists."""


class RevisionConflictError(StrataError, RuntimeError):
    """An edit made at a revision (``set_segment_properties(..., expected_revision=...)``) of
    something another edit changed since; nothing was changed. Read it again and edit that.
    A ``RuntimeError``, as Rerun's client raises for a lost revision."""


def outcome_error(outcome: Outcome, what: str) -> Exception | None:
    """The exception a refused outcome raises, naming ``what`` was refused and why; None if it
    was accepted."""
    message = f"{what}: {outcome.reason}"
    match outcome.status:
        case Status.ACCEPTED:
            return None
        case Status.ALREADY_EXISTS:
            return AlreadyExistsError(message)
        case Status.NOT_FOUND:
            return NotFoundError(message)
        case Status.REVISION_CONFLICT:
            return RevisionConflictError(message)
        case _:
            return ValueError(message)
