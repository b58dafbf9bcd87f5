"""The dataset schema: every layer's Arrow schema merged column by column.

A column that appears in several layers must have compatible types: the same type, or one side
``null``, or structs whose common fields are compatible (the merge has the union of fields), or
lists of compatible items (fixed-size lists of the same length). Nullability widens. Anything
else (int32 vs int64, float64 vs float32, a dictionary vs a plain column, ...) is a conflict.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import zlib

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
    data: bytes = schema.serialize().to_pybytes()
    return data


def canonical(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every metadata map in key order, so that equal schemas serialize to equal
    bytes and get one digest (rerun writes field metadata in no fixed order)."""
    return pa.schema([_canonical_field(f) for f in schema], metadata=_sorted(schema.metadata))


_RECENT: collections.deque[tuple[pa.Schema, bytes]] = collections.deque(maxlen=4)


def canonical_bytes(schema: pa.Schema) -> bytes:
    """``serialize(canonical(schema))``, remembered for the last few distinct schemas. Registering
    a dataset's files meets the same schema again and again; comparing it with a remembered one
    (``equals`` compares metadata as maps, in C++) costs a third of canonicalising it in Python
    (134 against 446 us for a DROID-like episode's 14 KB schema)."""
    for known, data in tuple(_RECENT):
        if schema is known or schema.equals(known, check_metadata=True):
            return data
    data = serialize(canonical(schema))
    _RECENT.appendleft((schema, data))
    return data


def _canonical_field(field: pa.Field) -> pa.Field:
    t = field.type
    if pa.types.is_struct(t):
        t = pa.struct([_canonical_field(child) for child in t])
    elif pa.types.is_fixed_size_list(t):
        t = pa.list_(_canonical_field(t.value_field), t.list_size)
    elif pa.types.is_large_list(t):
        t = pa.large_list(_canonical_field(t.value_field))
    elif pa.types.is_list(t):
        t = pa.list_(_canonical_field(t.value_field))
    return pa.field(field.name, t, field.nullable, _sorted(field.metadata))


def _sorted(metadata: dict[bytes, bytes] | None) -> dict[bytes, bytes] | None:
    return dict(sorted(metadata.items())) if metadata else None


def properties_parts(table: pa.Table) -> tuple[bytes, bytes]:
    """A one-row properties table as envelope v5 carries it: its schema message (to define once,
    by digest) and its record batch message, zlib-compressed. ``read_properties`` undoes it."""
    [batch] = table.combine_chunks().to_batches()
    return canonical_bytes(table.schema), zlib.compress(batch.serialize().to_pybytes())


def read_properties(schema_bytes: bytes, compressed_batch: bytes, *,
                    limit: int | None = None) -> pa.RecordBatch:
    """The properties row sent as its schema's message and a zlib-compressed record batch message.

    Raises ``ValueError`` if the batch is not zlib data, holds more than ``limit`` bytes, or is not
    a record batch of that schema. The check is structural (field nodes and buffers), as Arrow's
    own reader makes it: a batch of another schema with the same layout reads as this one.
    """
    inflater = zlib.decompressobj()
    try:
        batch = inflater.decompress(compressed_batch, limit or 0)
    except zlib.error as exc:
        raise ValueError(f"properties_batch is not zlib-compressed data: {exc}") from None
    if inflater.unconsumed_tail:
        raise ValueError(f"properties_batch holds more than the {limit} bytes of properties a "
                         "layer may have; store large values in the recording's data instead")
    if not inflater.eof:
        raise ValueError("properties_batch is truncated: its zlib stream does not end")
    try:
        row = pa.ipc.read_record_batch(pa.py_buffer(batch), parse(schema_bytes))
        row.validate(full=True)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"properties_batch is not an Arrow record batch of its schema: {exc}") from None
    return row


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
        if pa.types.is_fixed_size_list(old):
            # Rerun's reader adapts variable lists but not fixed-size ones: like its server,
            # accept only the identical type (same size, item type and item nullability).
            raise SchemaConflict(
                f"schema conflict in column {name!r}: fixed-size lists must have the same type in "
                f"every layer; the dataset has {old}, this layer {new}")
        item = _merge_field(old.value_field, new.value_field, f"{name}[].")
        return pa.large_list(item) if pa.types.is_large_list(old) else pa.list_(item)
    raise SchemaConflict(f"schema conflict in column {name!r}: the dataset has {old}, this layer {new}")


def _list_kind(t: pa.DataType) -> str | None:
    for kind, test in (("list", pa.types.is_list), ("large_list", pa.types.is_large_list),
                       ("fixed_size_list", pa.types.is_fixed_size_list)):
        if test(t):
            return kind
    return None
