"""Registering recordings as layers of a dataset's segments, one way for every client: the
request's rules (its arguments checked and normalized), then the recordings read
(``recordings``, on the caller's workers), then the commands built (``layer_commands``, each
checked by the fold's own rules, ``projector.registration``), then the commands appended to the
log (``CommandLog``). Nothing is sent unless every step before succeeds. And the inverse: which
layers of which segments an unregistration removes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commands.layer_commands import layer_commands
from commands.log import CommandLog, Submitted, Write
from events import DefineSchema, OnDuplicate, UnregisterLayers
from events.names import RECORDING_SUFFIXES, check_layer_name
from projector import registration
from recordings import (
    NotFoundError,
    ObjectStore,
    Progress,
    Recording,
    WorkerPool,
    is_object_url,
    local_path,
    read_recordings,
    read_recordings_on_spark,
    with_properties,
)

SPARK_MIN_FILES = 1_000
"""The fewest files a registration given a Spark session reads on its executors; fewer are read
on the caller's workers."""
Properties = Mapping[str, Mapping[str, Any]]
"""Properties given with a URI: ``{entity: {field: value}}``, like ``rr.send_property``."""


@dataclass(frozen=True)
class Request:
    """A registration's arguments, checked: one layer name and properties (or None) per URI."""

    uris: list[str]
    layer_names: list[str]
    properties: list[Properties | None]
    on_duplicate: OnDuplicate


def request(uris: str | Sequence[str], layer_name: str | Sequence[str], on_duplicate: OnDuplicate | str,
            properties: Properties | Sequence[Properties | None] | None) -> Request:
    """``register``'s arguments as a request. ``ValueError`` for no URI, an invalid layer name, a
    list of layer names or properties of another length than the URIs', or an unknown mode."""
    uri_list = [uris] if isinstance(uris, str) else list(uris)
    if not uri_list:
        raise ValueError("no data sources to register: register() needs at least one URI")
    layer_names = _per_uri("layer_name", layer_name, len(uri_list), str)
    for name in layer_names:
        check_layer_name(name)
    property_list = _per_uri("properties", properties, len(uri_list), Mapping)
    return Request(uri_list, layer_names, property_list, OnDuplicate.parse(on_duplicate))


def prefix_request(prefix: str, layer_name: str | None, on_duplicate: OnDuplicate | str,
                   objects: ObjectStore) -> Request:
    """``register_prefix``'s arguments as a request: every recording under a ``file://``
    directory or an ``s3://`` prefix (listed with ``objects``), recursively, in path order.
    ``ValueError`` if the prefix is a file or holds no recording, for an invalid layer name or an
    unknown mode; ``NotFoundError`` if the prefix (or its bucket) does not exist."""
    if is_object_url(prefix):
        uris = objects.list(prefix, RECORDING_SUFFIXES)
    else:
        directory = local_path(prefix)
        if directory.is_file():
            raise ValueError(f"expected prefix / directory but got an object: {prefix} "
                             "is a file; register it with register(), or pass its directory")
        if not directory.is_dir():
            raise NotFoundError(f"no directory at {prefix} ({directory})")
        uris = [p.as_uri() for p in sorted(directory.rglob("*"))
                if p.is_file() and p.suffix.lower() in RECORDING_SUFFIXES]
    if not uris:
        raise ValueError(f"no rrd files found in {prefix} (looked for "
                         f"{', '.join(RECORDING_SUFFIXES)} files, recursively)")
    name = check_layer_name(layer_name if layer_name is not None else "base")
    return Request(uris, [name] * len(uris), [None] * len(uris), OnDuplicate.parse(on_duplicate))


@dataclass(frozen=True)
class Registered:
    """One URI of a registration as the log has it: its segment id (the recording's id, known
    before any wait) and its write."""

    uri: str
    segment_id: str
    write: Submitted


