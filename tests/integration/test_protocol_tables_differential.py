"""Tables through rerun-sdk's own, unmodified ``rr.catalog.CatalogClient``, against Rerun's server
(``rr.server.Server``) and against strata's endpoint of Rerun's catalog protocol (a stack of
the module's own, served by ``protocol.serve``): the same calls, the same tables (rows compared sorted, as
Rerun's reader promises no order; schemas with their field metadata), the same error classes.
Where strata answers otherwise on purpose, the last test says how.

What differs, by design, and is not compared: ids, times, and where a table without a URL keeps
its rows (Rerun's server in a Lance directory of its own, strata in its log and projection).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import lance
import pyarrow as pa
import pytest
import rerun as rr

import sdk
from stack_tools import wait_until
from table_tools import INDEX, LABELS, batch, fields, rows, unique


def error_class(call: Callable[[], object]) -> str:
    """The name of the exception ``call`` raises ('none' if it raises none)."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the class is what is compared
        return type(exc).__name__
    return "none"


def test_created_tables_look_the_same_and_are_listed_alike(clients) -> None:
    name = unique("labels")
    seen = {}
    for server, client in clients.items():
        created = client.create_table(name, LABELS)
        found = client.get_table(name)
        assert created.name == found.name == name and created.id == found.id
        assert client.get_table(id=created.id).name == name
        assert name in client.table_names() and name in client.entry_names()
        assert name not in client.dataset_names()
        assert "__entries" in client.table_names(include_hidden=True)
        assert "__entries" not in client.table_names()
        seen[server] = (fields(created.arrow_schema()), str(created.kind), rows(created),
                        fields(client.get_table("__entries").arrow_schema()))
    assert seen["strata"] == seen["rerun"]
    assert seen["strata"][0] == fields(LABELS)


WRITES: list[tuple[str, Callable]] = [
    ("one batch", lambda t: t.append(batch([1], ["a"]))),
    ("a list of batches", lambda t: t.append([batch([2], ["b"]), batch([3], ["c"])])),
    ("a list of lists", lambda t: t.append([[batch([4], ["d"])], [batch([5], ["e"])]])),
    ("a reader", lambda t: t.append(pa.RecordBatchReader.from_batches(LABELS, [batch([6], ["f"])]))),
    ("named columns, one left out", lambda t: t.append(id=[7, 8], label=["g", "h"])),
    ("named scalars", lambda t: t.append(id=9, label="i")),
    ("an empty list", lambda t: t.append([])),
    ("an upsert of old and new keys", lambda t: t.upsert(id=[2, 10], label=["x", "new"], score=[0.5, 1.5])),
    ("an upsert of a batch", lambda t: t.upsert(batch([1, 11], ["y", "z"]))),
    ("an upsert of the table's own rows", lambda t: t.upsert(t.reader().collect())),
    ("an overwrite", lambda t: t.overwrite(id=[100, 101], label=["only", "these"])),
    ("an append after it", lambda t: t.append(batch([102], ["more"]))),
    ("an overwrite with nothing", lambda t: t.overwrite(batch([], []))),
    ("an append of many rows", lambda t: t.append(batch(list(range(20_000)), ["n"] * 20_000))),
]


def test_every_write_reads_back_the_same_rows(clients, own_client: sdk.CatalogClient) -> None:
    name = unique("labels")
    tables = {server: c.create_table(name, LABELS) for server, c in clients.items()}
    for what, write in WRITES:
        for table in tables.values():
            write(table)
        assert rows(tables["strata"]) == rows(tables["rerun"]), f"after {what}"
    assert rows(own_client.get_table(name)) == rows(tables["strata"])  # strata's own client reads the same
    query = f"SELECT label, count(*) AS n, sum(score) AS total FROM {name} GROUP BY label ORDER BY label"
    answers = [c.ctx.sql(query).to_arrow_table() for c in clients.values()]
    assert answers[0] == answers[1]


def error_classes(client: rr.catalog.CatalogClient) -> list[str]:
    """The classes of the errors of taken names, unknown names and ids, an id of another kind,
    a write to a deleted table, an invalid name, and a Lance table elsewhere than on the server."""
    name, dataset, gone = unique("labels"), unique("dataset"), unique("gone")
    client.create_table(name, LABELS)
    made = client.create_dataset(dataset)
    deleted = client.create_table(gone, LABELS)
    client.get_table(gone).delete()
    return [
        error_class(lambda: client.create_table(name, LABELS)),
        error_class(lambda: client.create_table(dataset, LABELS)),
        error_class(lambda: client.create_table("__entries", LABELS)),
        error_class(lambda: client.get_table(unique("missing"))),
        error_class(lambda: client.get_table(id="0" * 31 + "1")),
        error_class(lambda: client.get_table(id=made.id)),
        error_class(lambda: deleted.append(batch([1], ["a"]))),
        error_class(lambda: client.create_table("labels (v2)", LABELS)),
        error_class(lambda: client.register_table(unique("s3"), "s3://strata-none/t.lance")),
    ]


def test_taken_and_unknown_names_and_ids_raise_the_same_classes(clients) -> None:
    assert error_classes(clients["strata"]) == error_classes(clients["rerun"]) == [
        "AlreadyExistsError", "AlreadyExistsError", "AlreadyExistsError", "LookupError", "NotFoundError",
        "NotFoundError", "NotFoundError", "ValueError", "ValueError"]


