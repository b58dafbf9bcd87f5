"""What a search index may index: the rules the fold decides ``CreateSearchIndex`` by, and the
reading of a column's instances that the indexes' follower (``search``) shares with them.

A component column of a dataset holds, per row, a list of instances. A vector index takes a
column whose instances are fixed-size lists of floats (an embedding per frame; bytes for the
``Hamming`` metric, 8 bits each); a full-text index a column of strings (a ``TextDocument``, a
language instruction). Its rows carry the values of one timeline of the dataset; a static
column's rows carry none (null).
"""

from __future__ import annotations

import pyarrow as pa

from events import CreateSearchIndex, DistanceMetric, SearchIndexKind

BASE_TOKENIZERS = ("simple", "whitespace", "raw")
"""Full text: ``simple`` splits on whitespace and punctuation and lowercases, ``whitespace``
splits on whitespace only, ``raw`` keeps each value whole."""

_KIND = b"rerun:kind"
_ENTITY_PATH = b"rerun:entity_path"
_COMPONENT = b"rerun:component"
_IS_STATIC = b"rerun:is_static"


def column_name(entity_path: str, component: str) -> str:
    """The column's name in the dataset's schema (and Rerun's selector): ``/camera:embedding``."""
    return f"{entity_path}:{component}"


def find_column(schema: pa.Schema, entity_path: str, component: str) -> pa.Field | None:
    """The component column of ``entity_path`` and ``component`` in a dataset's schema."""
    for field in schema:
        meta = field.metadata or {}
        if (meta.get(_KIND) == b"data" and meta.get(_ENTITY_PATH, b"").decode() == entity_path
                and meta.get(_COMPONENT, b"").decode() == component):
            return field
    return None


def timelines(schema: pa.Schema) -> list[str]:
    """The dataset's timelines, in schema order."""
    return [f.name for f in schema if (f.metadata or {}).get(_KIND) == b"index"]


def is_static(field: pa.Field) -> bool:
    return (field.metadata or {}).get(_IS_STATIC) == b"true"


def instance_type(field: pa.Field) -> pa.DataType:
    """The type of one instance of a component column (the item of its list type)."""
    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        return field.type.value_type
    return field.type


def _vector_type_problem(value: pa.DataType, metric: DistanceMetric) -> str | None:
    if not pa.types.is_fixed_size_list(value):
        return "its instances are not fixed-size lists (a vector index takes one embedding per instance)"
    item = value.value_type
    if metric is DistanceMetric.HAMMING:
        if item != pa.uint8():
            return (f"its vectors are of {item}: the Hamming metric takes vectors of bytes (uint8, 8 bits "
                    "each); use L2, Cosine or Dot for floats")
    elif not pa.types.is_floating(item):
        return f"its vectors are of {item}, not floats (the Hamming metric takes vectors of bytes)"
    return None


def refusal(schema: pa.Schema, command: CreateSearchIndex) -> str | None:
    """Why ``command`` cannot index a dataset of ``schema``, None if it can: an unknown column, a
    column of the wrong type for the index, an unknown timeline, or a bad parameter."""
    name = column_name(command.entity_path, command.component)
    field = find_column(schema, command.entity_path, command.component)
    if field is None:
        return f"the dataset has no component column {name!r}: see dataset.schema() for its columns"
    known = timelines(schema)
    if command.time_index not in known:
        listed = ", ".join(repr(t) for t in known) or "none"
        return f"the dataset has no timeline {command.time_index!r} (its timelines: {listed})"
    value = instance_type(field)
    if command.kind is SearchIndexKind.FULL_TEXT:
        if not (pa.types.is_string(value) or pa.types.is_large_string(value)):
            return f"column {name!r} holds {value}, not strings: a full-text index takes a column of strings"
        if command.base_tokenizer not in BASE_TOKENIZERS:
            return (f"base_tokenizer {command.base_tokenizer!r} is not one of "
                    f"{', '.join(repr(t) for t in BASE_TOKENIZERS)}")
        return None
    problem = _vector_type_problem(value, command.distance_metric)
    if problem is not None:
        return f"column {name!r} cannot take a vector index: {problem}"
    for parameter in ("num_partitions", "target_partition_num_rows", "num_sub_vectors"):
        given = getattr(command, parameter)
        if given is not None and given < 1:
            return f"{parameter}={given}: give at least 1, or None for the default"
    return None
