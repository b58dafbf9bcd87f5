"""A stack's URL (``Server.url()``) carries its bootstrap servers and its store to
``CatalogClient(url)``."""

from __future__ import annotations

import pytest

import settings


@pytest.mark.parametrize("store", ["/tmp/a b/store.db",
                                   "postgresql://reader:p%40ss@db:5432/strata?sslmode=verify-full"])
def test_a_stack_url_gives_back_what_it_was_made_of(store: str) -> None:
    url = settings.stack_url("k1:9092,k2:9092", store)
    assert url.startswith("strata://k1:9092,k2:9092?store=")
    assert settings.parse_stack_url(url) == ("k1:9092,k2:9092", store)


@pytest.mark.parametrize("url", ["127.0.0.1:9092", "rerun+http://127.0.0.1:51234",
                                 "strata://127.0.0.1:9092", "strata://?store=/x.db"])
def test_anything_else_is_refused_with_what_a_stack_url_looks_like(url: str) -> None:
    with pytest.raises(ValueError, match=r"not a strata stack URL: Server.url\(\) gives one"):
        settings.parse_stack_url(url)
