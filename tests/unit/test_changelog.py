"""The changelog's followers where their input is not what they wrote: a changelog record whose
source offset header is missing or malformed, a Lance copy whose last version has no
transaction to say whose it is, and a table written while the mirror reads its rows; and the
relay's process below the projector's priority."""

from __future__ import annotations

import os
import sys
import time
import uuid

import pyarrow as pa
import pytest

from changelog import relay
from changelog.lance_mirror import REVISION_KEY, TABLE_KEY, LanceMirror, copy_state
from changelog.records import CHANGES_TOPIC, OFFSET_HEADER, offset_headers, source_offset
from events import CreateTable, Event
from projector import apply_batch
from projector.stores.sqlite import SqliteStore

from .conftest import LABELS, Log, write


def test_the_relay_s_process_runs_below_the_projector_s_priority(tmp_path) -> None:
    SqliteStore(tmp_path / "store.db").close()
    process = relay.RelayProcess(str(tmp_path / "store.db"), "127.0.0.1:9")  # no broker: it only starts
    expected = min(19, os.getpriority(os.PRIO_PROCESS, 0) + relay.NICENESS)
    process.start()
    try:
        assert process.pid is not None
        deadline = time.monotonic() + 30
        while os.getpriority(os.PRIO_PROCESS, process.pid) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, process.pid) == expected
    finally:
        process.stop(timeout_secs=2)  # it may be waiting on the broker that is not there


def test_a_record_s_source_offset_is_its_8_byte_header() -> None:
    assert source_offset(dict(offset_headers(1234))) == 1234
    assert source_offset(dict(offset_headers(0))) == 0


@pytest.mark.parametrize("headers", [
    {}, {"other": b"\x00" * 8}, {OFFSET_HEADER: None}, {OFFSET_HEADER: b"\x01\x02"},
    {OFFSET_HEADER: "00000001"}])
def test_a_record_without_a_well_formed_offset_header_has_no_source_offset(headers) -> None:
    assert source_offset(headers) is None


class LastRecord:
    """The changelog topic's last record, as a consumer polls it."""

    def __init__(self, headers: list[tuple[str, bytes | None]]) -> None:
        self._headers = headers

    def error(self) -> None:
        return None

    def headers(self) -> list[tuple[str, bytes | None]]:
        return self._headers


class TopicEndingWith:
    """A consumer of a changelog topic of 10 records, the last of which is ``record``."""

    def __init__(self, record: LastRecord) -> None:
        self.record = record

    def __call__(self, config: dict[str, object]) -> TopicEndingWith:
        return self

    def get_watermark_offsets(self, partition: object, timeout: float) -> tuple[int, int]:
        return 0, 10

    def assign(self, partitions: list[object]) -> None:
        pass

    def poll(self, timeout: float) -> LastRecord:
        return self.record

    def close(self) -> None:
        pass


def test_the_relay_resumes_from_the_offset_in_the_topic_s_last_record(monkeypatch) -> None:
    monkeypatch.setattr(relay, "Consumer", TopicEndingWith(LastRecord(offset_headers(41))))
    assert relay.resume_offset({}) == 41


@pytest.mark.parametrize("headers", [[], [(OFFSET_HEADER, None)], [(OFFSET_HEADER, b"\x29")]])
def test_a_last_record_strata_did_not_write_stops_the_relay_with_a_clear_error(monkeypatch, headers) -> None:
    # A RuntimeError: the relay says so and tries again later (a TypeError would end its thread).
    monkeypatch.setattr(relay, "Consumer", TopicEndingWith(LastRecord(headers)))
    wanted = f"the last record of {CHANGES_TOPIC} has no 8-byte {OFFSET_HEADER} header"
    with pytest.raises(RuntimeError, match=wanted):
        relay.resume_offset({})


class Version:
    def __init__(self, transaction_properties: dict[str, str]) -> None:
        self.transaction_properties = transaction_properties


