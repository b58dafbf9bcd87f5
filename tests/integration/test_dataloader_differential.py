"""Rerun's training loaders' sample index (``rerun.experimental.dataloader.SampleIndex``) built
on a strata dataset and on Rerun's server from the same DROID-like episodes.

``SampleIndex.build`` reads a dataset through ``get_index_ranges()`` and ``filter_segments()``:
those must give it the same sample space on both. Its ``RerunIterableDataset`` and
``RerunMapDataset`` then reconnect in each loader worker with rerun-sdk's own gRPC client
(``CatalogClientInternal(url)``), which only a Rerun server answers (README, "Worker processes").
"""

from __future__ import annotations

import os

import pytest
from rerun.experimental.dataloader import DataSource, Field, FixedRateSampling, SampleIndex

import sdk
from stack.droid import write_episode

pytestmark = pytest.mark.store_agnostic

JOINTS = "/observation/joint_positions:Scalars:scalars"


@pytest.fixture(scope="module")
def pair(client: sdk.CatalogClient, rerun_client, tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("loader")
    uris = []
    for index, steps in enumerate((40, 25, 60)):
        path = directory / f"episode_{index}.rrd"
        write_episode(path, f"ep_{index}", index, steps=steps)
        uris.append(path.as_uri())
    name = f"loader-{os.urandom(3).hex()}"
    ours, theirs = client.create_dataset(name), rerun_client.create_dataset(name)
    ours.register(uris).wait()
    theirs.register(uris).wait()
    return ours, theirs


def _described(index: SampleIndex) -> tuple:
    positions = range(0, index.total_samples, 7)
    return (index.segments, index.total_samples, index.ns_dtype, index.ns_per_sample,
            [index.global_to_local(p) for p in positions])


@pytest.mark.parametrize("segments", [None, ["ep_2", "ep_0"], []])
@pytest.mark.parametrize("window", [None, (-0.2, 0.0, 0.3)])
def test_a_sample_index_is_the_same_on_both(pair, segments: list[str] | None,
                                             window: tuple[float, ...] | None) -> None:
    fields = {"joints": Field(path=JOINTS, decode=None, window=window)}  # type: ignore[arg-type]
    built = [SampleIndex.build(DataSource(dataset=dataset, segments=segments), "real_time", fields,
                               timeline_sampling=FixedRateSampling(rate_hz=15.0)) for dataset in pair]
    assert _described(built[0]) == _described(built[1])
    if segments != []:
        assert built[0].total_samples > 0


def test_a_timestamp_index_without_a_sampling_rate_is_refused_alike(pair) -> None:
    fields = {"joints": Field(path=JOINTS, decode=None)}  # type: ignore[arg-type]
    messages = []
    for dataset in pair:
        with pytest.raises(TypeError) as raised:
            SampleIndex.build(DataSource(dataset=dataset), "real_time", fields)
        messages.append(str(raised.value))
    assert messages[0] == messages[1]

