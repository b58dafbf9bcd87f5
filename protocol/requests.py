"""What every RPC of the service is handed: the catalog it serves (``commands.Catalog``, shared by
every call), the decoded request message and the call's headers; and the entry a dataset- or
table-scoped call names in Rerun's headers (``x-rerun-entry-id``, 32 hex digits of the entry's
Tuid, or ``x-rerun-entry-name-bin``), as the projection has it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from commands import Catalog
from projector import Dataset, Table
from protocol.errors import InvalidRequestError
from protocol.layer_chunks import LayerChunks
from recordings import NotFoundError

ENTRY_ID_HEADER = "x-rerun-entry-id"
ENTRY_NAME_HEADER = "x-rerun-entry-name-bin"


@dataclass(frozen=True)
class Request:
    """One call: the catalog, the request message, the headers (a binary header's value is
    ``bytes``), the server's layers' chunk indexes and chunk keys, and whether the client is still
    there."""

    catalog: Catalog
    message: Message
    metadata: Mapping[str, str | bytes]
    layer_chunks: LayerChunks
    active: Callable[[], bool] = lambda: True
    """Whether the client still waits for the call's answer (False once it cancelled or went
    away): a long stream checks it between its responses."""
    may_write: bool = True
    """Whether the caller's token may write (``protocol.tokens``)."""

    def entry_id(self) -> uuid.UUID | None:
        """The entry id of the ``x-rerun-entry-id`` header, None without one.
        ``InvalidRequestError`` if it is not 32 hex digits."""
        value = self.metadata.get(ENTRY_ID_HEADER)
        if value is None:
            return None
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if len(text) != 32:
            raise InvalidRequestError(f"{text!r} is not a valid value for {ENTRY_ID_HEADER!r}: expected "
                                      f"exactly 32 hex characters, got {len(text)}")
        try:
            return uuid.UUID(hex=text)
        except ValueError:
            raise InvalidRequestError(f"{text!r} is not a valid value for {ENTRY_ID_HEADER!r}: expected "
                                      "exactly 32 hex characters") from None

    def entry_name(self) -> str | None:
        """The entry name of the ``x-rerun-entry-name-bin`` header, None without one."""
        value = self.metadata.get(ENTRY_NAME_HEADER)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def dataset(self) -> Dataset:
        """The dataset the headers name (hidden ones too). ``InvalidRequestError`` without either
        header, ``NotFoundError`` for an unknown id, ``LookupError`` for an unknown name."""
        entry_id = self.entry_id()
        if entry_id is not None:
            return self.catalog.find_dataset(None, entry_id)
        name = self.entry_name()
        if name is not None:
            return self.catalog.find_dataset(name, None)
        raise _missing_headers()

    def entry(self) -> Dataset | Table:
        """The dataset or table the headers name, as ``dataset``."""
        entry_id = self.entry_id()
        if entry_id is not None:
            try:
                return self.catalog.find_dataset(None, entry_id)
            except NotFoundError:
                pass
            try:
                return self.catalog.find_table(None, entry_id)
            except NotFoundError:
                raise NotFoundError(
                    f"Entry id '{entry_id.hex}' not found: no dataset or table has it") from None
        name = self.entry_name()
        if name is not None:
            try:
                return self.catalog.find_dataset(name, None)
            except LookupError:
                pass
            try:
                return self.catalog.find_table(name, None)
            except LookupError:
                raise LookupError(f"no dataset or table is named {name!r}") from None
        raise _missing_headers()


def _missing_headers() -> InvalidRequestError:
    return InvalidRequestError(f"missing mandatory [{ENTRY_ID_HEADER!r}, {ENTRY_NAME_HEADER!r}] headers")


Unary = Callable[[Request], Message]
"""An RPC with one response."""
Streaming = Callable[[Request], Iterable[Message]]
"""An RPC with a stream of responses."""
Gathering = Callable[[Request, Sequence[Message]], Message]
"""An RPC with a stream of requests and one response, handed every request of the stream (the
``Request``'s own message is an empty one of their type)."""
