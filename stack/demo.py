"""The demo behind ``strata demo``: the layers how-to of Rerun's catalog docs, end to end.

Five DROID-like episodes are registered to ``base``. Then the how-to's three steps run as its
code does: query the commanded and measured joint positions with ``filter_contents(...).reader``,
compute the tracking error per segment with numpy and register it as a ``tracking_error`` layer,
aggregate it with DataFusion into a ``tracking_good`` property registered as a ``quality`` layer.
``add_tracking_error`` and ``add_quality`` take any dataset with Rerun's API, so the tests run
them on strata and on Rerun's own server alike.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from sdk import CatalogClient, DatasetEntry
from stack.droid import write_episode

SEGMENT_IDS = [
    "ILIAD_50aee79f_2023_07_12_20h_55m_08s",
    "ILIAD_5e938e3b_2023_07_20_10h_40m_10s",
    "ILIAD_5e938e3b_2023_07_28_11h_25m_26s",
    "ILIAD_j807b3f8_2023_06_15_13h_42m_56s",
    "ILIAD_sbd7d2c6_2023_12_24_16h_20m_37s",
]
# How far each episode's arm lags its commands; the first two track badly.
TRACKING_NOISE = [0.09, 0.07, 0.01, 0.02, 0.015]
TRACKING_THRESHOLD = 0.13
"""The how-to's threshold on the mean tracking error."""
JOINTS = ["/action/joint_positions", "/observation/joint_positions"]


def write_base(directory: Path) -> list[Path]:
    """The five episodes of the how-to, one ``.rrd`` each."""
    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, (segment_id, noise) in enumerate(zip(SEGMENT_IDS, TRACKING_NOISE, strict=True)):
        path = directory / f"{segment_id}.rrd"
        write_episode(path, segment_id, index, tracking_noise=noise)
        paths.append(path)
    return paths


def add_tracking_error(dataset: DatasetEntry, directory: Path) -> list[str]:
    """Query the joint positions, write the L2 norm of commanded minus measured per step as
    ``/derived/tracking_error`` in one ``.rrd`` per segment, register them as ``tracking_error``."""
    import rerun as rr
    from datafusion import col

    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    joints = dataset.filter_contents(JOINTS).reader(index="real_time")
    segment_ids = pa.table(joints.select("rerun_segment_id").distinct())["rerun_segment_id"].to_numpy(
        zero_copy_only=False)
    uris = []
    for segment_id in sorted(segment_ids):
        segment = pa.table(joints.filter(col("rerun_segment_id") == segment_id).select(
            "real_time", *(f"{entity}:Scalars:scalars" for entity in JOINTS)))
        timestamps = segment["real_time"].to_numpy()
        actions, observations = (np.vstack(segment[f"{entity}:Scalars:scalars"].to_pylist())
                                 for entity in JOINTS)
        error = np.linalg.norm(actions - observations, axis=1)
        path = directory / f"{segment_id}_tracking_error.rrd"
        with rr.RecordingStream(application_id="tracking_error", recording_id=segment_id) as rec:
            rec.save(path)
            rec.send_columns("/derived/tracking_error",
                             indexes=[rr.TimeColumn("real_time", timestamp=timestamps)],
                             columns=rr.Scalars.columns(scalars=error))
        uris.append(path.as_uri())
    dataset.register(uris, layer_name="tracking_error").wait()
    return uris


def add_quality(dataset: DatasetEntry, directory: Path) -> pa.Table:
    """Average each segment's tracking error with DataFusion, register ``tracking_good`` (mean
    below the threshold) as a property in a ``quality`` layer; return the per-segment stats."""
    import rerun as rr
    from datafusion import col
    from datafusion import functions as F

    directory = directory.absolute()
    directory.mkdir(parents=True, exist_ok=True)
    tracking = dataset.filter_contents(["/derived/tracking_error"]).reader(index="real_time")
    stats = pa.table(
        tracking.aggregate(col("rerun_segment_id"),
                           [F.avg(col("/derived/tracking_error:Scalars:scalars")[0]).alias("mean_error")])
        .with_column("tracking_good", col("mean_error") < TRACKING_THRESHOLD)
        .select("rerun_segment_id", "mean_error", "tracking_good")
        .sort(col("rerun_segment_id")))
    uris = []
    for segment_id, good in zip(stats["rerun_segment_id"].to_pylist(), stats["tracking_good"].to_pylist(),
                                strict=True):
        path = directory / f"{segment_id}_quality.rrd"
        with rr.RecordingStream(application_id="quality", recording_id=segment_id) as rec:
            rec.save(path)
            rec.send_property("quality", rr.AnyValues(tracking_good=good))
        uris.append(path.as_uri())
    dataset.register(uris, layer_name="quality").wait()
    return stats


def run(client: CatalogClient, directory: Path, *, dataset_name: str = "droid") -> None:
    """The whole how-to on ``client``, printing its tables as the docs do."""
    from datafusion import col

    dataset = client.create_dataset(dataset_name, exist_ok=True)
    if dataset.segment_ids():
        # A second run starts over, so that every step of the how-to runs again.
        dataset.delete()
        dataset = client.create_dataset(dataset_name)
    print(f"dataset {dataset.name!r} ({dataset.id})")
    base = write_base(directory / "base")
    dataset.register([p.as_uri() for p in base]).wait()
    print(f"registered {len(base)} DROID-like episodes to layer 'base'")
    add_tracking_error(dataset, directory / "tracking_error")
    print("queried /action and /observation joint positions; registered layer 'tracking_error'")
    stats = add_quality(dataset, directory / "quality")
    print("mean tracking error per segment (DataFusion):")
    for row in stats.to_pylist():
        print(f"  {row['rerun_segment_id']}  {row['mean_error']:.3f}  tracking_good={row['tracking_good']}")
    print("registered layer 'quality'\n\nsegment_table():")
    (dataset.segment_table()
     .select("rerun_segment_id", "rerun_layer_names", "property:quality:tracking_good")
     .sort(col("rerun_segment_id"))
     .show())


def on_dashboard(url: str, dataset_name: str) -> str:
    """What the dashboard at ``url`` lists of the dataset, read back over HTTP."""
    import json
    import urllib.request

    with urllib.request.urlopen(f"{url}/api/datasets", timeout=10) as response:
        for row in json.load(response):
            if row["name"] == dataset_name:
                return f"dataset {dataset_name!r} with {row['segments']} segments and {row['layers']} layers"
    raise RuntimeError(f"the dashboard at {url} does not list dataset {dataset_name!r}")
