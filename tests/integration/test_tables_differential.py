"""strata's table entries against Rerun's own catalog server, call for call.

Each test makes the same calls on a strata table (the real broker and Spark projector) and on a
table of ``rr.server.Server``, and asserts the same schema (with Rerun's field metadata), the same
rows after sorting, and the same errors. Rerun's reader returns rows in no promised order, so
rows are compared sorted. Where strata differs on purpose, the last test says how.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import lance
import pyarrow as pa
import pytest

import sdk
from stack_tools import wait_until
from table_tools import INDEX, LABELS, batch, fields, rows, unique


class Pair:
    """One table of the same name and schema on strata and on Rerun's server."""

    def __init__(self, strata: sdk.TableEntry, rerun) -> None:
        self.strata = strata
        self.rerun = rerun

    def both(self, call: Callable) -> None:
        call(self.strata)
        call(self.rerun)

    def rows(self) -> tuple[list[tuple], list[tuple]]:
        return rows(self.strata), rows(self.rerun)


@pytest.fixture
def pair(client: sdk.CatalogClient, rerun_client) -> Pair:
    name = unique("labels")
    return Pair(client.create_table(name, LABELS), rerun_client.create_table(name, LABELS))


def test_created_tables_look_the_same(pair: Pair, client, rerun_client) -> None:
    assert fields(pair.strata.arrow_schema()) == fields(pair.rerun.arrow_schema()) == fields(LABELS)
    assert pair.strata.name == pair.rerun.name
    assert str(pair.strata.kind) == str(pair.rerun.kind) == "EntryKind.TABLE"
    assert int(pair.strata.kind) == int(pair.rerun.kind)
    assert pair.strata.reader().schema().names == pair.rerun.reader().schema().names
    assert pair.rows() == ([], [])
    for catalog in (client, rerun_client):
        assert pair.strata.name in catalog.table_names()
        assert pair.strata.name in catalog.entry_names()
        assert pair.strata.name not in catalog.dataset_names()
        kinds = {entry.name: str(entry.kind) for entry in catalog.entries()}
        assert kinds[pair.strata.name] == "EntryKind.TABLE"
        assert [t.name for t in catalog.tables()].count(pair.strata.name) == 1


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
]


def test_every_write_reads_back_the_same_rows(pair: Pair) -> None:
    for what, write in WRITES:
        pair.both(write)
        strata, rerun = pair.rows()
        assert strata == rerun, f"after {what}"
    assert pair.strata.to_arrow_reader().read_all().num_rows == 0


def test_sql_by_table_name_gives_the_same_answer(pair: Pair, client, rerun_client) -> None:
    pair.both(lambda t: t.append(batch([1, 2, 3], ["a", "b", "a"], [1.0, 2.0, 4.0])))
    query = (f"SELECT label, count(*) AS n, sum(score) AS total FROM {pair.strata.name} "
             "GROUP BY label ORDER BY label")
    assert client.ctx.sql(query).to_arrow_table() == rerun_client.ctx.sql(query).to_arrow_table()


INT32_ID = pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int32())})
EXTRA_COLUMN = pa.RecordBatch.from_pydict({"id": [1], "extra": ["x"]})
BAD_WRITES: list[tuple[str, Callable, type[Exception], type[Exception]]] = [
    # (what, the write, strata's error, Rerun's error)
    ("an index column of another type", lambda t: t.append(INT32_ID), ValueError, RuntimeError),
    ("a column not in the table", lambda t: t.append(EXTRA_COLUMN), ValueError, RuntimeError),
    ("a value that does not convert", lambda t: t.append(id=["one"]), ValueError, ValueError),
    ("named columns of different lengths", lambda t: t.append(id=[1, 2], label=["a"]),
     ValueError, ValueError),
    ("batches and named columns at once", lambda t: t.append(batch([1], ["a"]), id=[2]),
     TypeError, TypeError),
    ("a list of numbers", lambda t: t.append([1, 2]), TypeError, TypeError),
]


@pytest.mark.parametrize(("write", "strata_error", "rerun_error"), [w[1:] for w in BAD_WRITES],
                         ids=[w[0] for w in BAD_WRITES])
