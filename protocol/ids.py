"""strata's ids and times as Rerun's protocol writes them.

A strata entry id is a UUID, 128 bits; Rerun's ``EntryId`` wraps a ``Tuid`` of the same width
(``time_ns``, the upper 64 bits, and ``inc``, the lower 64). The mapping is the identity on the
bits, so an id survives the round trip and its 32 hex digits (Rerun's ``x-rerun-entry-id``
header, and what ``str()`` of Rerun's ``EntryId`` prints) are the UUID's own, in another case.
strata's ids are random (``uuid4``), so the ``time_ns`` a Rerun client reads from them is no time.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from google.protobuf.message import Message

from protocol.descriptors import common, message_class

LOW_64 = (1 << 64) - 1


def entry_id(value: uuid.UUID) -> Message:
    """Rerun's ``EntryId`` of a strata id.

    >>> entry_uuid(entry_id(uuid.UUID(int=5 << 64 | 7))) == uuid.UUID(int=5 << 64 | 7)
    True
    """
    return common("EntryId", id=common("Tuid", time_ns=value.int >> 64, inc=value.int & LOW_64))


def entry_uuid(message: Message) -> uuid.UUID:
    """The strata id of Rerun's ``EntryId``."""
    return uuid.UUID(int=(message.id.time_ns << 64) | message.id.inc)


def timestamp(moment: datetime) -> Message:
    """A ``google.protobuf.Timestamp`` of a timezone-aware (or UTC) datetime."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    stamp = message_class("google.protobuf.Timestamp")()
    stamp.FromDatetime(aware)
    return stamp
