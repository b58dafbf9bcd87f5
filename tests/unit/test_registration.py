"""``register()`` and ``register_prefix()`` one way, without a broker: the files are read (progress
told to the caller, nothing printed), then one batch is sent whose schemas come first, once per
connection and only if the store lacks them; nothing is sent when a file or a rule fails."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import sdk
from events import CATALOG_TOPIC, DefineSchema, Event, RegisterLayer
from producers import Position
from projector import apply_batch
from projector.stores.sqlite import SqliteStore

from .conftest import create, log_record


class FakeProducer:
    """Takes the events a connection sends, as Kafka would, and remembers each batch."""

    def __init__(self, first_offset: int) -> None:
        self.next_offset = first_offset
        self.batches: list[list[Event]] = []

    def send(self, events: Sequence[Event]) -> list[Position]:
        self.batches.append(list(events))
        positions = [Position(CATALOG_TOPIC, 0, self.next_offset + n) for n in range(len(events))]
        self.next_offset += len(events)
        return positions

    def close(self) -> None:
        pass


class Stack:
    """A store with one dataset, as the projector left it, and clients whose producer is fake."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "store.db"
        self.projector = SqliteStore(self.path)
        self.offset = 0
        self.dataset_id = uuid.uuid4()
        self.apply([create(self.dataset_id, "droid")])
        self.clients: list[sdk.CatalogClient] = []

    def apply(self, events: Sequence[Event]) -> None:
        apply_batch(self.projector, [log_record(e, offset=self.offset + n) for n, e in enumerate(events)])
        self.offset += len(events)

    def client(self, monkeypatch: pytest.MonkeyPatch) -> tuple[sdk.DatasetEntry, FakeProducer]:
        client = sdk.CatalogClient("127.0.0.1:1", self.path, workers=0)
        self.clients.append(client)
        dataset = client.get_dataset("droid")
        producer = FakeProducer(self.offset)
        monkeypatch.setattr(client._internal.log, "producer", producer)
        return dataset, producer

    def close(self) -> None:
        for client in self.clients:
            client.close(flush=False)  # no projector folds what the fake producer took
        self.projector.close()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    made = Stack(tmp_path)
    yield made
    made.close()


def recording(path: Path, recording_id: str) -> str:
    """A small .rrd with one point cloud and one property; its URI."""
    import rerun as rr

    rec = rr.RecordingStream("app", recording_id=recording_id)
    rec.reset_time()  # rerun-sdk keeps a thread's times by recording id: another test's may linger
    rec.save(path)
    rec.log("points", rr.Points3D([[1, 2, 3]]))
    rec.send_property("quality", rr.AnyValues(tracking_good=True))
    rec.flush()
    del rec
    return path.as_uri()


def kinds(events: Sequence[Event]) -> list[str]:
    return [type(event.command).__name__ for event in events]


def test_schemas_go_first_in_one_batch_then_a_layer_per_uri_in_order(stack, monkeypatch, tmp_path, capsys):
    uris = [recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(3)]
    dataset, producer = stack.client(monkeypatch)
    told: list[tuple[int, int]] = []

    operation = dataset.register(uris, layer_name="base", progress=lambda *call: told.append(call))

    [batch] = producer.batches
    assert kinds(batch) == ["DefineSchema", "DefineSchema", "RegisterLayer", "RegisterLayer", "RegisterLayer"]
    layers = [event.command for event in batch[2:]]
    assert all(isinstance(c, RegisterLayer) for c in layers)
    assert [(c.segment_id, c.storage_url) for c in layers] == [(f"ep_{i}", uris[i]) for i in range(3)]
    assert {c.schema_sha256 for c in layers} | {c.properties_schema_sha256 for c in layers} == {
        event.command.sha256 for event in batch[:2]}
    assert operation.positions == [Position(CATALOG_TOPIC, 0, stack.offset + n) for n in (2, 3, 4)]
    assert told[0] == (0, 3) and told[-1] == (3, 3)
    assert capsys.readouterr() == ("", "")

    # The same connection defined them: its next registration names them only.
    dataset.register([recording(tmp_path / "ep_3.rrd", "ep_3")])
    assert kinds(producer.batches[-1]) == ["RegisterLayer"]


def test_schemas_the_store_has_are_not_defined_again(stack, monkeypatch, tmp_path):
    uris = [recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]
    first, producer = stack.client(monkeypatch)
    first.register(uris[:1])
    definitions = [event for event in producer.batches[0] if isinstance(event.command, DefineSchema)]
    assert len(definitions) == 2
    stack.apply(definitions)  # the projector folded them

    second, producer = stack.client(monkeypatch)  # another connection: it has defined nothing
    second.register(uris[1:])
    assert kinds(producer.batches[0]) == ["RegisterLayer"]


def test_a_file_that_fails_to_read_sends_nothing(stack, monkeypatch, tmp_path):
    uris = [recording(tmp_path / "ep_0.rrd", "ep_0"), (tmp_path / "missing.rrd").as_uri(),
            recording(tmp_path / "ep_2.rrd", "ep_2")]
    dataset, producer = stack.client(monkeypatch)
    with pytest.raises(sdk.NotFoundError, match="missing.rrd"):
        dataset.register(uris)
    with pytest.raises(ValueError, match="properties must map entity names"):
        dataset.register(uris[:1], properties={"": {"x": 1}})
    assert producer.batches == []


def test_a_large_prefix_is_read_with_progress_and_nothing_printed(stack, monkeypatch, tmp_path, capsys):
    """100 files or more printed a progress line to stderr before; the caller is told instead. The
    files are copies of one recording: the same (segment, layer) twice is refused after they are
    read, and nothing is sent."""
    directory = tmp_path / "prefix"
    directory.mkdir()
    original = Path(recording(tmp_path / "ep.rrd", "ep").removeprefix("file://"))
    for index in range(120):
        shutil.copy(original, directory / f"copy_{index:03d}.rrd")
    dataset, producer = stack.client(monkeypatch)
    told: list[tuple[int, int]] = []
    with pytest.raises(ValueError, match='duplicate segment layers in request: segment "ep"'):
        dataset.register_prefix(directory.as_uri(), progress=lambda *call: told.append(call))
    assert told[0] == (0, 120) and told[-1] == (120, 120)
    assert capsys.readouterr() == ("", "")
    assert producer.batches == []


def test_too_large_properties_are_refused_before_sending_for_the_folds_reason(stack, monkeypatch, tmp_path):
    """The early check is the fold's rule (``projector.registration``), not a copy: the same
    command, sent by a pipeline that skips the check, is refused by the fold for the same
    reason."""
    from recordings import read_recording, with_properties
    from sdk.layer_commands import layer_commands

    uri = recording(tmp_path / "ep.rrd", "ep")
    large = {"notes": {"text": "x" * (300 * 1024)}}
    dataset, producer = stack.client(monkeypatch)
    with pytest.raises(ValueError) as refused:
        dataset.register(uri, properties=large)
    assert producer.batches == []

    command, definitions = layer_commands(with_properties(read_recording(uri), large), "base")
    event = Event(stack.dataset_id, command)
    stack.apply([Event(stack.dataset_id, d) for d in definitions] + [event])
    outcome = stack.projector.outcome(event.event_id)
    assert outcome is not None and outcome.reason
    assert str(refused.value) == f"{uri}: {outcome.reason}"
