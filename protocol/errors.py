"""The protocol room's own errors, under strata's one root, and the gRPC status each error of
strata's answers with, as Rerun's client maps statuses to its exceptions.

    StrataError
    ├── InvalidRequestError (ValueError)
    │                           a request the protocol cannot take: a malformed DataframePart, a
    │                           missing entry id, a field strata does not support
    ├── UnauthenticatedError (PermissionError)
    │                           a call without a valid token to an endpoint that needs one
    └── ReadOnlyTokenError (PermissionError)
                                a call that writes, with a token that may only read
"""

from __future__ import annotations

import grpc
from rerun_bindings import AlreadyExistsError, NotFoundError

from commands import RevisionConflictError
from events import StrataError
from projector import ProjectionTimeoutError, StoreUnavailableError


class InvalidRequestError(StrataError, ValueError):
    """A request the protocol cannot take (``INVALID_ARGUMENT``); the message says what was wrong."""


class UnauthenticatedError(StrataError, PermissionError):
    """A call without a valid token, to an endpoint that needs one (``UNAUTHENTICATED``); the
    message says what was wrong with the token."""


class ReadOnlyTokenError(StrataError, PermissionError):
    """A call that writes, with a token that may only read (``PERMISSION_DENIED``)."""


def status_of(error: BaseException) -> grpc.StatusCode:
    """The gRPC status code ``error`` answers a call with. Rerun's client turns ``NOT_FOUND`` into
    its ``NotFoundError``, ``ALREADY_EXISTS`` into ``AlreadyExistsError`` and
    ``INVALID_ARGUMENT`` into ``ValueError``, so strata's errors reach it as the same classes
    the SDK raises.

    >>> status_of(LookupError("no dataset 'x'"))
    <StatusCode.NOT_FOUND: (5, 'not found')>
    """
    match error:
        case AlreadyExistsError():
            return grpc.StatusCode.ALREADY_EXISTS
        case NotFoundError() | LookupError():  # an unknown id, or an unknown name
            return grpc.StatusCode.NOT_FOUND
        case UnauthenticatedError():
            return grpc.StatusCode.UNAUTHENTICATED
        case RevisionConflictError():
            return grpc.StatusCode.FAILED_PRECONDITION
        case ProjectionTimeoutError():
            return grpc.StatusCode.DEADLINE_EXCEEDED
        case StoreUnavailableError() | ConnectionError():
            return grpc.StatusCode.UNAVAILABLE
        case PermissionError():
            return grpc.StatusCode.PERMISSION_DENIED
        case ValueError() | TypeError():
            return grpc.StatusCode.INVALID_ARGUMENT
        case NotImplementedError():
            return grpc.StatusCode.UNIMPLEMENTED
        case _:
            return grpc.StatusCode.INTERNAL
