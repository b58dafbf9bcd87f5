"""A stack's URL (``Server.url()`` with ``protocol_port=None``) carries its bootstrap servers and
its store to ``CatalogClient(url)``."""

from __future__ import annotations

from pathlib import Path

import pytest

import settings
from stack import Server


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


def test_a_server_serves_rerun_s_protocol_unless_told_not_to(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a server starts an endpoint of Rerun's protocol on a free port (its ``url()`` is
    then the endpoint's: ``tests/integration/test_server_differential.py``); with
    ``protocol_port=None`` it starts none, and its ``url()`` is the stack's."""
    monkeypatch.setattr(Server, "start", lambda self: self)  # the arguments only: nothing starts
    assert Server(tmp_path / "served", bootstrap_servers="k1:9092").protocol_port == 0
    plain = Server(tmp_path / "plain", bootstrap_servers="k1:9092", protocol_port=None)
    assert plain.protocol_port is None and plain.protocol_url is None
    assert plain.url().startswith("strata://k1:9092?store=")
    assert settings.parse_stack_url(plain.url()) == ("k1:9092", plain.store)