def test_the_same_bad_write_fails_on_both_and_keeps_the_rows(pair: Pair, write, strata_error,
                                                             rerun_error) -> None:
    pair.both(lambda t: t.append(batch([1], ["kept"])))
    with pytest.raises(strata_error):
        write(pair.strata)
    with pytest.raises(rerun_error):
        write(pair.rerun)
    assert pair.rows() == ([(1, "kept", 1.0)],) * 2


def test_upsert_without_an_index_column_fails_on_both(client, rerun_client) -> None:
    name = unique("plain")
    schema = pa.schema([("id", pa.int64()), ("label", pa.string())])
    strata, rerun = client.create_table(name, schema), rerun_client.create_table(name, schema)
    for table in (strata, rerun):
        table.append(id=[1], label=["kept"])
    with pytest.raises(ValueError, match="no index column"):
        strata.upsert(id=[1], label=["x"])
    with pytest.raises(RuntimeError, match="requires join keys"):
        rerun.upsert(id=[1], label=["x"])
    assert rows(strata) == rows(rerun) == [(1, "kept")]


def test_taken_and_unknown_names_raise_the_same_errors(pair: Pair, client, rerun_client) -> None:
    dataset = unique("dataset")
    client.create_dataset(dataset)
    rerun_client.create_dataset(dataset)
    taken: list[Callable] = [
        lambda c, t: c.create_table(t.name, LABELS),
        lambda c, t: c.create_table(dataset, LABELS),
        lambda c, t: c.create_dataset(t.name),
        lambda c, t: t.set_name(dataset),
        lambda c, t: c.create_table("__entries", LABELS),  # the system table's name
        lambda c, t: c.create_dataset("__entries"),
    ]
    for call in taken:
        errors = []
        for catalog, table in ((client, pair.strata), (rerun_client, pair.rerun)):
            with pytest.raises(Exception) as info:
                call(catalog, table)
            errors.append(type(info.value).__name__)
        assert errors == ["AlreadyExistsError"] * 2

    wrong_kind: list[Callable] = [  # a name or id of an entry of the other kind
        lambda c, t: c.get_table(dataset),
        lambda c, t: c.get_dataset(t.name),
        lambda c, t: c.get_table(id=c.get_dataset(dataset).id),
    ]
    for catalog, table in ((client, pair.strata), (rerun_client, pair.rerun)):
        with pytest.raises(LookupError):
            catalog.get_table(unique("missing"))
        for call in wrong_kind:
            with pytest.raises(Exception) as info:
                call(catalog, table)
            assert type(info.value).__name__ == "NotFoundError"
        assert catalog.get_table(table.name).id == table.id == catalog.get_table(id=table.id).id


def test_the_system_table_lists_every_entry_on_both(pair: Pair, client, rerun_client) -> None:
    dataset = unique("dataset")
    listed = []
    for catalog in (client, rerun_client):
        assert "__entries" in catalog.table_names(include_hidden=True)
        assert "__entries" not in catalog.table_names() and "__entries" not in catalog.entry_names()
        assert "__entries" in [t.name for t in catalog.tables(include_hidden=True)]
        entries = catalog.get_table(name="__entries")
        assert entries.kind == sdk.EntryKind.TABLE
        before = entries.reader().to_arrow_table()
        created = catalog.create_dataset(dataset)  # seen by the next read, as the table is live
        after = entries.reader().to_arrow_table()
        kinds = dict(zip(after["name"].to_pylist(), after["entry_kind"].to_pylist(), strict=True))
        assert after.num_rows == before.num_rows + 3  # the dataset, its blueprint and asset datasets
        ids = dict(zip(after["name"].to_pylist(), after["id"].to_pylist(), strict=True))
        assert ids[dataset] == uuid.UUID(str(created.id)).bytes
        hex_id = uuid.UUID(str(created.id)).hex  # companions are named __bp_<id>, __as_<id>
        companions = sorted(kind for name, kind in kinds.items() if name[5:].lower() == hex_id)
        listed.append((fields(entries.arrow_schema()),
                       {kinds[n] for n in ("__entries", pair.strata.name, dataset)}, companions))
        sql = catalog.ctx.sql(f"select entry_kind from __entries where name = '{dataset}'")
        assert sql.to_arrow_table()["entry_kind"].to_pylist() == [1]
    assert listed[0] == listed[1]
    assert listed[0][1] == {1, 3}
    # On purpose: Rerun's server takes an append to __entries and then lists those rows twice.
    entries = client.get_table(name="__entries")
    before = entries.reader().to_arrow_table()
    with pytest.raises(ValueError, match="system table"):
        entries.append(before.to_batches())
    assert entries.reader().to_arrow_table().equals(before)


