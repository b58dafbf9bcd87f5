"""The demo behind ``strata demo``: the layers how-to of Rerun's catalog docs, end to end.

Five DROID-like recordings are registered to ``base``; a ``tracking_error`` layer (the L2 norm
of commanded minus actual joint positions) is added to each segment; a ``quality`` layer adds a
``tracking_good`` property computed from the mean tracking error. Recordings are generated with
rerun-sdk, so the demo needs no data download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SEGMENT_IDS = [
    "ILIAD_50aee79f_2023_07_12_20h_55m_08s",
    "ILIAD_5e938e3b_2023_07_20_10h_40m_10s",
    "ILIAD_5e938e3b_2023_07_28_11h_25m_26s",
    "ILIAD_j807b3f8_2023_06_15_13h_42m_56s",
    "ILIAD_sbd7d2c6_2023_12_24_16h_20m_37s",
]
# How far each episode's arm lags its commands; the first two track badly.
CONTROL_NOISE = [0.09, 0.07, 0.01, 0.02, 0.015]
TRACKING_THRESHOLD = 0.1
STEPS = 120


def _trajectories(index: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(index)
    t = np.linspace(0, 2 * np.pi, STEPS)[:, None]
    commanded = np.sin(t + np.arange(7)[None, :] * 0.3)
    actual = commanded + rng.normal(0.0, CONTROL_NOISE[index], commanded.shape)
    return commanded, actual


def write_base(path: Path, segment_id: str, index: int) -> None:
    import rerun as rr

    commanded, actual = _trajectories(index)
    rec = rr.RecordingStream("droid", recording_id=segment_id)
    rec.save(path)
    times = rr.TimeColumn("frame", sequence=np.arange(STEPS))
    rec.send_columns("/action/joint_positions", indexes=[times],
                     columns=rr.Scalars.columns(scalars=commanded))
    rec.send_columns("/observation/joint_positions", indexes=[times],
                     columns=rr.Scalars.columns(scalars=actual))
    rec.flush()
    del rec


def tracking_error(index: int) -> np.ndarray:
    commanded, actual = _trajectories(index)
    return np.linalg.norm(commanded - actual, axis=1)


def write_tracking_error(path: Path, segment_id: str, index: int) -> None:
    import rerun as rr

    rec = rr.RecordingStream("droid", recording_id=segment_id)
    rec.save(path)
    rec.send_columns("/tracking_error", indexes=[rr.TimeColumn("frame", sequence=np.arange(STEPS))],
                     columns=rr.Scalars.columns(scalars=tracking_error(index)))
    rec.flush()
    del rec


def write_quality(path: Path, segment_id: str, index: int) -> bool:
    import rerun as rr

    good = bool(tracking_error(index).mean() < TRACKING_THRESHOLD)
    rec = rr.RecordingStream("droid", recording_id=segment_id)
    rec.save(path)
    rec.send_property("quality", rr.AnyValues(tracking_good=good))
    rec.flush()
    del rec
    return good


def recordings(directory: Path) -> dict[str, list[str]]:
    """Write the demo's recordings under ``directory``; URIs per layer, in segment order."""
    uris: dict[str, list[str]] = {"base": [], "tracking_error": [], "quality": []}
    writers = {"base": write_base, "tracking_error": write_tracking_error, "quality": write_quality}
    for layer, write in writers.items():
        (directory / layer).mkdir(parents=True, exist_ok=True)
        for index, segment_id in enumerate(SEGMENT_IDS):
            path = directory / layer / f"{segment_id}.rrd"
            write(path, segment_id, index)
            uris[layer].append(path.absolute().as_uri())
    return uris


def run(client, directory: Path, *, dataset_name: str = "droid") -> None:
    """Register the demo's layers into ``dataset_name`` and print the tables as the docs do."""
    from datafusion import col

    uris = recordings(directory)
    dataset = client.create_dataset(dataset_name, exist_ok=True)
    print(f"dataset {dataset.name!r} ({dataset.id})")
    # replace: running the demo again re-registers the same files and ends with the same tables.
    for layer in ("base", "tracking_error", "quality"):
        result = dataset.register(uris[layer], layer_name=layer, on_duplicate="replace").wait()
        print(f"registered {len(result.segment_ids)} recordings to layer {layer!r}")
    print("\nmanifest():")
    manifest = (dataset.manifest()
                .select("rerun_segment_id", "rerun_layer_name", "property:quality:tracking_good")
                .sort(col("rerun_segment_id"), col("rerun_layer_name")))
    manifest.show(num=manifest.count())
    print("\nsegment_table():")
    (dataset.segment_table()
     .select("rerun_segment_id", "rerun_layer_names", "property:quality:tracking_good")
     .sort(col("rerun_segment_id"))
     .show())
