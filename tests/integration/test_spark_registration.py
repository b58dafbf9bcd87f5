"""A registration whose files are read by Spark executors (``register(..., spark=session)``,
``strata register --prefix ... --spark``) sends the events the local path sends for the same
files, whatever the split of the files into tasks, and refuses a bad file with the local path's
error, registering nothing of the call."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sdk
from commands import registration, writes_for
from events import OnDuplicate
from recordings import ObjectStoreConfig, WorkerPool, object_store, read_recordings, read_recordings_on_spark
from stack.droid import write_episode
from stores import dump

pytestmark = pytest.mark.store_agnostic

EPISODES = 8


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """DROID-like episodes, each with its properties."""
    directory = tmp_path_factory.mktemp("episodes")
    uris = []
    for index in range(EPISODES):
        path = directory / f"episode_{index}.rrd"
        write_episode(path, f"spark_episode_{index}", index, steps=10)
        uris.append(path.as_uri())
    return uris


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_executors_read_the_facts_the_workers_read(spark, episodes: list[str],
                                                      data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(episodes), min_size=1, max_size=EPISODES, unique=True))
    tasks = data.draw(st.integers(1, len(chosen)))
    layers = data.draw(st.lists(st.sampled_from(["base", "derived"]), min_size=len(chosen),
                                max_size=len(chosen)))
    objects = object_store(ObjectStoreConfig.resolve(None))
    on_spark = read_recordings_on_spark(spark, chosen, objects, tasks=tasks)
    local = read_recordings(chosen, objects, WorkerPool(0))
    assert on_spark == local
    assert writes_for(on_spark, layers, OnDuplicate.ERROR) == writes_for(local, layers, OnDuplicate.ERROR)


def test_a_prefix_read_on_spark_registers_what_a_local_read_registers(
        spark, client: sdk.CatalogClient, episodes: list[str], tmp_path: Path, monkeypatch) -> None:
    """The same files registered both ways give equal manifests and segment tables; Spark ran
    the reads (a job of the session), and the local call ran none."""
    for uri in episodes:
        shutil.copy(uri.removeprefix("file://"), tmp_path)
    monkeypatch.setattr(registration, "SPARK_MIN_FILES", EPISODES)
    suffix = tmp_path.name[-12:]
    by_spark = client.create_dataset(f"on_spark_{suffix}")
    by_workers = client.create_dataset(f"on_workers_{suffix}")
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    by_spark.register_prefix(tmp_path.as_uri(), spark=spark).wait()
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) > jobs
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    by_workers.register_prefix(tmp_path.as_uri()).wait()
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs
    timeless = ["rerun_registration_time", "rerun_last_updated_at"]
    assert (by_spark.manifest().drop(*timeless).to_arrow_table()
            == by_workers.manifest().drop(*timeless).to_arrow_table())
    assert (by_spark.segment_table().drop("rerun_last_updated_at").to_arrow_table()
            == by_workers.segment_table().drop("rerun_last_updated_at").to_arrow_table())
    assert len(by_spark.segment_ids()) == EPISODES


def test_a_bad_file_read_on_spark_refuses_the_call_as_a_local_read_does(
        spark, client: sdk.CatalogClient, episodes: list[str], tmp_path: Path, monkeypatch) -> None:
    garbage = tmp_path / "garbage.rrd"
    garbage.write_bytes(b"not a recording at all")
    uris = [*episodes[:3], garbage.as_uri(), *episodes[3:]]
    monkeypatch.setattr(registration, "SPARK_MIN_FILES", len(uris))
    dataset = client.create_dataset(f"spark_refused_{tmp_path.name[-12:]}")
    before = dump(client.store)
    with pytest.raises(ValueError) as on_spark:
        dataset.register(uris, spark=spark)
    with pytest.raises(ValueError) as locally:
        dataset.register(uris)
    assert str(on_spark.value) == str(locally.value)
    assert garbage.as_uri() in str(on_spark.value)
    assert dataset.segment_ids() == []
    assert dump(client.store) == before
