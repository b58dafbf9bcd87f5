"""A dataset's history: the points a read may be made as of (a log offset, a timezone-aware
``datetime``, or the name of one of the dataset's tags), what changed in the dataset between two
of them, and its tags, which are commands in the log like every write (``CreateTag``,
``DeleteTag``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TypeAlias

import datafusion

from events import CreateTag, DeleteTag
from events.names import check_tag_name
from projector import Tag, views
from sdk._connection import Connection
from sdk._operations import Operation

Point: TypeAlias = int | datetime | str
"""A point of a dataset's history: a log offset, a timezone-aware ``datetime`` or a tag's name."""


def at(internal: Connection, dataset_id: uuid.UUID, dataset_name: str, point: Point) -> Connection:
    """``internal`` reading the catalog as of ``point`` (see ``Connection.at``). ``LookupError``
    for a name of no tag of the dataset, ``ValueError`` for an offset past the end of the log."""
    if isinstance(point, str):
        return internal.at(tag(internal, dataset_id, dataset_name, point).offset)
    return internal.at(point)


def diff(internal: Connection, dataset_id: uuid.UUID, dataset_name: str, before: Point,
         after: Point | None) -> datafusion.DataFrame:
    """What changed in the dataset from ``before`` to ``after`` (None: now), as
    ``views.diff_table`` lists it, in ``internal``'s session. Raises what ``at`` raises."""
    old = at(internal, dataset_id, dataset_name, before).wait_for_store()
    new = (internal if after is None else at(internal, dataset_id, dataset_name, after)).wait_for_store()
    return internal.dataframe(views.diff_table(old, new, dataset_id))


def create_tag(internal: Connection, dataset_id: uuid.UUID, dataset_name: str, name: str,
               point: int | datetime | None, timeout_secs: float | None) -> Tag:
    """Tag ``point`` of the dataset (None: just after this client's last write, see
    ``Connection.here``) as ``name``, and wait until the catalog has the tag. ``ValueError`` for
    an invalid name or point (nothing is sent), ``AlreadyExistsError`` if the dataset has a tag of
    that name."""
    check_tag_name(name)
    internal.writable()
    offset = internal.here() if point is None else internal.resolve(point)
    what = f"tagging offset {offset} of dataset {dataset_name!r} as {name!r}"
    Operation.submit(internal, dataset_id, CreateTag(name, offset), what).wait(timeout_secs)
    return tag(internal, dataset_id, dataset_name, name)


def tags(internal: Connection, dataset_id: uuid.UUID) -> list[Tag]:
    """The dataset's tags, by offset then name."""
    return internal.wait_for_store().tags(dataset_id)


def delete_tag(internal: Connection, dataset_id: uuid.UUID, dataset_name: str, name: str,
               timeout_secs: float | None) -> None:
    """Remove the dataset's tag ``name``; ``NotFoundError`` if it has none of that name."""
    Operation.submit(internal, dataset_id, DeleteTag(name),
                     f"deleting tag {name!r} of dataset {dataset_name!r}").wait(timeout_secs)


def tag(internal: Connection, dataset_id: uuid.UUID, dataset_name: str, name: str) -> Tag:
    """The dataset's tag ``name``; ``LookupError`` naming the tags it has if it has none of that
    name."""
    found = internal.wait_for_store().tag(dataset_id, name)
    if found is None:
        names = ", ".join(repr(t.name) for t in tags(internal, dataset_id)) or "none"
        raise LookupError(f"dataset {dataset_name!r} has no tag {name!r} (its tags: {names})")
    return found