def register(log: CommandLog, workers: WorkerPool, entry_id: uuid.UUID, request: Request, *,
             objects: ObjectStore, blueprint: bool, progress: Progress | None,
             spark: Any = None) -> list[Registered]:
    """Read the request's recordings (blueprints, with ``blueprint``) with ``objects`` on
    ``workers``, or with a ``spark`` session on its executors for a request of at least
    ``SPARK_MIN_FILES`` files, ``progress`` told as they are read; then append one
    ``RegisterLayer`` per URI to ``log``, after the definitions of the schemas they name that the
    log lacks. Raises what reading raises (``NotFoundError``, ``ValueError``,
    ``ObjectStoreError``), and ``ValueError`` for properties that cannot be stored or are too
    large and for the same (segment, layer) twice; nothing is sent then. ``DeliveryError`` if
    Kafka does not take the events."""
    if spark is not None and len(request.uris) >= SPARK_MIN_FILES:
        recordings = read_recordings_on_spark(spark, request.uris, objects, blueprint=blueprint,
                                              progress=progress)
    else:
        recordings = read_recordings(request.uris, objects, workers, blueprint=blueprint, progress=progress)
    recordings = [r if p is None else with_properties(r, p)
                  for r, p in zip(recordings, request.properties, strict=True)]
    writes, schemas = writes_for(recordings, request.layer_names, request.on_duplicate)
    submitted = log.submit(entry_id, writes, schemas=schemas)
    return [Registered(recording.uri, recording.recording_id, write)
            for recording, write in zip(recordings, submitted, strict=True)]


def unregister(segments_to_drop: str | Sequence[str], layers_to_drop: str | Sequence[str]) -> Write:
    """The write removing every (segment, layer) in the product of the two lists, an empty list
    meaning all. ``ValueError`` if both are empty."""
    segments = [segments_to_drop] if isinstance(segments_to_drop, str) else list(segments_to_drop)
    layers = [layers_to_drop] if isinstance(layers_to_drop, str) else list(layers_to_drop)
    if not segments and not layers:
        raise ValueError("unregister() needs segments_to_drop or layers_to_drop (an empty "
                         "list means all, but not both)")
    return Write("unregistering", (UnregisterLayers(tuple(segments), tuple(layers)),))


def writes_for(recordings: list[Recording], layer_names: list[str], mode: OnDuplicate
              ) -> tuple[list[Write], list[DefineSchema]]:
    """One write registering each recording (read, properties added) as its layer name, and the
    definitions of the schemas they name, in order of first use: what ``register`` appends.
    ``ValueError`` for the same (segment, layer) twice, or for a command the fold would refuse on
    its own (``projector.registration.check_command``: an id too long, properties larger than a
    layer may have), naming the recording."""
    seen: dict[tuple[str, str], str] = {}
    for recording, name in zip(recordings, layer_names, strict=True):
        key = (recording.recording_id, name)
        if key in seen:
            raise ValueError(f'duplicate segment layers in request: segment "{key[0]}", layer '
                             f'"{name}" comes from both {seen[key]} and {recording.uri}')
        seen[key] = recording.uri
    writes = []
    schemas: dict[str, DefineSchema] = {}
    for recording, name in zip(recordings, layer_names, strict=True):
        command, definitions = layer_commands(recording, name, mode)
        try:
            registration.check_command(command, {d.sha256: d.arrow_schema for d in definitions})
        except ValueError as exc:
            raise ValueError(f"{recording.uri}: {exc}") from None
        for definition in definitions:
            schemas.setdefault(definition.sha256, definition)
        writes.append(Write(f"registering {recording.uri} as layer {name!r} of segment "
                            f"{recording.recording_id!r}", (command,)))
    return writes, list(schemas.values())


def _per_uri(name: str, value: Any, count: int, single: type) -> list[Any]:
    """``value`` repeated for each URI if it is one, else checked to have one per URI."""
    if value is None or isinstance(value, single):
        return [value] * count
    values = list(value)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries for {count} URIs: a list of them must be "
                         "the same length as the URIs (or pass one for all)")
    return values