class LanceDatasets:
    """What the mirror uses of pylance (``lance``): datasets by URL, each a list of versions, a
    version the transaction properties it was written with, or None for a version Lance kept no
    transaction for (``read_transaction`` answers None), as one another writer left may be; and
    the rows each dataset was last written with."""

    def __init__(self) -> None:
        self.versions: dict[str, list[dict[str, str] | None]] = {}
        self.rows: dict[str, list[dict[str, object]]] = {}
        self.rows_by_version: dict[str, list[list[dict[str, object]]]] = {}

    def dataset(self, url: str) -> LanceDatasets.Dataset:
        if url not in self.versions:
            raise ValueError(f"no dataset at {url}")
        return self.Dataset(self.versions[url])

    def write_dataset(self, rows: pa.Table, url: str, *, mode: str, transaction_properties: dict[str, str]
                      ) -> None:
        assert mode == ("overwrite" if url in self.versions else "create")
        self.versions.setdefault(url, []).append(dict(transaction_properties))
        self.rows[url] = rows.to_pylist()
        self.rows_by_version.setdefault(url, []).append(self.rows[url])

    class Dataset:
        def __init__(self, versions: list[dict[str, str] | None]) -> None:
            self.versions = versions
            self.version = len(versions)

        def read_transaction(self, version: int) -> Version | None:
            properties = self.versions[version - 1]
            return None if properties is None else Version(properties)


def copied_table(monkeypatch) -> tuple[LanceDatasets, str, uuid.UUID, Log]:
    """Lance replaced by ``LanceDatasets``, and a log that creates a table copied to a URL."""
    lance = LanceDatasets()
    monkeypatch.setitem(sys.modules, "lance", lance)
    url = "file:///copies/labels.lance"
    table_id = uuid.uuid4()
    log = Log()
    log.append(Event(table_id, CreateTable("labels", LABELS.serialize().to_pybytes(), storage_url=url)))
    return lance, url, table_id, log


def test_a_copy_whose_last_version_has_no_transaction_is_written_again(tmp_path, monkeypatch) -> None:
    lance, url, table_id, log = copied_table(monkeypatch)
    log.append(write(table_id, "append", [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]))
    store = SqliteStore(tmp_path / "store.db")
    try:
        apply_batch(store, log.records)
        # A dataset at the URL whose last version says nothing of whose it is: the mirror cannot
        # tell it is its copy, so it writes one (rather than failing at every commit).
        lance.versions[url] = [None]
        assert copy_state(url, table_id) == (True, None)
        assert LanceMirror(store).sync() == 1
        assert lance.versions[url] == [None, {TABLE_KEY: str(table_id), REVISION_KEY: "1"}]
        assert lance.rows[url] == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]
        assert copy_state(url, table_id) == (True, 1)
        assert LanceMirror(store).sync() == 0  # started again: its copy is as the table
    finally:
        store.close()


class WrittenWhileRead(SqliteStore):
    """A store whose table gets ``later`` (log records) committed while the mirror reads its rows."""

    later: list = []  # noqa: RUF012 - set per test

    def table_data(self, table):
        if self.later:
            apply_batch(self, self.later)
            self.later = []
        return super().table_data(table)


def test_a_copy_s_version_holds_the_rows_of_the_revision_it_is_tagged_with(tmp_path, monkeypatch) -> None:
    lance, url, table_id, log = copied_table(monkeypatch)
    log.append(write(table_id, "append", [{"id": 1, "label": "a"}]))
    log.append(write(table_id, "append", [{"id": 2, "label": "b"}]))
    store = WrittenWhileRead(tmp_path / "store.db")
    try:
        apply_batch(store, log.records[:2])
        store.later = log.records[2:]  # the second append commits between the table's read and its rows'
        mirror = LanceMirror(store)
        mirror.sync()
        mirror.sync()
        for properties, rows in zip(lance.versions[url], lance.rows_by_version[url], strict=True):
            assert properties is not None
            assert len(rows) == int(properties[REVISION_KEY])  # one row per append: as tagged
        assert copy_state(url, table_id) == (True, 2)
        assert lance.rows[url] == [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}]
    finally:
        store.close()
