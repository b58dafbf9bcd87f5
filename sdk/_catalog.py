"""The catalog client and its dataset entries, in the shape of rerun-sdk's ``rerun.catalog``."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa

from events import CreateDataset, Event, OnDuplicate, RegisterLayer
from producers import EventProducer, Position
from projector import Dataset, Outcome, SqliteStore, Status
from sdk import _tables
from sdk._recordings import read_recording
from sdk._wait import wait_for_positions
from sdk.errors import AlreadyExistsError, NotFoundError

DEFAULT_TIMEOUT_SECS = 60.0
SERVER_FILE = "server.json"


@dataclass(frozen=True)
class RegistrationResult:
    """The segment ids of a registration, in the order of its URIs."""

    segment_ids: list[str]


@dataclass(frozen=True)
class SegmentRegistrationResult:
    uri: str
    segment_id: str
    error: str | None
    """None on success, else why this item failed."""

    @property
    def is_success(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class _Item:
    uri: str
    segment_id: str
    event: Event
    position: Position


class RegistrationOperation:
    """A registration in flight: ``wait()`` for its outcome, or ``iter_results()`` per URI."""

    def __init__(self, client: CatalogClient, items: list[_Item]) -> None:
        self._client = client
        self._items = items

    def _outcomes(self, timeout_secs: float | None) -> list[Outcome]:
        self._client._wait([item.position for item in self._items], timeout_secs)
        return [self._client._outcome(item.event) for item in self._items]

    def iter_results(
        self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
    ) -> Iterator[SegmentRegistrationResult]:
        """Wait, then yield ``(uri, segment_id, error)`` for each URI in request order."""
        for item, outcome in zip(self._items, self._outcomes(timeout_secs), strict=True):
            ok = outcome.status is Status.ACCEPTED
            yield SegmentRegistrationResult(item.uri, item.segment_id, None if ok else outcome.reason)

    def wait(self, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS) -> RegistrationResult:
        """Block until the projection has applied every event of this registration.

        Returns the segment ids in request order. Raises ``ValueError`` naming each failed item,
        and ``TimeoutError`` (``ProjectionTimeoutError``) saying how far the projection got.

        >>> dataset.register([uri]).wait(timeout_secs=10).segment_ids  # doctest: +SKIP
        ['ILIAD_50aee79f_2023_07_12_20h_55m_08s']
        """
        results = list(self.iter_results(timeout_secs))
        failed = [r for r in results if r.error is not None]
        if failed:
            lines = "\n".join(f"- {r.uri}: {r.error}" for r in failed)
            raise ValueError(f"Registration failed for {len(failed)} of {len(results)} "
                             f"recordings:\n{lines}")
        return RegistrationResult([r.segment_id for r in results])


class DatasetEntry:
    """A dataset in the catalog: a collection of segments, each the union of named layers."""

    def __init__(self, client: CatalogClient, dataset: Dataset) -> None:
        self._client = client
        self._dataset = dataset

    def __repr__(self) -> str:
        return f"DatasetEntry(name={self.name!r}, id={self.id})"

    @property
    def id(self) -> uuid.UUID:
        return self._dataset.id

    @property
    def name(self) -> str:
        return self._dataset.name

    @property
    def created_at(self) -> datetime:
        return self._dataset.created_at

    @property
    def updated_at(self) -> datetime:
        current = self._client._store.dataset(self.id)
        return (current or self._dataset).updated_at

    def register(
        self,
        uris: str | Sequence[str],
        *,
        layer_name: str | Sequence[str] = "base",
        on_duplicate: OnDuplicate | str = OnDuplicate.ERROR,
    ) -> RegistrationOperation:
        """Register recordings (``file://`` URIs) as layers of their segments.

        Each file's recording id becomes its segment id. All files are read before anything is
        sent: a missing file raises ``NotFoundError``, an unreadable one, a bad ``layer_name`` or
        ``on_duplicate``, or the same (segment, layer) twice in one call raises ``ValueError``,
        and nothing is produced. Returns an operation to ``wait()`` on.

        >>> dataset.register(["file:///data/a.rrd"], layer_name="quality").wait()  # doctest: +SKIP
        RegistrationResult(segment_ids=['ILIAD_50aee79f_2023_07_12_20h_55m_08s'])
        """
        uri_list = [uris] if isinstance(uris, str) else list(uris)
        if not uri_list:
            raise ValueError("register() needs at least one URI")
        layer_names = ([layer_name] * len(uri_list) if isinstance(layer_name, str)
                       else list(layer_name))
        if len(layer_names) != len(uri_list):
            raise ValueError(f"layer_name has {len(layer_names)} names for {len(uri_list)} URIs; "
                             "pass one name, or one per URI")
        for name in layer_names:
            if not isinstance(name, str) or not name:
                raise ValueError(f"layer names must be non-empty strings, got {name!r}")
        mode = _on_duplicate(on_duplicate)
        recordings = [read_recording(uri) for uri in uri_list]
        seen: dict[tuple[str, str], str] = {}
        for recording, name in zip(recordings, layer_names, strict=True):
            key = (recording.recording_id, name)
            if key in seen:
                raise ValueError(f'Segment "{key[0]}", layer "{name}" appears twice in one call: '
                                 f"{seen[key]} and {recording.uri}")
            seen[key] = recording.uri
        events = [
            self._client._event(self.id, RegisterLayer(
                segment_id=recording.recording_id, layer_name=name,
                storage_url=recording.uri, on_duplicate=mode, size_bytes=recording.size_bytes,
                arrow_schema=recording.schema_bytes(), properties=recording.properties_bytes()))
            for recording, name in zip(recordings, layer_names, strict=True)
        ]
        positions = self._client._send(events)
        return RegistrationOperation(self._client, [
            _Item(r.uri, r.recording_id, event, position)
            for r, event, position in zip(recordings, events, positions, strict=True)
        ])

    def segment_ids(self) -> list[str]:
        """The dataset's segment ids, in registration order."""
        return [s.segment_id for s in self._client._store.segments(self.id)]

    def segment_table(self) -> datafusion.DataFrame:
        """One row per segment: ``rerun_segment_id``, ``rerun_layer_names`` (registration order),
        ``rerun_storage_urls``, ``rerun_last_updated_at``, ``rerun_size_bytes``, and one
        ``property:<entity>:<field>`` column per property (the latest layer with a value wins)."""
        store = self._client._store
        table = _tables.segment_table(store.segments(self.id), store.layers(self.id))
        return self._client._dataframe(table)

    def manifest(self) -> datafusion.DataFrame:
        """One row per (segment, layer): ``rerun_segment_id``, ``rerun_layer_name``,
        ``rerun_storage_url``, ``rerun_registration_time``, ..., and each layer's own
        properties."""
        return self._client._dataframe(_tables.manifest_table(self._client._store.layers(self.id)))


def _on_duplicate(value: OnDuplicate | str) -> OnDuplicate:
    try:
        return OnDuplicate(str(value.value if isinstance(value, OnDuplicate) else value).lower())
    except ValueError:
        raise ValueError(f"on_duplicate must be one of {[m.value for m in OnDuplicate]}, "
                         f"got {value!r}") from None


class CatalogClient:
    """A client of a strata catalog: writes go to Kafka, reads come from the projection store.

    >>> client = CatalogClient("localhost:9092", ".strata/store.db")  # doctest: +SKIP
    >>> client = CatalogClient.from_state_dir(".strata")  # written by ``strata up``
    """

    def __init__(
        self,
        bootstrap_servers: str,
        store: str | Path,
        *,
        kafka_config: Mapping[str, Any] | None = None,
        producer_id: str | None = None,
        delivery_timeout_secs: float = 15.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.store_path = Path(store)
        self.producer_id = producer_id or f"strata-sdk@{os.uname().nodename}:{os.getpid()}"
        self._producer = EventProducer(bootstrap_servers, config=kafka_config,
                                       delivery_timeout_secs=delivery_timeout_secs)
        self._store = SqliteStore(self.store_path)
        self._ctx = datafusion.SessionContext()

    @classmethod
    def from_state_dir(cls, state_dir: str | Path | None = None, **kwargs: Any) -> CatalogClient:
        """Connect to the stack that ``strata up`` runs on ``state_dir`` (default: $STRATA_HOME
        or ./.strata). Raises ``FileNotFoundError`` if nothing was started there."""
        directory = Path(state_dir or os.environ.get("STRATA_HOME", ".strata"))
        path = directory / SERVER_FILE
        if not path.exists():
            raise FileNotFoundError(f"no {SERVER_FILE} in {directory}: start the stack with "
                                    f"'strata up --data-dir {directory}' first")
        info = json.loads(path.read_text())
        return cls(info["bootstrap_servers"], info["store"], **kwargs)

    def __repr__(self) -> str:
        return f"CatalogClient(bootstrap_servers={self.bootstrap_servers!r}, store={str(self.store_path)!r})"

    def close(self) -> None:
        self._producer.close()
        self._store.close()

    def __enter__(self) -> CatalogClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- entries ------------------------------------------------------------------------------

    def create_dataset(
        self, name: str, *, exist_ok: bool = False, timeout_secs: float | None = DEFAULT_TIMEOUT_SECS
    ) -> DatasetEntry:
        """Create a dataset and wait until the catalog has it.

        Raises ``AlreadyExistsError`` if the name is taken (unless ``exist_ok``, which returns
        the existing dataset), ``ValueError`` for an invalid name.

        >>> client.create_dataset("droid")  # doctest: +SKIP
        DatasetEntry(name='droid', id=...)
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"a dataset name must be a non-empty string, got {name!r}")
        event = self._event(uuid.uuid4(), CreateDataset(name))
        [position] = self._send([event])
        self._wait([position], timeout_secs)
        outcome = self._outcome(event)
        if outcome.status is Status.ACCEPTED:
            return self.get_dataset(id=event.dataset_id)
        if outcome.reason.startswith("already exists"):
            if exist_ok:
                return self.get_dataset(name=name)
            raise AlreadyExistsError(f"a dataset named {name!r} already exists")
        raise ValueError(f"could not create dataset {name!r}: {outcome.reason}")

    def get_dataset(self, name: str | None = None, *, id: uuid.UUID | str | None = None) -> DatasetEntry:
        """A dataset by name (``LookupError`` if unknown) or by id (``NotFoundError``)."""
        if (name is None) == (id is None):
            raise ValueError("get_dataset() takes exactly one of name or id")
        if id is not None:
            dataset = self._store.dataset(uuid.UUID(str(id)))
            if dataset is None:
                raise NotFoundError(f"no dataset with id {id}")
        else:
            dataset = self._store.dataset_by_name(name)
            if dataset is None:
                raise LookupError(f"No dataset found with name {name!r}")
        return DatasetEntry(self, dataset)

    def datasets(self) -> list[DatasetEntry]:
        """All datasets, oldest first."""
        return [DatasetEntry(self, d) for d in self._store.datasets()]

    def dataset_names(self) -> list[str]:
        return [d.name for d in self._store.datasets()]

    # -- plumbing shared by entries and operations --------------------------------------------

    def _event(self, dataset_id: uuid.UUID, command: CreateDataset | RegisterLayer) -> Event:
        return Event(dataset_id=dataset_id, command=command, producer_id=self.producer_id)

    def _send(self, events: list[Event]) -> list[Position]:
        return self._producer.send(events)

    def _wait(self, positions: list[Position], timeout_secs: float | None) -> None:
        wait_for_positions(self._store, positions, timeout_secs)

    def _outcome(self, event: Event) -> Outcome:
        outcome = self._store.outcome(event.event_id)
        if outcome is None:
            # The projection passed the event's offset but recorded no outcome: the record was
            # rejected as undecodable, which our own encoder never produces.
            raise RuntimeError(f"the projector recorded no outcome for event {event.event_id}")
        return outcome

    def _dataframe(self, table: pa.Table) -> datafusion.DataFrame:
        return self._ctx.from_arrow(table)
