"""A registration's rules, each in one place: what makes a ``RegisterLayer`` command valid on its
own, what its properties must be, what a registration of a (segment, layer) that is already there
decides, and the offsets a batch of records advances.

The per-event fold (``projector.fold``), the batch fold (``projector.batch_fold``) and the checks
a client makes before it sends anything (``check_command``) call these functions, so a client's
early error and the fold's recorded outcome are one answer, word for word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from events import OnDuplicate, RegisterLayer
from events.names import MAX_PROPERTIES_BYTES, check_id, check_layer_name
from projector import schemas
from projector.model import Changes, LogRecord

__all__ = ["already_exists", "check_command", "inline_properties_problem", "invalid", "note_offsets",
           "properties_row", "replaces"]


def note_offsets(changes: Changes, ordered: Sequence[LogRecord]) -> None:
    """Advance ``changes``' offsets over ``ordered`` (a batch in log order): every record moves its
    partition's next offset, whatever its outcome, so a wait for any of them ends."""
    for record in ordered:
        key = (record.position.topic, record.position.partition)
        changes.first_offsets.setdefault(key, record.position.offset)
        changes.next_offsets[key] = record.position.offset + 1
        changes.records[key] = changes.records.get(key, 0) + 1


def invalid(command: RegisterLayer) -> str | None:
    """Why ``command`` can never be applied, judged on the command alone (its ids, layer name and
    size); None if nothing in it is wrong. What needs the catalog (its schemas, its dataset) the
    fold judges after this.

    >>> invalid(RegisterLayer("ep_1", "base", "file:///data/ep_1.rrd", size_bytes=-1))
    'size_bytes must not be negative, got -1'
    """
    try:
        check_id("segment_id", command.segment_id)
        check_layer_name(command.layer_name)
        check_id("storage_url", command.storage_url)
    except ValueError as exc:
        return str(exc)
    if command.size_bytes < 0:
        return f"size_bytes must not be negative, got {command.size_bytes}"
    return None


def properties_row(schema_bytes: bytes, batch: bytes) -> pa.RecordBatch:
    """A layer's properties sent by reference, read as a row of their schema (``schema_bytes``).
    Raises ``ValueError`` if they take more than ``MAX_PROPERTIES_BYTES`` or are not a record
    batch of that schema."""
    return schemas.read_properties(schema_bytes, batch, limit=MAX_PROPERTIES_BYTES)


def inline_properties_problem(properties: bytes) -> str | None:
    """Why properties sent inline (an Arrow IPC stream, logs before envelope v5) cannot be kept;
    None if they can."""
    if len(properties) > MAX_PROPERTIES_BYTES:
        return f"properties have {len(properties)} bytes; at most {MAX_PROPERTIES_BYTES} are allowed"
    return None


def replaces(command: RegisterLayer) -> bool:
    """Whether ``command`` replaces a (segment, layer) that is already there
    (``OnDuplicate.REPLACE``: last writer wins); if not, ``already_exists`` says what it decides."""
    return command.on_duplicate is OnDuplicate.REPLACE


def already_exists(command: RegisterLayer) -> str | None:
    """What a registration of a (segment, layer) already there decides when it does not replace
    it: the reason it is refused (``OnDuplicate.ERROR``, ``Status.ALREADY_EXISTS``, in Rerun's
    words), or None when it is skipped (``OnDuplicate.SKIP``: accepted, nothing changes)."""
    if command.on_duplicate is OnDuplicate.SKIP:
        return None
    return f'Segment "{command.segment_id}", layer "{command.layer_name}": already exists'


def check_command(command: RegisterLayer, defined: Mapping[str, bytes]) -> None:
    """The checks a client makes before it sends ``command``, the fold's own: ``invalid``, then
    its properties read as the fold reads them, their schema taken from ``defined`` (digest to
    schema bytes: the definitions the client sends with it). Raises ``ValueError`` with the
    reason the fold would record.

    >>> check_command(RegisterLayer("", "base", "file:///data/ep_1.rrd"), {})
    Traceback (most recent call last):
    ValueError: segment_id must be a non-empty string, got ''
    """
    problem = invalid(command)
    if problem is not None:
        raise ValueError(problem)
    if command.properties_batch:
        properties_row(defined[command.properties_schema_sha256], command.properties_batch)
