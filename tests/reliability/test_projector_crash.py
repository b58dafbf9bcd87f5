"""kill -9 of the Spark projector, ten times, during a load of 50k registrations: the store
ends up holding every event exactly once, equal table by table to a replay from offset 0, and no
SDK ``wait()`` returns before its change is visible."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import sdk
from changelog_topic import catalog_of_store, catalog_of_topic, wait_for_changelog
from producers import end_offsets
from projector import open_store
from stack import Server
from stack_tools import PipelineLoad, kill_projector, projector_on, wait_caught_up, wait_until
from stores import assert_applied_exactly_once, dump, store_offsets

PIPELINE_EVENTS = 50_000
DATASETS = 4
KILLS = 10
SDK_FILES = 40
MIN_SDK_REGISTRATIONS = 10
LOAD_SECS = 60.0


class SdkRegistrations(threading.Thread):
    """Registers one recording at a time through the SDK until stopped and, the moment ``wait()``
    returns, looks for the layer in a reader of its own on the same store."""

    def __init__(self, dataset: sdk.DatasetEntry, uris: dict[str, str], store: str) -> None:
        super().__init__(name="sdk-registrations", daemon=True)
        self.dataset = dataset
        self.uris = uris
        self.store = store
        self.visible: list[str] = []
        self.not_visible: list[str] = []
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        reader = open_store(self.store, read_only=True)
        try:
            for segment_id, uri in self.uris.items():
                # Behind the pipeline's backlog each wait() is slow while the kills happen; once
                # asked to stop, go on until enough registrations were checked.
                done = len(self.visible) + len(self.not_visible)
                if self.stopping.wait(1.0) and done >= MIN_SDK_REGISTRATIONS:
                    return
                self.dataset.register([uri]).wait(timeout_secs=300)
                found = reader.layer(self.dataset.id, segment_id, "base") is not None
                (self.visible if found else self.not_visible).append(segment_id)
        except BaseException as exc:  # reported by the test's thread
            self.error = exc
        finally:
            reader.close()


def test_every_event_lands_exactly_once_across_kill_9(tmp_path: Path, make_rrd, new_store) -> None:
    rng = random.Random(4)
    uris = {f"sdk-{i:02d}": make_rrd(f"sdk-{i:02d}") for i in range(SDK_FILES)}
    with Server(tmp_path / "stack", store=new_store(), protocol_port=None) as stack:
        client = stack.client()
        datasets = [client.create_dataset(f"crash-{i}") for i in range(DATASETS)]
        load = PipelineLoad(stack.bootstrap_servers, [d.id for d in datasets], PIPELINE_EVENTS,
                            prefix="pipeline", duration_secs=LOAD_SECS)
        registrations = SdkRegistrations(datasets[0], uris, stack.store)
        kills_with_work_in_flight = 0
        try:
            load.start()
            registrations.start()
            for kill in range(KILLS):
                if kill % 2:
                    # Once the restarted projector has committed a batch, so the store moves on
                    # between kills and SDK waits can return.
                    restarted_at = sum(store_offsets(stack.store).values())
                    wait_until(lambda at=restarted_at: sum(store_offsets(stack.store).values()) > at,
                               300, "the restarted projector to commit a batch")
                # A random moment: mid-batch, between batches, or while the projector still
                # folds the backlog its predecessor left.
                time.sleep(rng.uniform(0.2, 3.0))
                if sum(store_offsets(stack.store).values()) < sum(
                        end_offsets(stack.bootstrap_servers).values()):
                    kills_with_work_in_flight += 1
                kill_projector(stack)
                stack.start_projector()
            waits_during_kills = len(registrations.visible)
            load.finish(timeout_secs=300)
            wait_until(lambda: len(registrations.visible) >= MIN_SDK_REGISTRATIONS
                       or not registrations.is_alive(), 300, "SDK registrations after the kills")
            registrations.stopping.set()
            registrations.join(330)
            assert not registrations.is_alive(), "an SDK wait() did not return"
        finally:
            load.stop()
            registrations.stopping.set()
        if registrations.error is not None:
            raise registrations.error
        assert registrations.not_visible == [], "wait() returned before the layer was visible"
        assert len(registrations.visible) >= MIN_SDK_REGISTRATIONS, registrations.visible
        sdk_registrations = len(registrations.visible)
        # The kills hit a projector with records still to apply, not an idle one.
        assert kills_with_work_in_flight >= 3, kills_with_work_in_flight

        end = wait_caught_up(stack.store, stack.bootstrap_servers)
        records = sum(end.values())
        tables = dump(stack.store)
        schemas_defined = len(tables["schemas"])  # by the SDK, once each, before its registrations
        assert records == DATASETS + schemas_defined + PIPELINE_EVENTS + sdk_registrations
        # Exactly once: every record folded by one committed batch (Spark hands records over
        # again after a crash; the store's offsets must drop them), one outcome per record, one
        # layer per registration, nothing rejected.
        assert_applied_exactly_once(stack.store, end)
        assert len(tables["outcomes"]) == records
        assert len(tables["layers"]) == PIPELINE_EVENTS + sdk_registrations
        assert tables["rejections"] == []
        expected = {str(d.id): PIPELINE_EVENTS // DATASETS for d in datasets}
        expected[str(datasets[0].id)] += sdk_registrations
        assert Counter(dataset_id for dataset_id, *_ in tables["layers"]) == expected
        # The changelog relay died with each projector and resumed from the topic's last record:
        # read from the start, the topic is still the catalog.
        latest, _ = wait_for_changelog(stack, client, timeout_secs=180)
        assert catalog_of_topic(latest) == catalog_of_store(client)

        # A second projector on a fresh store and checkpoint replays the log from offset 0.
        with projector_on(stack.bootstrap_servers, tmp_path / "replay", store=new_store()) as replay:
            wait_caught_up(replay.store, stack.bootstrap_servers)
            replayed = dump(replay.store)
        for table, rows in tables.items():
            assert replayed[table] == rows, f"table {table} differs from the replay"
        print(f"projector crash: {KILLS} kills ({kills_with_work_in_flight} with work in flight), "
              f"{records} events checked, {sdk_registrations} SDK waits seen visible "
              f"({waits_during_kills} while the kills went on)")