def test_rename_and_delete(pair: Pair, client, rerun_client) -> None:
    old, new = pair.strata.name, unique("renamed")
    pair.both(lambda t: t.append(batch([1], ["a"])))
    pair.both(lambda t: t.set_name(new))
    for catalog in (client, rerun_client):
        assert new in catalog.table_names() and old not in catalog.table_names()
        assert rows(catalog.get_table(new)) == [(1, "a", 1.0)]
    pair.both(lambda t: t.delete())
    for catalog in (client, rerun_client):
        assert new not in catalog.table_names() and new not in catalog.entry_names()
        with pytest.raises(LookupError):
            catalog.get_table(new)
    for catalog in (client, rerun_client):  # the name is free again
        assert catalog.create_table(new, LABELS).name == new


def test_register_table_of_the_same_lance_table(client, rerun_client, tmp_path: Path) -> None:
    data = pa.table({"id": pa.array([3, 1, 2], pa.int64()), "label": ["c", "a", "b"]})
    lance.write_dataset(data, tmp_path / "labels.lance")
    name = unique("lance")
    strata = client.register_table(name, (tmp_path / "labels.lance").as_uri())
    rerun = rerun_client.register_table(name, (tmp_path / "labels.lance").as_uri())
    assert fields(strata.arrow_schema()) == fields(rerun.arrow_schema()) == fields(data.schema)
    assert rows(strata) == rows(rerun) == [(1, "a"), (2, "b"), (3, "c")]
    assert strata.storage_url.rstrip("/") == rerun.storage_url.rstrip("/")


def test_where_strata_differs_on_purpose(pair: Pair, client, rerun_client, tmp_path: Path) -> None:
    # Duplicate keys in one upsert: strata keeps the last (the documented rule); Rerun's
    # Lance merge inserts every one of them when the key is new.
    pair.both(lambda t: t.upsert(id=[5, 5], label=["first", "last"], score=[0.0, 0.0]))
    assert pair.rows() == ([(5, "last", 0.0)], [(5, "first", 0.0), (5, "last", 0.0)])

    # A non-nullable column left out: strata refuses it with a ValueError; Rerun logs a warning and
    # writes nothing.
    with pytest.raises(ValueError, match="missing column 'id'"):
        pair.strata.append(label=["no id"])
    pair.rerun.append(label=["no id"])
    assert len(rows(pair.rerun)) == 2

    # A pyarrow Table: strata takes it like its batches; Rerun's writers do not.
    pair.strata.append(pa.table(batch([6], ["table"])))
    with pytest.raises(TypeError):
        pair.rerun.append(pa.table(batch([6], ["table"])))
    assert (6, "table", 6.0) in rows(pair.strata)

    # A registered Lance table: strata reads the version it registered and refuses writes (the log
    # must say what the table is, and a replay must see the same rows); Rerun writes into the files.
    lance.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), tmp_path / "ids.lance")
    name = unique("lance")
    strata = client.register_table(name, (tmp_path / "ids.lance").as_uri())
    with pytest.raises(ValueError, match="registered to be read"):
        strata.append(id=[2])
    rerun_client.register_table(name, (tmp_path / "ids.lance").as_uri()).append(id=[2])
    assert rows(strata) == [(1,)] and len(lance.dataset(tmp_path / "ids.lance").to_table()) == 2

    # Schema mismatches: strata's ValueError names the column and both types; Rerun's RuntimeError
    # comes from its storage engine.
    with pytest.raises(ValueError, match="'id' has type int32.*int64"):
        pair.strata.append(INT32_ID)

    # After a rename, Rerun's client still finds the table by its old name (it remembers names it
    # resolved); strata looks names up in the projection.
    old = pair.strata.name
    pair.both(lambda t: t.set_name(unique("renamed")))
    with pytest.raises(LookupError):
        client.get_table(old)
    assert rerun_client.get_table(old).name == pair.rerun.name



