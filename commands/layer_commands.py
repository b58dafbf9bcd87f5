"""What registering a recording as a layer sends: the ``RegisterLayer`` command, which names the
recording's schema and its properties' schema by digest, and the ``DefineSchema`` commands of
those schemas.

Public so that a pipeline producing its own events for recordings (with ``producers``) sends
what ``DatasetEntry.register`` would.
"""

from __future__ import annotations

from events import DefineSchema, OnDuplicate, RegisterLayer
from projector import schemas
from recordings import Recording


def layer_commands(recording: Recording, layer_name: str, on_duplicate: OnDuplicate = OnDuplicate.ERROR
                   ) -> tuple[RegisterLayer, list[DefineSchema]]:
    """The command registering ``recording`` as layer ``layer_name`` of the segment its recording
    id names, with its schemas by reference, and the definitions of the schemas it names (the
    recording's, then its properties' if it has any). A schema's definition must be in the log
    before the first command naming it; defining one again changes nothing. Raises nothing.

    Examples:
        >>> command, definitions = layer_commands(read_recording(uri), "base")  # doctest: +SKIP
        >>> events = [Event(dataset.id, c) for c in [*definitions, command]]  # doctest: +SKIP
        >>> producer.send(events)  # doctest: +SKIP
    """
    layer_schema = recording.schema_bytes()
    definitions = [DefineSchema(schemas.digest(layer_schema), layer_schema)]
    properties_sha256, batch = "", b""
    if recording.properties is not None and recording.properties.num_columns:
        properties_schema, batch = schemas.properties_parts(recording.properties)
        properties_sha256 = schemas.digest(properties_schema)
        definitions.append(DefineSchema(properties_sha256, properties_schema))
    command = RegisterLayer(
        segment_id=recording.recording_id, layer_name=layer_name, storage_url=recording.uri,
        on_duplicate=on_duplicate, size_bytes=recording.size_bytes, schema_sha256=definitions[0].sha256,
        properties_schema_sha256=properties_sha256, properties_batch=batch,
        num_chunks=recording.num_chunks, index_ranges=recording.index_ranges)
    return command, definitions
