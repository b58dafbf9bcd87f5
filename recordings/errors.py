"""The errors of reading recordings, raised wherever a recording is read (the SDK re-exports
them from ``sdk.errors``, whose docstring draws the whole hierarchy).

    StrataError
    ├── NotFoundError (LookupError, rerun's NotFoundError)
    │                           no file or object at a URI, or a bucket that does not exist
    ├── ObjectStoreError (ConnectionError)
    │                           an s3:// endpoint cannot be reached or refuses the credentials
    ├── RecordingChangedError (ValueError)
    │                           a registered recording's file changed since its registration
    ├── WorkerError (RuntimeError)
    │                           a worker process died while reading, twice
    └── DescriptorsUnavailableError (RuntimeError)
                                the installed rerun-sdk carries no definitions strata can read
                                (another version than the pinned one, or a broken install)

``NotFoundError`` is also rerun-sdk's own (``rerun.catalog.NotFoundError``), so code written for
Rerun catches it as it is.
"""

from __future__ import annotations

from rerun_bindings import NotFoundError as RerunNotFoundError

from events import StrataError


class NotFoundError(StrataError, LookupError, RerunNotFoundError):
    """Raised when the requested resource is not found."""


class ObjectStoreError(StrataError, ConnectionError):
    """An object store could not be reached, or refused the request (credentials, permissions)."""


class RecordingChangedError(StrataError, ValueError):
    """A registered recording no longer has the size it was registered with: layers are immutable,
    so its rows would not be the ones the catalog describes."""


class WorkerError(StrataError, RuntimeError):
    """A worker process of the client died while reading a segment or a registration file, on
    the retry too. The message names what it was reading and the worker's exit; the client
    starts a new worker for its next call."""


class DescriptorsUnavailableError(StrataError, RuntimeError):
    """The installed rerun-sdk's definitions (its protocol, the ``.rrd`` footer) could not be found
    or read; the message names the installed version and the pinned one."""
