"""DROID-like robot episodes written with rerun-sdk, for the demo, the tests and the benchmark.

An episode has what a DROID recording has: three cameras (a pinhole and a JPEG frame per step
each, under a transform), eight joint, cartesian and gripper series (commanded under ``/action``,
measured under ``/observation``), a language instruction, and four episode properties, all on a
``real_time`` timestamp timeline at 15 Hz. The measured joints lag the commands by Gaussian noise
of ``tracking_noise``, so the layers how-to has a tracking error to compute.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

CAMERAS = ("exterior_1_left", "exterior_2_left", "wrist_left")
JOINTS = 7
STEP_NS = 66_666_667
"""15 Hz, DROID's control rate."""
EPOCH_NS = 1_689_000_000_000_000_000


_VERBS = ("put", "move", "place", "pick up", "push")
_OBJECTS = ("the marker", "the red cup", "the sponge", "the blue block", "the spoon", "the towel")
_PLACES = ("in the cup", "in the sink", "on the plate", "into the drawer", "next to the bowl")
EMBEDDING_ENTITY = "/cameras/wrist_left/embedding"
"""Where ``write_embeddings`` logs each step's embedding (component ``embedding``)."""
NARRATION_ENTITY = "/narration"
"""Where ``write_embeddings`` logs each step's narration (a ``TextDocument``)."""
_PHASES = ("reaching for", "grasping", "lifting", "carrying", "lowering", "releasing")


def instruction(index: int) -> str:
    """Episode ``index``'s language instruction: "put the marker in the cup" for the first, a
    different task for each of the next 149."""
    return f"{_VERBS[index % 5]} {_OBJECTS[(index // 5) % 6]} {_PLACES[(index // 30) % 5]}"


def embeddings(index: int, steps: int, dimension: int) -> np.ndarray:
    """Episode ``index``'s per-step embeddings: its scene's direction plus a slow drift and noise,
    float32, as a vision model gives frames of one scene (``scene_id`` is ``index % 7``)."""
    scene = np.random.default_rng(index % 7).standard_normal(dimension)
    rng = np.random.default_rng(50_000 + index)
    drift = np.cumsum(rng.normal(0.0, 0.05, (steps, dimension)), axis=0)
    values: np.ndarray = (scene + drift + rng.normal(0.0, 0.3, (steps, dimension))).astype(np.float32)
    return values


def write_embeddings(path: Path, recording_id: str, index: int, *, steps: int = 120,
                     dimension: int = 768) -> None:
    """Write ``embeddings`` of episode ``index`` to ``path`` at ``EMBEDDING_ENTITY``, and a
    narration of each step at ``NARRATION_ENTITY`` ("lifting the red cup", ...), on its
    ``real_time`` timeline, under ``recording_id``: a layer a model's pass adds to the episode's
    segment, as the search page registers."""
    import pyarrow as pa
    import rerun as rr

    path.parent.mkdir(parents=True, exist_ok=True)
    values = embeddings(index, steps, dimension)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel()), dimension)
    with rr.RecordingStream("embeddings", recording_id=recording_id) as rec:
        rec.save(path)
        rec.send_columns(EMBEDDING_ENTITY, indexes=[_times(index, steps)],
                         columns=rr.AnyValues.columns(embedding=vectors))
        thing = _OBJECTS[(index // 5) % 6]
        narration = [f"{_PHASES[step * len(_PHASES) // steps]} {thing}" for step in range(steps)]
        rec.send_columns(NARRATION_ENTITY, indexes=[_times(index, steps)],
                         columns=rr.TextDocument.columns(text=narration))


def _jpeg(frame: np.ndarray) -> bytes:
    from PIL import Image  # a dependency of rerun-sdk

    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def commanded_joints(index: int, steps: int) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, steps)[:, None]
    joints: np.ndarray = np.sin(t + np.arange(JOINTS)[None, :] * 0.3 + index)
    return joints


def measured_joints(index: int, steps: int, tracking_noise: float) -> np.ndarray:
    rng = np.random.default_rng(index)
    return commanded_joints(index, steps) + rng.normal(0.0, tracking_noise, (steps, JOINTS))


def _times(index: int, steps: int) -> Any:
    """The ``real_time`` column of episode ``index``'s ``steps`` steps."""
    import rerun as rr

    return rr.TimeColumn("real_time", timestamp=(
        EPOCH_NS + index * 10**12 + np.arange(steps, dtype=np.int64) * STEP_NS).astype("datetime64[ns]"))


def write_episode(path: Path, recording_id: str, index: int, *, steps: int = 120,
                  tracking_noise: float = 0.02, image_size: tuple[int, int] = (64, 48),
                  application_id: str = "droid") -> None:
    """Write one DROID-like episode to ``path`` (an ``.rrd``) under ``recording_id``."""
    import rerun as rr

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1_000 + index)
    times = _times(index, steps)
    commanded = commanded_joints(index, steps)
    measured = measured_joints(index, steps, tracking_noise)
    with rr.RecordingStream(application_id, recording_id=recording_id) as rec:
        rec.save(path)
        series = {
            "joint_positions": (commanded, measured),
            "joint_velocities": (np.gradient(commanded, axis=0), np.gradient(measured, axis=0)),
            "cartesian_position": (commanded[:, :6] * 0.5, measured[:, :6] * 0.5),
            "gripper_position": ((commanded[:, :1] + 1) / 2, (measured[:, :1] + 1) / 2),
        }
        for name, (action, observation) in series.items():
            rec.send_columns(f"/action/{name}", indexes=[times], columns=rr.Scalars.columns(scalars=action))
            rec.send_columns(f"/observation/{name}", indexes=[times],
                             columns=rr.Scalars.columns(scalars=observation))
        width, height = image_size
        for number, camera in enumerate(CAMERAS):
            entity = f"/cameras/{camera}"
            rec.log(entity, rr.Transform3D(translation=[0.1 * number, 0.2, 0.5]), static=True)
            rec.log(f"{entity}/image", rr.Pinhole(focal_length=width, width=width, height=height),
                    static=True)
            base = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
            frames = [_jpeg(np.roll(base, step, axis=1)) for step in range(steps)]
            rec.send_columns(f"{entity}/image", indexes=[times], columns=rr.EncodedImage.columns(
                blob=frames, media_type=["image/jpeg"] * steps))
        rec.log("/language_instruction", rr.TextDocument(instruction(index)), static=True)
        rec.send_property("episode", rr.AnyValues(
            success=bool(index % 3), scene_id=int(index % 7), building="ILIAD",
            num_steps=int(steps)))


def write_tracking_error(path: Path, recording_id: str, index: int, *, steps: int = 120,
                         tracking_noise: float = 0.02) -> None:
    """Write the tracking error of ``write_episode``'s episode of the same ``index``, ``steps``
    and ``tracking_noise`` (the L2 norm of commanded minus measured joints per step) to ``path``
    as ``/derived/tracking_error`` on its ``real_time`` timeline, under ``recording_id``: a
    second layer of that episode's segment, as the layers how-to registers."""
    import rerun as rr

    path.parent.mkdir(parents=True, exist_ok=True)
    times = _times(index, steps)
    measured = measured_joints(index, steps, tracking_noise)
    error = np.linalg.norm(commanded_joints(index, steps) - measured, axis=1)
    with rr.RecordingStream("tracking_error", recording_id=recording_id) as rec:
        rec.save(path)
        rec.send_columns("/derived/tracking_error", indexes=[times],
                         columns=rr.Scalars.columns(scalars=error))
