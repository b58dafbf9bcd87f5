"""What the history of datasets and segments leaves to their layers.

A registration moves its dataset's ``updated_at``, ``segments_created``, ``schemaless_layers``
and schema counts, and its segment's ``updated_at``. A version of both for every registration
made the history as long as the log, so the fold versions a registration's touch only when it
changes something else (``same_version``: a new schema digest; a new segment), and a reader as of
an offset puts the rest back from the layers, which keep every registration:

- ``updated_at`` is the version's, or the latest ``registered_at`` of the layers registered into
  the dataset (or segment) since the version and before the offset, replaced or removed since
  or not (``latest``): every touch other than a registration makes a version, and every
  registration leaves a layer registered at its ``produced_at``;
- the schema counts and ``schemaless_layers`` count the layers of the layer table at the offset
  (``dataset_as_of``);
- ``segments_created`` is one past the highest position of a segment created before the offset.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from projector.model import Dataset, SchemaRef

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def same_version(before: Dataset, after: Dataset) -> bool:
    """Whether a registration's touch leaves its dataset's version as it was: it changes the
    fields the layers give and the merged ``schema``, so the version stays unless the schema or
    the order of its digests changes."""
    return before.schema == after.schema and len(before.schema_refs) == len(after.schema_refs) and all(
        old.digest == new.digest for old, new in zip(before.schema_refs, after.schema_refs, strict=True))


def latest(updated_at: datetime, registered_at: int | None) -> datetime:
    """The later of a version's ``updated_at`` and the newest ``registered_at`` (the layer
    table's microseconds since the epoch; None: no registration) of the registrations since it."""
    if registered_at is None:
        return updated_at
    return max(updated_at, _EPOCH + timedelta(microseconds=registered_at))


def dataset_as_of(version: Dataset, layers: pa.Table, registered_at: int | None,
                  segments_created: int) -> Dataset:
    """The dataset a version (its layer counts zero) stands for at an offset: ``layers`` is its
    layer table there, ``registered_at`` the newest of its registrations since the version
    (``latest``), ``segments_created`` the segments created in it before the offset."""
    digests = layers["schema_sha256"]
    counts = {entry["values"].hex(): entry["counts"]
              for entry in pc.value_counts(digests.drop_null()).to_pylist()}
    refs = tuple(SchemaRef(ref.digest, counts[ref.digest]) for ref in version.schema_refs)
    return replace(version, updated_at=latest(version.updated_at, registered_at), schema_refs=refs,
                   schemaless_layers=digests.null_count, segments_created=segments_created)