@pytest.mark.parametrize("bad", ["created-table", "labels (v2)", "2024_labels"])
def test_table_names_are_sql_identifiers_on_both(client, rerun_client, bad: str) -> None:
    name = f"{bad}_{uuid.uuid4().hex[:8]}" if bad[0].isdigit() else bad.replace("labels", unique("labels"))
    for catalog in (client, rerun_client):
        with pytest.raises(ValueError):
            catalog.create_table(name, LABELS)
    assert name not in client.table_names() and name not in rerun_client.table_names()


def test_dotted_table_names_are_a_catalog_and_schema_in_sql_on_both(client, rerun_client) -> None:
    name = f"lab_{uuid.uuid4().hex[:8]}.runs.labels"
    found = []
    for catalog in (client, rerun_client):
        catalog.create_table(name, LABELS).append(batch([1, 2], ["a", "b"]))
        lab, runs, labels = name.split(".")
        provider = catalog.ctx.catalog(lab).schema(runs).table(labels)
        assert provider.schema.remove_metadata() == LABELS.remove_metadata()
        assert lab in catalog.ctx.catalog_names() and runs in catalog.ctx.catalog(lab).schema_names()
        found.append(catalog.ctx.sql(f"SELECT id, label FROM {name} ORDER BY id").to_pylist())
    assert found[0] == found[1] == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]


def test_the_session_sees_entries_as_they_are_now_and_lookups_create_nothing_on_both(
        client, rerun_client) -> None:
    for catalog in (client, rerun_client):
        ctx = catalog.ctx  # taken before the table exists, used after each change
        phantom = f"phantom_{uuid.uuid4().hex[:8]}"
        ctx.catalog(phantom)
        assert phantom not in ctx.catalog_names()
        late = f"late_{uuid.uuid4().hex[:8]}"
        table = catalog.create_table(f"{late}.runs.labels", LABELS)
        assert ctx.sql(f"SELECT COUNT(*) AS n FROM {late}.runs.labels").to_pylist() == [{"n": 0}]
        table.append(batch([1, 2, 3], ["a", "b", "c"]))
        assert ctx.table(f"{late}.runs.labels").count() == 3
        table.delete()
        with pytest.raises(Exception, match="labels"):
            ctx.sql(f"SELECT * FROM {late}.runs.labels").collect()


def lance_rows(url: str) -> list[tuple] | None:
    try:
        table = lance.dataset(url).to_table()
    except ValueError:  # the projector has not made the copy yet
        return None
    return sorted((r["id"], r["label"], r["score"]) for r in table.to_pylist())


def test_a_table_created_with_a_url_is_also_a_lance_table_there_on_both(client, rerun_client,
                                                                          tmp_path: Path) -> None:
    urls = {}
    for catalog in (client, rerun_client):
        url = (tmp_path / type(catalog).__module__.split(".")[0]).as_uri()
        table = catalog.create_table(unique("copied"), LABELS, url)
        # strata keeps the copy at the url; Rerun's server in a directory under it named by the id.
        assert (table.storage_url == url) if catalog is client else table.storage_url.startswith(f"{url}/")
        table.append(batch([1, 2, 3], ["a", "b", "c"]))
        table.upsert(batch([2], ["B"], [9.0]))
        urls[catalog] = table.storage_url
        assert [r[:2] for r in rows(table)] == [(1, "a"), (2, "B"), (3, "c")]
    client.flush()
    expected = [(1, "a", 1.0), (2, "B", 9.0), (3, "c", 3.0)]
    wait_until(lambda: lance_rows(urls[client]) == expected, 60, "the Lance copy to have the rows")
    assert lance_rows(urls[rerun_client]) == expected
    copy = lance.dataset(urls[client])
    assert copy.schema.field("id").metadata == INDEX  # the index marker is kept


def test_create_table_refuses_a_url_that_holds_a_lance_dataset_and_sends_nothing(
        client, tmp_path: Path) -> None:
    lance.write_dataset(pa.table({"id": pa.array([1], pa.int64())}), tmp_path / "taken")
    name = unique("taken")
    with pytest.raises(ValueError, match="already holds a Lance dataset: register_table"):
        client.create_table(name, LABELS, (tmp_path / "taken").as_uri())
    assert name not in client.table_names()
