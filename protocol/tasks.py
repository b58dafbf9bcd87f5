"""Registration and its tasks over the protocol: ``RegisterWithDataset`` registers recordings with
the command core (``commands.register``: the files are read on the catalog's worker pool, the
commands go to the log), and answers one task per recording whose id names its event;
``UnregisterFromDataset`` sends its one command the same way, one task for it. A task's id is its
event's place in the log, ``<topic>:<partition>:<offset>``. ``QueryTasks`` and
``QueryTasksOnCompletion`` read the outcome the projector recorded at that place (the latter after
waiting for the projection to pass it), so a task survives a restart of the server and is the same
for every server of the catalog: no state of the server's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import pyarrow as pa
from google.protobuf.message import Message

import commands
from events import OnDuplicate
from projector import (
    DatasetKind,
    LogPosition,
    Outcome,
    PositionLike,
    ProjectionReader,
    Status,
    wait_for_positions,
)
from protocol.dataframes import encode
from protocol.datasets import MANIFEST
from protocol.descriptors import cloud, common, enum_value
from protocol.errors import InvalidRequestError
from protocol.requests import Request, Streaming, Unary
from recordings import NotFoundError

DUPLICATE = "rerun.common.v1alpha1.IfDuplicateBehavior"
ON_DUPLICATE = {enum_value(DUPLICATE, "IF_DUPLICATE_BEHAVIOR_UNSPECIFIED"): OnDuplicate.ERROR,
                enum_value(DUPLICATE, "IF_DUPLICATE_BEHAVIOR_ERROR"): OnDuplicate.ERROR,
                enum_value(DUPLICATE, "IF_DUPLICATE_BEHAVIOR_SKIP"): OnDuplicate.SKIP,
                enum_value(DUPLICATE, "IF_DUPLICATE_BEHAVIOR_OVERWRITE"): OnDuplicate.REPLACE}
SOURCE_KINDS = {enum_value("rerun.cloud.v1alpha1.DataSourceKind", name)
                for name in ("DATA_SOURCE_KIND_UNSPECIFIED", "DATA_SOURCE_KIND_RRD")}
TEXT = pa.string()
REGISTERED = pa.schema([pa.field(name, TEXT, nullable=False) for name in (
    "rerun_segment_id", "rerun_segment_layer", "rerun_segment_type", "rerun_storage_url", "rerun_task_id")])
"""``RegisterWithDatasetResponse``'s columns, as Rerun's server has them."""
TASKS = pa.schema([
    pa.field("task_id", TEXT, nullable=False), pa.field("kind", TEXT), pa.field("data", TEXT),
    pa.field("exec_status", TEXT, nullable=False), pa.field("msgs", TEXT), pa.field("blob", pa.binary()),
    pa.field("lease_owner", TEXT), pa.field("lease_expiration", pa.timestamp("ns")),
    pa.field("attempts", pa.uint8(), nullable=False), pa.field("creation_time", pa.timestamp("ns")),
    pa.field("last_update_time", pa.timestamp("ns")),
])
"""The columns of a task query's answer, as Rerun's server has them."""
MAX_WAIT_SECS = 600.0
"""The longest ``QueryTasksOnCompletion`` waits, whatever its request asks."""
DEFAULT_WAIT_SECS = 60.0


def task_id(position: PositionLike) -> str:
    """The id of the task of the event at ``position``: ``strata.catalog:0:1234``.

    >>> task_position(task_id(LogPosition("strata.catalog", 0, 1234)))
    LogPosition(topic='strata.catalog', partition=0, offset=1234)
    """
    return f"{position.topic}:{position.partition}:{position.offset}"


def task_position(task: str) -> LogPosition:
    """The log position a task id names. ``InvalidRequestError`` if it names none."""
    topic, _, rest = task.partition(":")
    partition, _, offset = rest.partition(":")
    if not (topic and partition.isdigit() and offset.isdigit()):
        raise InvalidRequestError(f"{task!r} is not a task of this catalog: its tasks are named by their "
                                  "event's place in the log, <topic>:<partition>:<offset>")
    return LogPosition(topic, int(partition), int(offset))


def _object_store_config(sources: Sequence[Message]) -> str | None:
    """The one object store configuration the data sources name (None: the client's)."""
    configs = {source.object_store_config for source in sources if source.HasField("object_store_config")}
    if len(configs) > 1:
        raise InvalidRequestError("RegisterWithDataset: the data sources name different object store "
                                  "configurations; register them in separate calls")
    config = next(iter(configs), None)
    if config is not None:
        try:
            json.loads(config)
        except ValueError as exc:
            raise InvalidRequestError(
                f"RegisterWithDataset: object_store_config is not JSON ({exc})") from None
    return config


def register_with_dataset(request: Request) -> Message:
    """Registers the data sources (files, or with ``prefix`` every ``.rrd`` under a prefix) as
    layers of the dataset the headers name (``commands.register``). Raises what it raises before
    sending anything (``NotFoundError`` for a missing file, ``ValueError`` for an unreadable one),
    ``InvalidRequestError`` for a source of another kind than RRD."""
    catalog = request.catalog
    catalog.writable()
    dataset = request.dataset()
    sources = list(request.message.data_sources)
    if not sources:
        raise InvalidRequestError("RegisterWithDataset: no data sources to register")
    for source in sources:
        if not source.storage_url:
            raise InvalidRequestError("RegisterWithDataset: a data source without a storage_url")
        if source.typ not in SOURCE_KINDS:
            raise InvalidRequestError(f"RegisterWithDataset: {source.storage_url} is not an RRD data source")
    on_duplicate = ON_DUPLICATE.get(request.message.on_duplicate)
    if on_duplicate is None:
        raise InvalidRequestError(f"RegisterWithDataset: unknown on_duplicate {request.message.on_duplicate}")
    objects = catalog.objects(_object_store_config(sources))
    files = [source for source in sources if not source.prefix]
    wanted: list[commands.Request] = []
    if files:
        layers = [source.layer if source.HasField("layer") else "base" for source in files]
        wanted.append(commands.request([source.storage_url for source in files], layers, on_duplicate, None))
    for source in sources:
        if source.prefix:
            layer = source.layer if source.HasField("layer") else None
            wanted.append(commands.prefix_request(source.storage_url, layer, on_duplicate, objects))
    blueprint = dataset.kind is DatasetKind.BLUEPRINT
    rows = [{"rerun_segment_id": item.segment_id, "rerun_segment_layer": layer, "rerun_segment_type": "rrd",
             "rerun_storage_url": item.uri, "rerun_task_id": task_id(item.write.positions[0])}
            for registration in wanted
            for item, layer in zip(commands.register(catalog.log, catalog.workers, dataset.id, registration,
                                                     objects=objects, blueprint=blueprint, progress=None),
                                   registration.layer_names, strict=True)]
    return cloud("RegisterWithDatasetResponse", data=encode(pa.Table.from_pylist(rows, schema=REGISTERED)))


def unregister_from_dataset(request: Request) -> Iterator[Message]:
    """Unregisters every (segment, layer) in the product of the segments and layers the request
    names (an empty list: all of them), and answers, as Rerun's server does, an
    empty manifest and the task of the command, in a stream of one response.
    ``InvalidRequestError`` if it names neither. ``force`` changes nothing: the log has no queue
    of tasks that could be stuck."""
    dataset = request.dataset()
    segments = [segment.id for segment in request.message.segments_to_drop]
    layers = list(request.message.layers_to_drop)
    if not segments and not layers:
        raise InvalidRequestError("UnregisterFromDataset: must specify at least 1 segment ID or layer for "
                                  "removal")
    [submitted] = request.catalog.submit(dataset.id, [commands.unregister(segments, layers)])
    return iter([cloud("UnregisterFromDatasetResponse", data=encode(MANIFEST.empty_table()),
                       task_id=common("TaskId", id=task_id(submitted.positions[0])))])


def _row(task: str, outcome: Outcome | None) -> dict[str, object]:
    """A task's row: ``success``, ``failed`` with the projector's reason, or ``pending``."""
    if outcome is None:
        status, message = "pending", None
    elif outcome.status is Status.ACCEPTED:
        status, message = "success", None
    else:
        status = "failed"
        message = f"Registration failed for the segments/layers listed below.\n- {outcome.reason}"
    return {"task_id": task, "kind": "register", "exec_status": status, "msgs": message, "attempts": 1}


def _tasks(store: ProjectionReader, tasks: list[str], positions: list[LogPosition]) -> Message:
    reached = store.next_offsets()
    rows = []
    for task, position in zip(tasks, positions, strict=True):
        passed = reached.get((position.topic, position.partition), 0) > position.offset
        outcome = store.outcome_at(position) if passed else None
        if passed and outcome is None:
            raise NotFoundError(
                f"task {task!r}: the catalog recorded no command at that place of the log")
        rows.append(_row(task, outcome))
    return encode(pa.Table.from_pylist(rows, schema=TASKS))


def _requested(request: Request) -> tuple[list[str], list[LogPosition]]:
    tasks = [task.id for task in request.message.ids]
    if not tasks:
        raise InvalidRequestError("name the tasks to query: this catalog does not list them all")
    return tasks, [task_position(task) for task in tasks]


def query_tasks(request: Request) -> Message:
    """The tasks' outcomes as the projection has them now (``pending``: not yet applied)."""
    tasks, positions = _requested(request)
    return cloud("QueryTasksResponse", data=_tasks(request.catalog.projection, tasks, positions))


def query_tasks_on_completion(request: Request) -> Iterator[Message]:
    """The tasks' outcomes once the projection has passed their events, waiting up to the
    request's timeout (at most ``MAX_WAIT_SECS``; ``DEFAULT_WAIT_SECS`` without one).
    ``ProjectionTimeoutError`` (``DEADLINE_EXCEEDED``) saying how far the projection got."""
    tasks, positions = _requested(request)
    timeout = request.message.timeout
    wait = timeout.seconds + timeout.nanos / 1e9 if request.message.HasField("timeout") else DEFAULT_WAIT_SECS
    store = request.catalog.projection
    wait_for_positions(store, positions, min(max(wait, 0.0), MAX_WAIT_SECS))
    return iter([cloud("QueryTasksOnCompletionResponse", data=_tasks(store, tasks, positions))])


UNARY: dict[str, Unary] = {"RegisterWithDataset": register_with_dataset, "QueryTasks": query_tasks}
"""The tasks' RPCs with one response, by name."""
STREAMING: dict[str, Streaming] = {"QueryTasksOnCompletion": query_tasks_on_completion,
                                   "UnregisterFromDataset": unregister_from_dataset}
"""The tasks' RPCs with a stream of responses, by name."""