def test_a_table_created_with_a_url_is_a_lance_table_under_it_on_both(clients, tmp_path: Path) -> None:
    urls = {}
    for server, client in clients.items():
        url = (tmp_path / server).as_uri()
        table = client.create_table(unique("copied"), LABELS, url)
        assert table.storage_url.startswith(f"{url}/")  # a directory Rerun's client names
        table.append(batch([1, 2, 3], ["a", "b", "c"]))
        table.upsert(batch([2], ["B"], [9.0]))
        assert rows(table) == [(1, "a", 1.0), (2, "B", 9.0), (3, "c", 3.0)]
        urls[server] = table.storage_url

    def lance_rows(url: str) -> list[tuple] | None:
        try:
            return sorted(tuple(row.values()) for row in lance.dataset(url).to_table().to_pylist())
        except (ValueError, OSError):  # no Lance dataset there yet
            return None

    expected = lance_rows(urls["rerun"])
    assert expected == [(1, "a", 1.0), (2, "B", 9.0), (3, "c", 3.0)]
    wait_until(lambda: lance_rows(urls["strata"]) == expected, 60, "strata's Lance copy to have Rerun's rows")
    assert lance.dataset(urls["strata"]).schema.field("id").metadata == INDEX


def test_the_same_registered_lance_table_reads_the_same(clients, tmp_path: Path) -> None:
    data = pa.table({"id": pa.array([3, 1, 2], pa.int64()), "label": ["c", "a", "b"]})
    lance.write_dataset(data, tmp_path / "labels.lance")
    url = (tmp_path / "labels.lance").as_uri()
    name = unique("lance")
    registered = {server: client.register_table(name, url) for server, client in clients.items()}
    assert rows(registered["strata"]) == rows(registered["rerun"]) == [(1, "a"), (2, "b"), (3, "c")]
    assert fields(registered["strata"].arrow_schema()) == fields(registered["rerun"].arrow_schema())
    assert registered["strata"].storage_url.rstrip("/") == registered["rerun"].storage_url.rstrip("/")


def test_a_table_s_default_blueprint_is_set_and_read_alike(clients) -> None:
    name = unique("labels")
    for client in clients.values():
        table = client.create_table(name, LABELS)
        assert table.default_blueprint() is None and table.blueprints() == []
        table.set_default_blueprint("layout_1")
        assert client.get_table(name).default_blueprint() == "layout_1"
        table.set_default_blueprint(None)
        assert client.get_table(name).default_blueprint() is None


def test_a_deleted_blueprint_dataset_is_refused_alike(clients) -> None:
    name = unique("labels")
    for client in clients.values():
        table = client.create_table(name, LABELS)
        table.blueprint_dataset().delete()
        with pytest.raises(ValueError, match="table blueprint dataset does not exist"):
            table.set_default_blueprint("layout_1")


INT32_ID = pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int32())})
EXTRA_COLUMN = pa.RecordBatch.from_pydict({"id": [1], "extra": ["x"]})


def test_where_strata_answers_otherwise_on_purpose(clients, tmp_path: Path) -> None:
    name = unique("labels")
    tables = {server: c.create_table(name, LABELS) for server, c in clients.items()}
    for table in tables.values():
        table.append(batch([1], ["kept"]))

    # Rows that do not fit the table's schema: strata refuses them before they reach the log with
    # INVALID_ARGUMENT (a ValueError naming the column); Rerun's storage engine with INTERNAL (a
    # RuntimeError). Neither writes anything.
    for write, message in ((lambda t: t.append(INT32_ID), "'id' has type int32.*int64"),
                           (lambda t: t.append(EXTRA_COLUMN), r"columns \['extra'\] are not in the table")):
        with pytest.raises(ValueError, match=message):
            write(tables["strata"])
        with pytest.raises(RuntimeError):
            write(tables["rerun"])

    # A non-nullable column left out: strata refuses it; Rerun's server too, with INTERNAL.
    with pytest.raises(ValueError, match="missing column 'id'"):
        tables["strata"].append(pa.RecordBatch.from_pydict({"label": ["no id"]}))
    with pytest.raises(RuntimeError):
        tables["rerun"].append(pa.RecordBatch.from_pydict({"label": ["no id"]}))

    # An upsert to a table without an index column: strata's ValueError says so; Rerun's engine
    # asks for join keys.
    plain = pa.schema([("id", pa.int64())])
    plain_name = unique("plain")
    with pytest.raises(ValueError, match="no index column"):
        clients["strata"].create_table(plain_name, plain).upsert(id=[1])
    with pytest.raises(RuntimeError, match="join keys"):
        clients["rerun"].create_table(plain_name, plain).upsert(id=[1])
    assert rows(tables["strata"]) == rows(tables["rerun"]) == [(1, "kept", 1.0)]

    # Duplicate keys in one upsert: strata keeps the last; Rerun's Lance merge inserts both.
    for table in tables.values():
        table.upsert(id=[5, 5], label=["first", "last"], score=[0.0, 0.0])
    assert [r for r in rows(tables["strata"]) if r[0] == 5] == [(5, "last", 0.0)]
    assert [r for r in rows(tables["rerun"]) if r[0] == 5] == [(5, "first", 0.0), (5, "last", 0.0)]

    # Registering a path with nothing there: strata's NotFoundError; Rerun's IO error (INTERNAL).
    missing = (tmp_path / "missing.lance").as_uri()
    found = {server: error_class(lambda c=c: c.register_table(unique("missing"), missing))
             for server, c in clients.items()}
    assert found == {"strata": "NotFoundError", "rerun": "RuntimeError"}
