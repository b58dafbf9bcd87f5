"""``WatchEvents``: the entries created and deleted from the moment the call starts, as the
projector commits them to the change feed (``projector.feed``), read on a connection of the
call's own, until the client cancels or goes away (checked at least every ``POLL_SECS``). Rerun's
viewer watches them to list a catalog's entries live. A catalog served as of a point
(``strata serve --as-of``) does not change: its watches wait, with no event, until they end."""

from __future__ import annotations

import time
from collections.abc import Iterator

from google.protobuf.message import Message

from projector import ChangeKind, feed, open_store
from protocol.descriptors import cloud
from protocol.errors import InvalidRequestError
from protocol.ids import entry_id
from protocol.requests import Request, Streaming

POLL_SECS = 1.0
"""How long a watch waits for a commit before it checks that its client is still there."""
CREATED = {ChangeKind.DATASET_CREATED: "entry_created", ChangeKind.TABLE_CREATED: "entry_created",
           ChangeKind.DATASET_DELETED: "entry_deleted", ChangeKind.TABLE_DELETED: "entry_deleted"}
"""The changes watched, and the event each is."""
EVENTS = {"entry_created": "EntryCreatedEvent", "entry_deleted": "EntryDeletedEvent"}


def watch_events(request: Request) -> Iterator[Message]:
    """A stream of ``WatchEventsResponse``s, one per dataset or table (hidden ones too) created or
    deleted after the call starts. ``InvalidRequestError`` for a kind of event other than
    entries'."""
    for kind in request.message.kinds:
        if kind.WhichOneof("kind") != "entry":
            raise InvalidRequestError(f"WatchEvents: strata watches entries' events only, not {kind}")
    if request.catalog.point is not None:
        return _unchanging(request)
    store = open_store(request.catalog.location, read_only=True)
    after = feed.start(store, None)

    def respond() -> Iterator[Message]:
        cursor = after
        try:
            while request.active():
                for page in feed.follow_pages(store, cursor, timeout_secs=POLL_SECS):
                    cursor = page[-1].cursor
                    for change in page:
                        event = CREATED.get(change.kind)
                        if event is not None and change.entry_id is not None:
                            yield cloud("WatchEventsResponse", **{
                                event: cloud(EVENTS[event], id=entry_id(change.entry_id))})
                    if not request.active():
                        return
        finally:
            store.close()

    return respond()


def _unchanging(request: Request) -> Iterator[Message]:
    """The watch of a catalog as of a point: no event, until the client goes away."""
    while request.active():
        time.sleep(POLL_SECS)
    yield from ()


STREAMING: dict[str, Streaming] = {"WatchEvents": watch_events}
LAZY = frozenset(STREAMING)
"""Streams answered as they come, not gathered first."""
