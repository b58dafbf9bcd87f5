"""Which names and identifiers the catalog accepts (events/names.py)."""

from __future__ import annotations

import pytest

from events.names import (
    MAX_ID_LENGTH,
    MAX_NAME_LENGTH,
    check_dataset_name,
    check_id,
    check_layer_name,
    check_table_name,
    check_tag_name,
)


@pytest.mark.parametrize("name", [
    "droid", "DROID_raw-2024.v1", "droid:raw (2024)", "a b", "[x]{y}(z)", "0", "n" * MAX_NAME_LENGTH])
def test_valid_dataset_names_are_returned_unchanged(name):
    assert check_dataset_name(name) == name


@pytest.mark.parametrize("bad", ["/", "\\", "é", "ü", "🤖", "\t", "\n", "#", "*", "?", ",", "'", '"', "@",
                                 "|", "<", "\x00", "=", "+", "~", "!", "%", "&", ";"])
def test_each_bad_character_is_named_with_its_position(bad):
    name = f"ok {bad}x"
    with pytest.raises(ValueError) as info:
        check_dataset_name(name)
    message = str(info.value)
    assert f"invalid character {bad!r} at position 3" in message
    assert "ASCII letters" in message


def test_the_first_bad_character_is_the_one_named():
    with pytest.raises(ValueError, match="'/' at position 1"):
        check_dataset_name("a/b#c")


@pytest.mark.parametrize("name, words", [
    ("", "must not be empty"),
    ("n" * (MAX_NAME_LENGTH + 1), f"at most {MAX_NAME_LENGTH} characters, got {MAX_NAME_LENGTH + 1}"),
    (None, "must be a string, got NoneType"),
    (b"droid", "must be a string, got bytes"),
])
def test_empty_too_long_or_not_a_string(name, words):
    with pytest.raises(ValueError) as info:
        check_dataset_name(name)
    assert words in str(info.value)


def test_layer_names_allow_any_character_but_not_empty_or_too_long():
    assert check_layer_name("base/é 🤖") == "base/é 🤖"
    assert check_layer_name("n" * MAX_NAME_LENGTH) == "n" * MAX_NAME_LENGTH
    for bad in ("", None, "n" * (MAX_NAME_LENGTH + 1)):
        with pytest.raises(ValueError, match="layer name"):
            check_layer_name(bad)


def test_ids_and_urls_up_to_the_limit():
    assert check_id("segment_id", "s" * MAX_ID_LENGTH) == "s" * MAX_ID_LENGTH
    with pytest.raises(ValueError, match=f"storage_url has at most {MAX_ID_LENGTH} characters"):
        check_id("storage_url", "u" * (MAX_ID_LENGTH + 1))
    with pytest.raises(ValueError, match="blueprint_id must be a non-empty string"):
        check_id("blueprint_id", "")


@pytest.mark.parametrize("name", ["labels", "_runs_2024", "runs.labels", "my_catalog.my_schema.labels"])
def test_table_names_are_sql_identifiers_with_an_optional_catalog_and_schema(name):
    assert check_table_name(name) == name


@pytest.mark.parametrize(("name", "words"), [
    ("created-table", "Unexpected token in identifier: -"), ("a b", "Unexpected token in identifier:  "),
    ("2024_runs", "starts with a letter or _, not 2"), ("runs..labels", "starts with a letter or _"),
    ("a.b.c.d", "at most catalog.schema.table"), ("bad/name", "invalid character '/'")])
def test_table_names_that_sql_cannot_name_say_why(name, words):
    with pytest.raises(ValueError, match="sql parser error|invalid character") as info:
        check_table_name(name)
    assert words in str(info.value)


@pytest.mark.parametrize(("name", "words"), [
    ("", "must not be empty"), ("1200", "is a number"), (" 7 ", "is a number"), ("a\tb", "invalid character"),
    (7, "must be a string"),
])
def test_tag_names_are_dataset_names_that_are_not_numbers(name, words):
    with pytest.raises(ValueError, match=words):
        check_tag_name(name)
    assert check_tag_name("train-2026-11-25 (v2)") == "train-2026-11-25 (v2)"
