"""Which names and identifiers the catalog accepts, and how large a layer's properties may be.
Used by the SDK before anything is produced and by the fold for commands from any producer, so
both give the same answer."""

from __future__ import annotations

import string

MAX_NAME_LENGTH = 180
"""Entry (dataset, table) and layer names, in characters."""
MAX_ID_LENGTH = 1024
"""Segment ids, blueprint ids and storage URLs, in characters."""
MAX_PROPERTIES_BYTES = 256 * 1024
"""A layer's serialized properties, at most."""
RECORDING_SUFFIXES = (".rrd",)
"""The files a directory of recordings is made of: what ``register_prefix`` and a server's
``datasets=`` register."""
NAME_PUNCTUATION = "_-.: ()[]{}"
_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + NAME_PUNCTUATION)
_IDENTIFIER_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_")


def check_dataset_name(name: object) -> str:
    """Return ``name`` if it is a valid dataset name, else raise ``ValueError`` saying why.

    Valid: 1 to 180 ASCII letters, digits, spaces, ``_ - . :`` and brackets.

    >>> check_dataset_name("droid:raw (2024)")
    'droid:raw (2024)'
    >>> check_dataset_name("droid/raw")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: dataset name 'droid/raw' has an invalid character '/' at position 5: ...
    """
    return _check_entry_name("dataset", name)


def check_table_name(name: object) -> str:
    """Return ``name`` if it is a valid table name, else raise ``ValueError`` saying why.

    A table is queried by name in SQL, so its name is an SQL identifier, as in Rerun: ASCII
    letters, digits and ``_``, not starting with a digit, with up to two dots naming its
    DataFusion catalog and schema (``my_catalog.my_schema.labels``).

    >>> check_table_name("runs.labels")
    'runs.labels'
    >>> check_table_name("created-table")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: table name 'created-table' is not an SQL identifier (sql parser error: ...: -)...
    """
    checked = _check_entry_name("table", name)
    parts = checked.split(".")
    reasons = [f"Unexpected token in identifier: {c}" for part in parts for c in part
               if c not in _IDENTIFIER_CHARACTERS]
    reasons += [f"an identifier starts with a letter or _, not {part[:1] or 'nothing'}" for part in parts
                if not part or part[0].isdigit()]
    if len(parts) > 3:
        reasons.append("at most catalog.schema.table")
    if reasons:
        raise ValueError(f"table name {checked!r} is not an SQL identifier (sql parser error: {reasons[0]}): "
                         "use ASCII letters, digits and _, and dots only between a catalog, a schema "
                         "and the table's own name ('my_catalog.my_schema.labels')")
    return checked


def _check_entry_name(kind: str, name: object) -> str:
    if not isinstance(name, str):
        raise ValueError(f"a {kind} name must be a string, got {type(name).__name__}")
    if not name:
        raise ValueError(f"a {kind} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"a {kind} name has at most {MAX_NAME_LENGTH} characters, got {len(name)}")
    for position, character in enumerate(name):
        if character not in _NAME_CHARACTERS:
            raise ValueError(
                f"{kind} name {name!r} has an invalid character {character!r} at position "
                f"{position}: use ASCII letters, digits, spaces, _ - . : and brackets")
    return name


def check_layer_name(name: object) -> str:
    """Return ``name`` if it is a valid layer name (1 to 180 characters), else raise ``ValueError``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a layer name must be a non-empty string, got {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"a layer name has at most {MAX_NAME_LENGTH} characters, got {len(name)}")
    return name


def check_tag_name(name: object) -> str:
    """Return ``name`` if it is a valid tag name, else raise ``ValueError`` saying why: the
    characters of a dataset name (``train-2026-11-25``, ``model v3 (March)``), and not a number,
    so that ``as_of("1200")`` cannot be mistaken for an offset."""
    checked = _check_entry_name("tag", name)
    if checked.strip().isdigit():
        raise ValueError(f"tag name {checked!r} is a number: give it a letter, or pass the offset as an int")
    return checked


def check_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a valid segment id, blueprint id or URL, else raise ``ValueError``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{kind} must be a non-empty string, got {value!r}")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{kind} has at most {MAX_ID_LENGTH} characters, got {len(value)}")
    return value
