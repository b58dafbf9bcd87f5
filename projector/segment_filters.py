"""Selecting segments from a segment table: conditions on its columns (``Condition``, with a
property named by the end of its name), having a layer (``HasLayer``), a sort key and a page
(``select_segments``), over the Arrow table as ``views.segment_table`` builds it. What does not fit
the table is a ``SegmentQueryError`` saying what would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from events import StrataError

OPERATORS = ("=", "!=", "<", "<=", ">", ">=", "contains")
"""The operators of a ``Condition``."""

_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}


class SegmentQueryError(StrataError, ValueError):
    """A condition or sort key that does not fit the segment table: an unknown or ambiguous column,
    an operator its type does not take, a value not of its type. The message says what would fit."""


@dataclass(frozen=True)
class Condition:
    """``column operator value``: a segment matches if its value in ``column`` compares so with
    ``value`` (a Python value of the column's type); in a list column, if any of its items does. A
    null never matches. ``contains`` is a substring of a string, an item of a list."""

    column: str
    operator: str
    value: Any


@dataclass(frozen=True)
class HasLayer:
    """A segment matches if it has a layer named ``name``."""

    name: str


@dataclass(frozen=True)
class SortKey:
    """Sort by ``column`` (a list column by its first item), nulls last in either direction."""

    column: str
    descending: bool = False


@dataclass(frozen=True)
class SegmentPage:
    """The rows of one page of the selected segments, and how many segments were selected."""

    rows: pa.Table
    total: int


def _is_list(kind: pa.DataType) -> bool:
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind))


def item_type(field: pa.Field) -> pa.DataType:
    """The type a condition's value has in ``field``: its items' type for a list column."""
    return field.type.value_type if _is_list(field.type) else field.type


def resolve_column(schema: pa.Schema, name: str) -> pa.Field:
    """The field of the column ``name`` names: a column's full name, or the end of a property's
    name after a ``:`` (``tracking_good``, ``quality:tracking_good``) if only one property ends so.

    >>> resolve_column(table.schema, "tracking_good").name  # doctest: +SKIP
    'property:quality:tracking_good'

    Raises ``SegmentQueryError`` naming the columns, or the properties the short name fits.
    """
    if name in schema.names:
        return schema.field(name)
    fits = [n for n in schema.names if n.startswith("property:") and n.endswith(f":{name}")]
    if len(fits) == 1:
        return schema.field(fits[0])
    if fits:
        raise SegmentQueryError(f"{name!r} is the short name of several properties ({', '.join(fits)}): "
                                f"write the full name")
    raise SegmentQueryError(f"no column {name!r} (columns: {', '.join(schema.names)}; a property "
                            f"may be named by its last part, e.g. tracking_good)")


def _kind_of(kind: pa.DataType) -> str | None:
    """What a type is to a condition: ``boolean``, ``string``, ``ordered`` (numbers, times), or None
    (binary, nested: no condition fits)."""
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_temporal(kind)
            or pa.types.is_decimal(kind)):
        return "ordered"
    return None


def check_operator(field: pa.Field, operator: str) -> None:
    """Raises ``SegmentQueryError`` if ``operator`` is none of ``OPERATORS`` or does not fit the
    type of ``field``: order on a boolean, ``contains`` on a number or a time, anything on binary
    or nested values."""
    if operator not in OPERATORS:
        raise SegmentQueryError(f"unknown operator {operator!r} (operators: {', '.join(OPERATORS)})")
    kind = _kind_of(item_type(field))
    if kind is None:
        raise SegmentQueryError(f"{field.name} ({field.type}) cannot be compared: filter on another column")
    if kind == "boolean" and operator not in ("=", "!=", "contains"):
        raise SegmentQueryError(f"{field.name} is boolean ({field.type}): use = or != with true or false")
    if operator == "contains" and kind != "string" and not _is_list(field.type):
        raise SegmentQueryError(f"contains takes a string column (a substring) or a list column (an "
                                f"item); {field.name} is {field.type}: use =, !=, <, <=, > or >=")


def check_condition(schema: pa.Schema, condition: Condition | HasLayer) -> None:
    """Raises ``SegmentQueryError`` if ``condition`` does not fit a segment table of ``schema``: an
    unknown or ambiguous column, an operator its type does not take, a value not of its type."""
    if isinstance(condition, Condition):
        field = resolve_column(schema, condition.column)
        check_operator(field, condition.operator)
        _scalar(field, condition.value)


def _scalar(field: pa.Field, value: Any) -> pa.Scalar:
    try:
        return pa.scalar(value, type=item_type(field))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        raise SegmentQueryError(f"{value!r} is not a value of {field.name} ({item_type(field)})") from None


def _matches(values: pa.Array, operator: str, value: pa.Scalar, *, substring: bool) -> pa.Array:
    """Per value, whether it matches (null for a null)."""
    if operator == "contains":
        return pc.match_substring(values, value.as_py()) if substring else pc.equal(values, value)
    return _COMPARE[operator](values, value)


def _condition_mask(table: pa.Table, condition: Condition | HasLayer) -> np.ndarray:
    if isinstance(condition, HasLayer):
        condition = Condition("rerun_layer_names", "contains", condition.name)
    field = resolve_column(table.schema, condition.column)
    check_operator(field, condition.operator)
    value = _scalar(field, condition.value)
    column = table.column(field.name).combine_chunks()
    if not _is_list(field.type):
        matched = _matches(column, condition.operator, value, substring=True).fill_null(False)
        return np.asarray(matched.to_numpy(zero_copy_only=False), bool)
    hits = _matches(pc.list_flatten(column), condition.operator, value, substring=False).fill_null(False)
    rows = pc.list_parent_indices(column).to_numpy()[hits.to_numpy(zero_copy_only=False)]
    mask = np.zeros(table.num_rows, bool)
    mask[rows] = True
    return mask


def _sort_values(table: pa.Table, field: pa.Field) -> pa.Array:
    """The values a column sorts by: a list's first item (null for an empty or null list)."""
    column = table.column(field.name).combine_chunks()
    if not _is_list(field.type):
        return column
    firsts = pc.list_slice(column, 0, 1)
    at = np.full(table.num_rows, -1, np.int64)
    at[pc.list_parent_indices(firsts).to_numpy()] = np.arange(len(pc.list_flatten(firsts)))
    return pc.list_flatten(firsts).take(pa.array(at, pa.int64(), mask=at < 0))


def select_segments(table: pa.Table, conditions: tuple[Condition | HasLayer, ...] = (), *,
                    sort: SortKey | None = None, offset: int = 0, limit: int | None = None) -> SegmentPage:
    """The rows of ``table`` (a segment table) matching every one of ``conditions``, sorted by
    ``sort`` (stable: ties keep the table's order; default: the table's order), from ``offset``,
    at most ``limit``; and how many matched.

    >>> select_segments(table, (Condition("tracking_good", "=", True), HasLayer("quality")),
    ...                 sort=SortKey("rerun_segment_id"), limit=100)  # doctest: +SKIP

    Raises ``SegmentQueryError`` for a column, operator or value that does not fit the table.
    """
    mask = np.ones(table.num_rows, bool)
    for condition in conditions:
        mask &= _condition_mask(table, condition)
    selected = table.filter(pa.array(mask, pa.bool_())) if not mask.all() else table
    if sort is not None:
        field = resolve_column(table.schema, sort.column)
        order = "descending" if sort.descending else "ascending"
        try:
            indices = pc.sort_indices(pa.table({"key": _sort_values(selected, field)}),
                                      sort_keys=[("key", order, "at_end")])
        except pa.ArrowNotImplementedError:
            raise SegmentQueryError(f"{field.name} ({field.type}) cannot be sorted: sort by another "
                                    f"column") from None
        selected = selected.take(indices)
    return SegmentPage(selected.slice(offset, limit), selected.num_rows)
