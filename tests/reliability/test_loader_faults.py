"""Rerun's training loaders on strata's endpoint through faults: an epoch read while the projector
is killed and restarted under registrations to the same dataset gives every sample once, in the
order an undisturbed epoch gives them; a segment unregistered during an epoch is the loader's own
error, as on Rerun's server, and not a hang."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import rerun as rr

import loaders
from stack import Server
from stack.droid import write_episode
from stack_tools import kill_projector, returns_within


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, new_store: Callable[[], str | None]) -> Iterator[Server]:
    """A stack of the module's own, serving Rerun's protocol (direct URLs on), whose projector
    the tests kill."""
    with Server(tmp_path_factory.mktemp("loader-faults"), store=new_store(), protocol_port=0) as running:
        yield running


def _episodes(directory: Path, prefix: str, steps: tuple[int, ...]) -> list[str]:
    uris = []
    for index, count in enumerate(steps):
        path = directory / f"{prefix}_{index}.rrd"
        write_episode(path, f"{prefix}_{index}", index, steps=count)
        uris.append(path.as_uri())
    return uris


def test_an_epoch_through_a_projector_killed_and_restarted_gives_every_sample_once(
        stack: Server, tmp_path: Path) -> None:
    client = stack.client()
    dataset = client.create_dataset(f"faults-{os.urandom(3).hex()}")
    dataset.register(_episodes(tmp_path, "ep", (40, 25, 60))).wait()
    extra = _episodes(tmp_path, "late", (20, 20))
    theirs = rr.catalog.CatalogClient(stack.url()).get_dataset(dataset.name)
    undisturbed = loaders.epoch(loaders.loader_dataset("iterable", theirs), workers=2, seed=7)

    got = []
    pending = []
    for sample in loaders.samples(loaders.loader_dataset("iterable", theirs), workers=2, seed=7):
        got.append(sample)
        if len(got) == len(undisturbed) // 3:
            # Registrations to the same dataset in the log, then the projector killed mid-batch.
            pending = [dataset.register([uri]) for uri in extra]
            kill_projector(stack)
        elif len(got) == 2 * len(undisturbed) // 3:
            stack.start_projector()
    assert got == undisturbed
    for handle in pending:
        handle.wait(timeout_secs=120)
    assert sorted(dataset.segment_ids()) == ["ep_0", "ep_1", "ep_2", "late_0", "late_1"]


def _interrupted_epoch(client: Any, loader_client: Any, uris: list[str], drop: list[str]
                       ) -> tuple[int, int, list[str], str | None]:
    """An epoch of 2 workers over ``uris`` registered into a new dataset of ``client``, read
    through ``loader_client``, with the segments ``drop`` unregistered after its fifth sample:
    the samples it gave, the epoch's length, the loader's warnings and its error's last line."""
    dataset = client.create_dataset(f"unregistered-{os.urandom(3).hex()}")
    dataset.register(uris).wait()
    data = loaders.loader_dataset("iterable", loader_client.get_dataset(dataset.name))
    given, error = 0, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in loaders.samples(data, workers=2, seed=7):
                given += 1
                if given == 5:
                    dataset.unregister(segments_to_drop=drop, layers_to_drop=[]).wait()
        except ValueError as exc:  # raised in a worker, re-raised by the DataLoader
            error = str(exc).strip().splitlines()[-1]
    return given, len(data), sorted({str(warning.message) for warning in caught}), error


@pytest.mark.parametrize("dropped", ["one", "all"])
def test_a_segment_unregistered_during_an_epoch_is_what_rerun_s_loader_does_there(
        stack: Server, rerun_client, tmp_path: Path, dropped: str) -> None:
    # Long enough episodes that the workers have not fetched them all at the fifth sample.
    uris = _episodes(tmp_path, "ep", (300,) * 6)
    drop = ["ep_3"] if dropped == "one" else [f"ep_{index}" for index in range(6)]
    ours = returns_within(300, lambda: _interrupted_epoch(
        stack.client(), rr.catalog.CatalogClient(stack.url()), uris, drop))
    theirs = returns_within(300, lambda: _interrupted_epoch(rerun_client, rerun_client, uris, drop))
    assert ours == theirs
    given, length, _, error = ours
    if dropped == "one":  # the loader skips the samples it finds no value for, and goes on
        assert error is None and 0 < given < length
    else:  # a dataset without segments has no index: the loader's own error
        assert error == "ValueError: Index 'real_time' does not exist in the dataset."
