"""The segment routes' query parameters, read from text into ``projector.views``' conditions:
``where`` (``COLUMN OP VALUE``, the value read by the column's Arrow type, or ``layer has NAME``)
and ``sort`` (``COLUMN``, or ``-COLUMN`` descending). Every problem is a ``SegmentQueryError``
saying what would fit; the routes answer it with a 400 naming the parameter."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from dashboard.segment import TIMESTAMP_COMPONENT
from projector.segment_filters import (
    OPERATORS,
    Condition,
    HasLayer,
    SegmentQueryError,
    SortKey,
    check_condition,
    check_operator,
    item_type,
    resolve_column,
)

SYNTAX = "COLUMN OP VALUE (e.g. tracking_good = true) or layer has NAME"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SYMBOLIC = re.compile(r"^(?P<column>[^<>=!~\s]+)\s*(?P<operator>[<>=!~]+)\s*(?P<value>.*)$", re.DOTALL)
_LAYER = re.compile(r"^layer\s+has\s+(?P<name>.+)$", re.IGNORECASE | re.DOTALL)


def unquote(text: str) -> str:
    """``text`` without one pair of enclosing single or double quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def split_condition(text: str) -> tuple[str, str, str]:
    """``COLUMN OP VALUE`` as its three parts, the operator unchecked: words apart
    (``scene_id >= 3``, ``building contains LI``) or symbols joined (``scene_id>=3``)."""
    parts = text.split(None, 2)
    if len(parts) == 3 and parts[1] in OPERATORS:
        return parts[0], parts[1], parts[2]
    symbolic = _SYMBOLIC.match(text)
    if symbolic:
        return symbolic["column"], symbolic["operator"], symbolic["value"].strip()
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise SegmentQueryError(f"{text!r} is not a condition: write {SYNTAX}")


def _date(field: pa.Field, text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SegmentQueryError(f"{field.name} holds timestamps ({field.type}): expected an ISO 8601 date "
                                f"such as 2023-07-10 or 2023-07-10T14:40:00Z, got {text!r}") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_value(field: pa.Field, text: str) -> Any:
    """``text`` as a value of the column ``field`` (of its items, for a list): ``true``/``false``,
    an integer, a number, a string (quotes optional), a timestamp as an ISO 8601 date (naive: UTC),
    a duration in seconds. Raises ``SegmentQueryError`` naming the type expected.

    >>> parse_value(pa.field("p", pa.list_(pa.bool_())), "true")
    True
    """
    kind = item_type(field)
    text = unquote(text.strip())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return text
    described = f"{field.name} ({field.type})"
    if pa.types.is_boolean(kind):
        if text.lower() not in ("true", "false"):
            raise SegmentQueryError(f"{described} is boolean: expected true or false, got {text!r}")
        return text.lower() == "true"
    if pa.types.is_integer(kind):
        component_type = (field.metadata or {}).get(b"rerun:component_type", b"").decode()
        if component_type == TIMESTAMP_COMPONENT and not _is_int(text):  # Rerun's: compared with dates too
            return (_date(field, text) - _EPOCH) // timedelta(microseconds=1) * 1000
        if not _is_int(text):
            raise SegmentQueryError(f"{described} holds integers: expected an integer, got {text!r}")
        return int(text)
    if pa.types.is_floating(kind):
        try:
            return float(text)
        except ValueError:
            raise SegmentQueryError(f"{described} holds numbers: expected a number, got {text!r}") from None
    if pa.types.is_decimal(kind):
        try:
            return Decimal(text)
        except InvalidOperation:
            raise SegmentQueryError(f"{described} holds decimals: expected a number, got {text!r}") from None
    if pa.types.is_timestamp(kind):
        when = _date(field, text)
        return when if kind.tz else when.replace(tzinfo=None)
    if pa.types.is_date(kind):
        return _date(field, text).date()
    if pa.types.is_duration(kind):
        try:
            return timedelta(seconds=float(text))
        except ValueError:
            raise SegmentQueryError(f"{described} holds durations: expected seconds (e.g. 7.5), "
                                    f"got {text!r}") from None
    raise SegmentQueryError(f"{described} cannot be compared: filter on another column")


def _is_int(text: str) -> bool:
    return re.fullmatch(r"[+-]?\d+", text) is not None


def parse_where(schema: pa.Schema, text: str) -> Condition | HasLayer:
    """One ``where`` parameter as a condition on a segment table of ``schema``, its column resolved
    (a property's short name to its full name) and its value typed.

    >>> parse_where(schema, "tracking_good = true")  # doctest: +SKIP
    Condition(column='property:quality:tracking_good', operator='=', value=True)
    """
    text = text.strip()
    layer = _LAYER.match(text)
    if layer:
        return HasLayer(unquote(layer["name"].strip()))
    column, operator, value = split_condition(text)
    field = resolve_column(schema, column)
    check_operator(field, operator)  # before the value: an unknown operator is the first problem
    condition = Condition(field.name, operator, parse_value(field, value))
    check_condition(schema, condition)
    return condition


def parse_sort(schema: pa.Schema, text: str) -> SortKey:
    """``COLUMN`` (ascending) or ``-COLUMN`` (descending) as a sort key on a segment table of
    ``schema``."""
    column = text.removeprefix("-").strip()
    if not column:
        raise SegmentQueryError(f"expected COLUMN or -COLUMN (descending), got {text!r}")
    return SortKey(resolve_column(schema, column).name, descending=text.startswith("-"))
