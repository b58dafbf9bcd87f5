"""Store locations that cannot work: each a one-line error naming what was tried and what to do,
within a bounded time, with nothing created or produced."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import psycopg
import pytest

import sdk
from postgres import EmbeddedPostgres
from projector import StoreUnavailableError, open_store
from stack import cli
from stack_tools import returns_within

NO_BROKER = "127.0.0.1:1"
"""Never contacted: the store is opened before any Kafka client."""


def assert_one_line(error: BaseException, *, secret: str | None = None) -> str:
    message = str(error)
    assert "\n" not in message, message
    assert secret is None or secret not in message, message
    return message


def test_an_unknown_scheme_is_a_value_error_naming_the_kinds_strata_opens(tmp_path):
    with pytest.raises(ValueError) as info:
        sdk.CatalogClient(NO_BROKER, "mysql://reader:s3cret@db/strata")
    message = assert_one_line(info.value, secret="s3cret")
    assert "unknown store scheme 'mysql'" in message and "postgresql://" in message
    with pytest.raises(ValueError, match="unknown store scheme"):
        sdk.Server(tmp_path / "stack", store="s3://bucket/store.db")
    assert not (tmp_path / "stack").exists()


def patient(url: str) -> str:
    """``url`` with a connect timeout (60 s) longer than the test's deadline for the call: a
    refusal must come from the server, not from waiting the timeout out."""
    return f"{url}{'&' if '?' in url else '?'}connect_timeout=60"


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port on this machine that takes TCP connections (into the kernel's backlog) and never
    answers: a server that cannot be reached in time, without sending anything off the machine."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def test_an_unreachable_server_fails_within_the_connect_timeout():
    with silent_port() as port, pytest.raises(StoreUnavailableError) as info:  # no hang
        returns_within(20, lambda: sdk.CatalogClient(
            NO_BROKER, f"postgresql://strata@127.0.0.1:{port}/strata?connect_timeout=2"))
    message = assert_one_line(info.value)
    assert f"postgresql://strata@127.0.0.1:{port}/strata" in message
    assert isinstance(info.value, sdk.StrataError)


def test_a_refused_connection_fails_at_once(postgres):
    url = patient(postgres.url("strata").replace(f":{postgres.port}/", ":1/"))
    with pytest.raises(StoreUnavailableError, match="refused"):  # refused, not waited out
        returns_within(30, lambda: open_store(url, read_only=True))


def test_a_missing_database_is_named(postgres):
    with pytest.raises(StoreUnavailableError, match='database "nowhere" does not exist'):
        open_store(postgres.url("nowhere"), read_only=True)


def test_a_client_on_a_database_without_a_store_says_to_start_the_projector(postgres):
    url = postgres.create_database()
    with pytest.raises(StoreUnavailableError, match="no strata store in this database yet.*--store"):
        sdk.CatalogClient(NO_BROKER, url)
    with psycopg.connect(url) as conn:  # the client created nothing
        assert conn.execute("select count(*) from pg_tables where schemaname = 'public'").fetchone() == (0,)


def test_a_wrong_password_is_refused_without_echoing_it():
    with EmbeddedPostgres(password="right-one") as server:
        url = server.create_database()
        open_store(url).close()  # the right password opens it
        wrong = patient(url.replace(":right-one@", ":wrong-one@"))
        with pytest.raises(StoreUnavailableError) as info:  # refused, not waited out
            returns_within(30, lambda: open_store(wrong, read_only=True))
        message = assert_one_line(info.value, secret="wrong-one")
        assert "password authentication failed" in message


def test_strata_rejections_on_an_unreachable_store_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["rejections", "--store", "postgresql://strata@127.0.0.1:1/strata"])
    assert_one_line(info.value)
    assert "postgresql://strata@127.0.0.1:1/strata" in str(info.value)
