"""The dataset schema: every layer's Arrow schema merged column by column.

A column that appears in several layers must have compatible types: the same type, or one side
``null``, or structs whose common fields are compatible (the merge has the union of fields), or
lists of compatible items (fixed-size lists of the same length). Nullability widens. Anything
else (int32 vs int64, float64 vs float32, a dictionary vs a plain column, ...) is a conflict.
"""

from __future__ import annotations

import functools
import hashlib

import pyarrow as pa
import pyarrow.ipc


class SchemaConflict(ValueError):
    """Two layers disagree on a column's type; the message names the column and both types."""


def digest(schema_bytes: bytes) -> str:
    """The content address of a serialized schema (hex SHA-256)."""
    return hashlib.sha256(schema_bytes).hexdigest()


@functools.lru_cache(maxsize=1024)
def parse(schema_bytes: bytes) -> pa.Schema:
    """An Arrow IPC schema message as a schema. Raises ``SchemaConflict`` if it is not one."""
    try:
        return pa.ipc.read_schema(pa.py_buffer(schema_bytes))
    except (pa.ArrowInvalid, OSError) as exc:
        raise SchemaConflict(f"the layer's schema is not an Arrow IPC schema message: {exc}") from exc


def serialize(schema: pa.Schema) -> bytes:
    return schema.serialize().to_pybytes()


@functools.lru_cache(maxsize=1024)
def merge_serialized(dataset_schema: bytes, layer_schema: bytes) -> bytes:
    """``merge`` on serialized schemas; empty bytes stand for "no schema"."""
    if not layer_schema or layer_schema == dataset_schema:
        return dataset_schema
    if not dataset_schema:
        parse(layer_schema)  # reject what is not a schema
        return layer_schema
    return serialize(merge(parse(dataset_schema), parse(layer_schema)))


def merge(dataset: pa.Schema, layer: pa.Schema) -> pa.Schema:
    """The dataset schema with the layer's columns added; ``SchemaConflict`` if they clash."""
    fields = _merge_fields(list(dataset), list(layer), path="")
    return pa.schema(fields, metadata=dataset.metadata or layer.metadata)


def _merge_fields(old: list[pa.Field], new: list[pa.Field], path: str) -> list[pa.Field]:
    by_name = {f.name: f for f in new}
    merged = []
    for field in old:
        other = by_name.pop(field.name, None)
        merged.append(field if other is None else _merge_field(field, other, path))
    merged.extend(f for f in new if f.name in by_name)
    return merged


def _merge_field(old: pa.Field, new: pa.Field, path: str) -> pa.Field:
    name = f"{path}{old.name}"
    return pa.field(old.name, _merge_type(old.type, new.type, name),
                    nullable=old.nullable or new.nullable, metadata=old.metadata or new.metadata)


def _merge_type(old: pa.DataType, new: pa.DataType, name: str) -> pa.DataType:
    if old == new:
        return old
    if pa.types.is_null(old):
        return new
    if pa.types.is_null(new):
        return old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        return pa.struct(_merge_fields(list(old), list(new), f"{name}."))
    if _list_kind(old) is not None and _list_kind(old) == _list_kind(new):
        if pa.types.is_fixed_size_list(old) and old.list_size != new.list_size:
            raise SchemaConflict(
                f"schema conflict in column {name!r}: fixed-size lists of {old.list_size} and "
                f"{new.list_size} items")
        item = _merge_field(old.value_field, new.value_field, f"{name}[].")
        if pa.types.is_fixed_size_list(old):
            return pa.list_(item, old.list_size)
        return pa.large_list(item) if pa.types.is_large_list(old) else pa.list_(item)
    raise SchemaConflict(f"schema conflict in column {name!r}: the dataset has {old}, this layer {new}")


def _list_kind(t: pa.DataType) -> str | None:
    for kind, test in (("list", pa.types.is_list), ("large_list", pa.types.is_large_list),
                       ("fixed_size_list", pa.types.is_fixed_size_list)):
        if test(t):
            return kind
    return None
