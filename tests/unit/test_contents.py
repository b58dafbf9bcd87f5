"""Entity path filters: strata's column selection against rerun-sdk's own query engine.

``recordings.selects`` decides which columns a dataset reader has; rerun's ``ChunkStore.reader``
decides which rows of data a segment gives. Both must agree on every expression, so each case here
runs the expressions through both on one recording and compares the entities.
"""

from __future__ import annotations

import pytest
import rerun as rr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rerun.chunk import ChunkStore, RrdReader

from profiles import examples
from recordings import expressions, selects

ENTITIES = ["/a", "/a/b", "/a/b/c", "/ab", "/x", "/x/y", "/__properties", "/__properties/episode"]
"""The recording's entities; rerun adds ``/__properties`` (its recording info) itself."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ChunkStore:
    path = tmp_path_factory.mktemp("contents") / "entities.rrd"
    rec = rr.RecordingStream("strata-contents", recording_id="entities")
    rec.save(path)
    rec.set_time("step", sequence=1)
    for entity in ENTITIES[:-2]:
        rec.log(entity, rr.Scalars([1.0]))
    rec.send_property("episode", rr.AnyValues(success=True))
    rec.flush()
    del rec
    return RrdReader(path).stream().collect()


def rerun_entities(store: ChunkStore, exprs: list[str]) -> set[str]:
    table = store.reader("step", contents=exprs).to_arrow_table()
    return {(f.metadata or {}).get(b"rerun:entity_path", b"").decode() for f in table.schema} - {""}


@pytest.mark.parametrize("exprs", [
    ["/**"],
    ["/a"],
    ["/a/**"],
    ["/a/**", "-/a/b/**", "/a/b/c"],
    ["/a/**", "-/a/b"],
    ["/**", "-/a/**"],
    ["/a/**", "-/a/**"],
    ["-/a/**", "/a/**"],
    ["+ /x/**"],
    ["/__properties/**"],
    ["/**", "/__properties/episode"],
    ["/**", "-/__properties/**"],
    [],
    ["__properties/**"],
    ["__properties"],
    ["a"],
    ["a/**"],
    ["+a/b"],
    ["-a"],
    ["/**", "-a/**"],
    ["/**", "- a/b"],
    ["a/b/"],
    ["a//b/**"],
    ["x/**", "-/x/y"],
    [""],
    ["-"],
    ["**"],
    ["-x", "/x"],
    ["/x", "-x"],
    ["-/a/**", "a/**"],
    ["x/", "-x"],
    ["a//b", "-a/b"],
    ["x", "- x"],
    ["a /a/b"],
    ["-a/b /a/**"],
    ["a\n/x"],
    [" a / b "],
    ["/** - a/b + a/b/c"],
    ["/**", "-", "a"],
    ["+ /x/** -"],
], ids=repr)
def test_selects_what_rerun_reads(store: ChunkStore, exprs: list[str]) -> None:
    assert {e for e in ENTITIES if selects([exprs], e)} == rerun_entities(store, exprs)


RULES = st.builds(lambda sign, path, subtree: f"{sign}{path}{'/**' if subtree else ''}",
                  st.sampled_from(["", "+", "-", "- ", " +"]),
                  st.sampled_from(["", "/a", "/a/b", "/ab", "/x", "/__properties", "a", "a/b", "x",
                                   "__properties", "x/", "/a//b", " a/b"]).map(lambda p: p or "/"),
                  st.booleans())


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(exprs=st.lists(st.one_of(RULES, st.sampled_from(["a /x/**", "-a/b x", "/** - a"])), max_size=4))
def test_random_rules_select_what_rerun_reads(store: ChunkStore, exprs: list[str]) -> None:
    exprs = [e.replace("//**", "/**") for e in exprs]
    assert {e for e in ENTITIES if selects([exprs], e)} == rerun_entities(store, exprs)


def test_several_calls_keep_what_every_call_selects() -> None:
    groups = [["/a/**"], ["/**", "-/a/b/**"]]
    assert [e for e in ENTITIES if selects(groups, e)] == ["/a"]


@pytest.mark.parametrize("bad", [3, None, b"/points"])
def test_malformed_expressions_are_value_errors(bad: object) -> None:
    with pytest.raises(ValueError, match="is a string"):
        expressions([bad])


@pytest.mark.parametrize(("bare", "rooted"), [
    ("points/**", "/points/**"), ("points", "/points"), ("-points", "-/points"),
    ("+ points/**", "+ /points/**"), ("__properties/**", "/__properties/**"),
])
def test_a_path_without_its_leading_slash_is_the_same_path(bare: str, rooted: str) -> None:
    assert expressions([bare]) == (bare,)
    entities = ["/points", "/points/child", "/pointsx", "/__properties", "/__properties/episode"]
    assert [e for e in entities if selects([["/**", bare]], e)] == \
        [e for e in entities if selects([["/**", rooted]], e)]
    assert [e for e in entities if selects([[bare]], e)] == [e for e in entities if selects([[rooted]], e)]
    assert any(selects([[bare]], e) or not selects([["/**", bare]], e) for e in entities)
