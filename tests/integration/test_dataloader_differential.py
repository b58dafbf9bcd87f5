"""Rerun's training loaders (``rerun.experimental.dataloader``) on a strata dataset and on
Rerun's server, from the same DROID-like episodes.

``SampleIndex.build`` reads a dataset through ``get_index_ranges()`` and ``filter_segments()``:
those must give it the same sample space on strata's client and on Rerun's. Rerun's
``RerunIterableDataset`` and ``RerunMapDataset`` reconnect in each PyTorch loader worker with
rerun-sdk's own gRPC client, so they run on Rerun's client of strata's endpoint of Rerun's
protocol (``endpoints``): one epoch through a ``DataLoader`` of 2 spawned workers must give the
same samples in the same order as on Rerun's server, for the same seed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rerun as rr
from rerun.experimental.dataloader import DataSource, Field, FixedRateSampling, SampleIndex

import loaders
import sdk
from endpoints import endpoint
from stack import Server
from stack.droid import write_episode, write_tracking_error

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


@pytest.fixture(scope="module")
def loaded(server: Server, pair) -> Iterator[tuple[Any, Any]]:
    """The pair's datasets as Rerun's client sees them: through strata's endpoint, and on
    Rerun's server."""
    ours, theirs = pair
    with endpoint(server) as url:
        yield rr.catalog.CatalogClient(url).get_dataset(ours.name), theirs


@pytest.mark.parametrize("segments", [None, ["ep_2", "ep_0"]])
@pytest.mark.parametrize("kind", ["iterable", "map"])
def test_rerun_s_loaders_give_rerun_s_samples_in_rerun_s_order(loaded, kind: str,
                                                              segments: list[str] | None) -> None:
    datasets = [loaders.loader_dataset(kind, dataset, segments) for dataset in loaded]
    epochs = [loaders.epoch(data, workers=2, seed=7) for data in datasets]
    assert len(epochs[0]) == len(datasets[0]) == len(datasets[1]) > 0
    assert epochs[0] == epochs[1]
    first = epochs[0][0]
    assert len(first["action"]) == 7 and len(first["image"]) == 3  # 7 joints; a 3-channel image


def test_a_segment_of_two_layers_is_one_recording_to_rerun_s_loaders(
        server: Server, client: sdk.CatalogClient, rerun_client, tmp_path: Path) -> None:
    """Each episode's tracking error registered as a second layer, ``tracking_error``: a sample
    holds a field of that layer beside the base layer's, as on Rerun's server."""
    base, errors = [], []
    for index, steps in enumerate((30, 45)):
        write_episode(tmp_path / f"ep_{index}.rrd", f"ep_{index}", index, steps=steps)
        write_tracking_error(tmp_path / f"ep_{index}_error.rrd", f"ep_{index}", index, steps=steps)
        base.append((tmp_path / f"ep_{index}.rrd").as_uri())
        errors.append((tmp_path / f"ep_{index}_error.rrd").as_uri())
    name = f"layered-{os.urandom(3).hex()}"
    ours, theirs = client.create_dataset(name), rerun_client.create_dataset(name)
    for dataset in (ours, theirs):
        dataset.register(base).wait()
        dataset.register(errors, layer_name="tracking_error").wait()
    more = {"error": Field("/derived/tracking_error:Scalars:scalars", decode=loaders.NumericDecoder())}
    with endpoint(server) as url:
        through = rr.catalog.CatalogClient(url).get_dataset(name)
        epochs = [loaders.epoch(loaders.loader_dataset("iterable", dataset, more_fields=more))
                  for dataset in (through, theirs)]
    assert epochs[0] == epochs[1] and len(epochs[0]) > 60  # 75 steps, less those the window cuts
    assert all(len(sample["error"]) == 1 and len(sample["action"]) == 7 for sample in epochs[0])


# The segments Rerun's how-to (docs/snippets/all/howto/dataloader.py) reads, of its five DROID
# episodes.
HOWTO_SEGMENTS = ["ILIAD_50aee79f_2023_07_12_20h_55m_08s", "ILIAD_5e938e3b_2023_07_20_10h_40m_10s"]
HOWTO_OTHERS = ["ILIAD_1a2b3c4d_2023_07_13_09h_01m_00s", "ILIAD_9f8e7d6c_2023_07_14_15h_30m_12s",
                "RAIL_0c0ffee0_2023_08_01_11h_11m_11s"]


def _collate(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The how-to's batches: samples past a segment's end (empty) dropped, the rest stacked."""
    kept = [sample for sample in samples if sample["state"].numel() and sample["action"].numel()]
    return {name: loaders.torch.stack([sample[name] for sample in kept]).float()
            for name in ("state", "action")}


def _howto(client: Any, uris: list[str]) -> tuple[list[float], list[Any]]:
    """Rerun's how-to on ``client``'s catalog: register the episodes into ``my_robot_data``,
    describe a sample of two of its segments (and the how-to's windowed and video fields), read
    them in batches of 8 in the process and train a linear policy for an epoch. The losses and
    the trained weights."""
    from rerun.experimental.dataloader import NumericDecoder, RerunIterableDataset, VideoFrameDecoder
    from torch.utils.data import DataLoader

    client.create_dataset("my_robot_data", exist_ok=True).register(uris).wait()
    source = DataSource(dataset=client.get_dataset("my_robot_data"), segments=HOWTO_SEGMENTS)
    action = "/action/joint_positions:Scalars:scalars"
    fields = {"state": Field(JOINTS, decode=NumericDecoder()),
              "action": Field(action, decode=NumericDecoder())}
    with warnings.catch_warnings():  # of the fork start method, which workers=0 never uses
        warnings.filterwarnings("ignore", "The default multiprocessing start method", RuntimeWarning)
        data = RerunIterableDataset(source=source, index="real_time", fields=fields,
                                    timeline_sampling=FixedRateSampling(rate_hz=15.0))
    Field(action, decode=NumericDecoder(), window=(1, 50))
    # rerun-sdk 0.41's decoder takes the codec alone (the how-to's later versions add a keyframe
    # interval and a frame rate).
    Field("/camera/wrist:VideoStream:sample", decode=VideoFrameDecoder(codec="h264"))
    loader = DataLoader(data, batch_size=8, num_workers=0, shuffle=False, collate_fn=_collate)
    torch = loaders.torch
    torch.manual_seed(0)
    policy = torch.nn.Linear(7, 7)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    losses = []
    data.set_epoch(0)
    for batch in loader:
        loss = torch.nn.functional.mse_loss(policy(batch["state"]), batch["action"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, [parameter.tolist() for parameter in policy.parameters()]


def test_rerun_s_how_to_trains_the_same_policy_on_strata(server: Server, rerun_client,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    directory = tmp_path_factory.mktemp("howto")
    uris = []
    for index, segment_id in enumerate(HOWTO_SEGMENTS + HOWTO_OTHERS):
        path = directory / f"{segment_id}.rrd"
        write_episode(path, segment_id, index, steps=40 + 5 * index)
        uris.append(path.as_uri())
    with endpoint(server, writes=True) as url:
        ours = _howto(rr.catalog.CatalogClient(url), uris)
    theirs = _howto(rerun_client, uris)
    assert len(ours[0]) == len(theirs[0]) > 0
    assert ours == theirs
