"""Recordings: what every reader of recording files shares (the SDK, the dashboard, the benchmark;
the changelog's snapshots use its object stores).

Owns where recordings are (``file://`` paths, ``s3://`` objects: ``locations``, ``objects``,
and their presigned URLs: ``presigned``);
what a file holds without loading its data: its id, size, Arrow schema, properties and an
``.rrd``'s chunk index with byte offsets (``files``), an ``.rrd``'s footer and chunks read with
Rerun's own definitions (``rrd``, ``definitions``: the protobuf descriptors the installed
rerun-sdk carries, which ``protocol`` speaks too), many files read at once (``bulk``), or by the
tasks of a caller's Spark session (``on_spark``);
Rerun's entity path filters (``contents``); per-segment reads with rerun-sdk's query engine
(``segments``); the worker processes those reads run in (``workers``, ``python -m
recordings.worker``); and the errors of all of these (``errors``, re-exported by ``sdk.errors``).
Builds no command event: what a recording becomes in the log is the writer's to decide.

Imports ``projector``, ``events`` and ``settings`` of strata, never ``sdk``, ``dashboard``,
``changelog``, ``stack`` or ``spark_streaming``, nor pyspark or confluent_kafka
(tests/unit/test_boundaries.py enforces it). rerun-sdk's query engine is imported on first use.
"""

from recordings.bulk import Progress, read_recordings
from recordings.contents import PROPERTIES_ENTITY, Contents, expressions, selects
from recordings.errors import NotFoundError, ObjectStoreError, RecordingChangedError, WorkerError
from recordings.files import Recording, chunk_index, read_recording, with_properties
from recordings.locations import is_object_url, local_path, split
from recordings.objects import ObjectStore, ObjectStoreConfig, ObjectStoreSettings, RemoteObject, object_store
from recordings.on_spark import read_recordings_on_spark
from recordings.presigned import PresignedObject, Presigner, presigner
from recordings.segments import (
    SEGMENT_ID,
    LayerFile,
    ReadOptions,
    index_names,
    ipc_file,
    layer_files,
    output_schema,
    read_segment,
    rerun_schema,
    segment_rrd,
    segment_store,
    segments_dataset,
    selected_schema,
    with_manifest_ranges,
)
from recordings.workers import INLINE_BYTES, WorkerPool

__all__ = [
    "INLINE_BYTES",
    "PROPERTIES_ENTITY",
    "SEGMENT_ID",
    "Contents",
    "LayerFile",
    "NotFoundError",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreError",
    "ObjectStoreSettings",
    "PresignedObject",
    "Presigner",
    "Progress",
    "ReadOptions",
    "Recording",
    "RecordingChangedError",
    "RemoteObject",
    "WorkerError",
    "WorkerPool",
    "chunk_index",
    "expressions",
    "index_names",
    "ipc_file",
    "is_object_url",
    "layer_files",
    "local_path",
    "object_store",
    "output_schema",
    "presigner",
    "read_recording",
    "read_recordings",
    "read_recordings_on_spark",
    "read_segment",
    "rerun_schema",
    "segment_rrd",
    "segment_store",
    "segments_dataset",
    "selected_schema",
    "selects",
    "split",
    "with_manifest_ranges",
    "with_properties",
]
