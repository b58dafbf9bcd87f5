"""Rerun's training loaders (``rerun.experimental.dataloader``) for tests: rerun-sdk's
``dataloader`` extra (torch, torchvision, av, pillow) is installed by scripts/test-deps.sh into
``.cache/dataloader``, which importing this module puts on ``sys.path`` (and so on the path of the
loader's worker processes, which ``spawn`` starts with the parent's path). strata itself never
imports torch."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EXTRA = Path(__file__).resolve().parents[1] / ".cache" / "dataloader"
if not (EXTRA / ".installed").is_file():
    raise RuntimeError(f"Rerun's loaders' extra (torch) is not in {EXTRA}: run "
                       "'bash scripts/test-deps.sh' (make test does it)")
if str(EXTRA) not in sys.path:
    sys.path.append(str(EXTRA))

import torch  # noqa: E402  (from EXTRA, put on the path above)
from rerun.experimental.dataloader import (  # noqa: E402
    DataSource,
    Field,
    FixedRateSampling,
    ImageDecoder,
    NumericDecoder,
    RerunIterableDataset,
    RerunMapDataset,
)
from torch.utils.data import DataLoader  # noqa: E402

SAMPLING = FixedRateSampling(rate_hz=15.0)


def fields() -> dict[str, Field]:
    """A sample of a DROID-like episode (``stack.droid``): the measured joints over a window of
    the 0.2 s before it (in seconds on a timestamp timeline), the commanded joints, and the wrist
    camera's JPEG decoded to a tensor."""
    return {
        "state": Field("/observation/joint_positions:Scalars:scalars", decode=NumericDecoder(),
                       window=(-0.2, 0.0)),
        "action": Field("/action/joint_positions:Scalars:scalars", decode=NumericDecoder()),
        "image": Field("/cameras/wrist_left/image:EncodedImage:blob", decode=ImageDecoder()),
    }


def loader_dataset(kind: str, dataset: Any, segments: list[str] | None = None, *,
                   more_fields: dict[str, Field] | None = None) -> RerunIterableDataset | RerunMapDataset:
    """Rerun's ``RerunIterableDataset`` (``kind`` "iterable") or ``RerunMapDataset`` ("map") of
    ``dataset`` (an ``rr.catalog`` dataset entry) on ``real_time`` at 15 Hz, of ``fields()`` and
    ``more_fields``."""
    source = DataSource(dataset=dataset, segments=segments)
    kinds = {"iterable": RerunIterableDataset, "map": RerunMapDataset}
    with warnings.catch_warnings():
        # It warns of the process's default start method, fork; ``epoch`` gives its DataLoader
        # the spawn context, which the constructor cannot see.
        warnings.filterwarnings("ignore", "The default multiprocessing start method", RuntimeWarning)
        return kinds[kind](source=source, index="real_time", fields={**fields(), **(more_fields or {})},
                           timeline_sampling=SAMPLING)


def samples(data: RerunIterableDataset | RerunMapDataset, *, workers: int = 2, seed: int = 7
            ) -> Iterator[dict[str, Any]]:
    """One epoch of ``data`` through a PyTorch ``DataLoader`` of ``workers`` spawned processes, in
    the order it yields them, shuffled by ``seed`` (the iterable dataset's epoch; the map
    dataset's sampler), each sample as plain lists."""
    generator = None
    if isinstance(data, RerunIterableDataset):
        data.set_epoch(seed)
    else:
        generator = torch.Generator()
        generator.manual_seed(seed)
    loader = DataLoader(data, batch_size=None, num_workers=workers, multiprocessing_context="spawn",
                        shuffle=generator is not None, generator=generator)
    for sample in loader:
        yield {name: value.tolist() for name, value in sample.items()}


def epoch(data: RerunIterableDataset | RerunMapDataset, *, workers: int = 2, seed: int = 7
          ) -> list[dict[str, Any]]:
    """``samples`` of one whole epoch."""
    return list(samples(data, workers=workers, seed=seed))
