"""A segment as its page shows it: ``views.SegmentDetail`` as JSON (which entities have series to
plot and camera frames to show among them, the timelines each has data on, and the timeline the
page opens on), each property value written for a person by its Arrow type and Rerun component
type (dates, durations, compact lists)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from projector.views import Component, SegmentDetail

LIST_SHOWN = 8
"""A longer list shows this many items and how many more there are."""

TIMESTAMP_COMPONENT = "rerun.components.Timestamp"
"""Rerun's timestamps as int64 nanoseconds since the epoch (``property:RecordingInfo:start_time``)."""
SCALAR = "rerun.components.Scalar"
BLOB = "rerun.components.Blob"
MEDIA_TYPE = "rerun.components.MediaType"
ENCODED_IMAGE = "rerun.archetypes.EncodedImage"


def is_series(components: Sequence[Component]) -> bool:
    """Whether an entity has scalars over time to plot."""
    return any(c.component_type == SCALAR and not c.static for c in components)


def is_camera(components: Sequence[Component]) -> bool:
    """Whether an entity has encoded images (JPEG, PNG) over time."""
    return any(c.component_type == BLOB and c.archetype == ENCODED_IMAGE and not c.static
               for c in components)


def _when(nanos: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=nanos // 1000)).isoformat()


def display(field: pa.Field, value: Any) -> str:
    """``value`` (a Python value of ``field``'s type) as text: a one-item list as its item, a
    timestamp (Arrow's, or an int64 of component type ``rerun.components.Timestamp``) as an ISO
    date in UTC, a duration in seconds, other lists in brackets, at most ``LIST_SHOWN`` items."""
    if value is None:
        return ""
    kind = field.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        item = pa.field(field.name, kind.value_type, metadata=field.metadata)
        if len(value) == 1:
            return display(item, value[0])
        shown = ", ".join(display(item, v) for v in value[:LIST_SHOWN])
        more = f", ... {len(value) - LIST_SHOWN} more" if len(value) > LIST_SHOWN else ""
        return f"[{shown}{more}]"
    component_type = (field.metadata or {}).get(b"rerun:component_type", b"").decode()
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if component_type == TIMESTAMP_COMPONENT and isinstance(value, int):
        return _when(value)
    if isinstance(value, timedelta):
        return f"{value.total_seconds():g} s"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    return str(value)


def opening_timeline(timelines: Sequence[str], series: Sequence[str], cameras: Sequence[str],
                     entity_timelines: Mapping[str, Sequence[str]] | None) -> str | None:
    """The timeline a segment page opens on: the first of the segment's ``timelines`` that its
    first series (the one plotted first) has data on, else that its first camera has frames on,
    else the first (also when the entities' timelines are unknown: ``None``); None if it has none.

    >>> opening_timeline(["log_time", "step"], ["/joints"], [], {"/joints": ["step"]})
    'step'
    """
    for entities in (series, cameras):
        if entities and entity_timelines is not None:
            own = entity_timelines.get(entities[0], ())
            first = next((t for t in timelines if t in own), None)
            if first is not None:
                return first
    return next(iter(timelines), None)


def segment_json(dataset: str, detail: SegmentDetail,
                 entity_timelines: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The segment page's data: its layers, properties (raw and as text), timelines, entities,
    which of those have series to plot and camera frames to show, the timelines each entity has
    data on (``entity_timelines``, None if unknown) and the timeline the page opens on
    (``index``, ``opening_timeline``)."""
    row = detail.row
    properties: list[dict[str, Any]] = []
    timelines: dict[str, dict[str, str]] = {}
    for field in row.schema:
        value = row.column(field.name)[0].as_py()
        if field.name.startswith("property:"):
            properties.append({"name": field.name.removeprefix("property:"), "type": str(field.type),
                               "value": value, "text": display(field, value)})
        meta = field.metadata or {}
        if meta.get(b"rerun:kind") == b"index":
            timeline = timelines.setdefault(meta[b"rerun:index"].decode(), {
                "name": meta[b"rerun:index"].decode(), "kind": meta.get(b"rerun:index_kind", b"").decode()})
            timeline[meta[b"rerun:index_marker"].decode()] = display(field, value)
    layers = [{"name": r["layer_name"], "storage_url": r["storage_url"], "size_bytes": r["size_bytes"],
               "registered_at": _when(r["registered_at"] * 1000), "num_chunks": r["num_chunks"],
               "schema_sha256": r["schema_sha256"].hex() if r["schema_sha256"] else None}
              for r in detail.layers.select(["layer_name", "storage_url", "size_bytes", "registered_at",
                                             "num_chunks", "schema_sha256"]).to_pylist()]
    entities = [{"path": path, "components": [
        {"component": c.component, "component_type": c.component_type, "archetype": c.archetype,
         "arrow_type": c.arrow_type, "static": c.static, "layer": c.layer} for c in components]}
        for path, components in detail.entities.items()]
    series = [path for path, components in detail.entities.items() if is_series(components)]
    cameras = [path for path, components in detail.entities.items() if is_camera(components)]
    return {"dataset": dataset, "segment_id": detail.segment_id, "layers": layers,
            "properties": properties, "timelines": list(timelines.values()), "entities": entities,
            "series": series, "cameras": cameras,
            "entity_timelines": None if entity_timelines is None else {
                path: list(entity_timelines.get(path, ())) for path in detail.entities},
            "index": opening_timeline(list(timelines), series, cameras, entity_timelines)}
