"""The Lance copy of a table created with a url, kept by the projector: one tagged version per
change it sees, equal to the table; written again by a projector that starts and finds it gone."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import lance
import pyarrow as pa

import sdk
from changelog.lance_mirror import REVISION_KEY, TABLE_KEY
from stack import Server
from stack_tools import wait_until

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("label", pa.string())])


def copy_of(url: str) -> list[dict] | None:
    try:
        return sorted(lance.dataset(url).to_table().to_pylist(), key=lambda r: r["id"])
    except ValueError:  # not there (yet)
        return None


def test_the_copy_follows_the_table_and_is_written_again_when_gone(
        server: Server, client: sdk.CatalogClient, tmp_path: Path) -> None:
    url = (tmp_path / "labels").as_uri()
    table = client.create_table(f"copied_{uuid.uuid4().hex[:8]}", SCHEMA, url)
    for start in (0, 2):
        table.append(id=[start, start + 1], label=["x", "y"])
        client.flush()
        wanted = table.reader().to_arrow_table().to_pylist()
        wait_until(lambda wanted=wanted: copy_of(url) == wanted, 60, "the copy to follow the table")
    dataset = lance.dataset(url)
    tags = dataset.read_transaction(dataset.version).transaction_properties
    assert tags[TABLE_KEY] == str(table.id) and int(tags[REVISION_KEY]) == 2
    assert dataset.version <= 3  # the empty table, then at most one version per write

    table.overwrite(id=[9], label=["only"])
    shutil.rmtree(tmp_path / "labels")  # gone, perhaps before the projector copied the overwrite
    server.stop_projector()
    server.start_projector()
    wait_until(lambda: copy_of(url) == [{"id": 9, "label": "only"}], 60, "the copy to be written again")
