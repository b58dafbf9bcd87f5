"""Small recordings for the search tests: per frame an embedding (one or more instances), a
narration text and a byte hash, and a static language instruction, written with rerun-sdk."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

EMBEDDING = "/camera:embedding"
HASH = "/camera:hash"
NARRATION = "/narration:TextDocument:text"
INSTRUCTION = "/task:TextDocument:text"
TIMELINE = "frame"


@dataclass
class Episode:
    """What one recording holds: ``embeddings[frame]`` is that frame's instances (rows of floats),
    ``texts[frame]`` its narration (None: none logged), ``hashes[frame]`` its bytes."""

    segment_id: str
    embeddings: list[np.ndarray]
    texts: list[str | None] = field(default_factory=list)
    hashes: list[np.ndarray] = field(default_factory=list)
    instruction: str | None = None
    first_frame: int = 0


def random_episode(rng: np.random.Generator, segment_id: str, *, frames: int = 6, dimension: int = 8,
                   words: Sequence[str] = ("pick", "cup", "red", "place", "sink", "drawer", "open", "the"),
                   instruction: str | None = None) -> Episode:
    """An episode of random embeddings (1 or 2 instances a frame), random narrations and hashes."""
    embeddings = [rng.standard_normal((int(rng.integers(1, 3)), dimension)).astype(np.float32)
                  for _ in range(frames)]
    texts = [None if rng.random() < 0.2 else " ".join(rng.choice(list(words), size=int(rng.integers(2, 6))))
             for _ in range(frames)]
    hashes = [rng.integers(0, 256, (1, 4), dtype=np.uint8) for _ in range(frames)]
    return Episode(segment_id, embeddings, texts, hashes, instruction)


def write_episode(directory: Path, episode: Episode, *, name: str | None = None) -> str:
    """The episode as an ``.rrd``; returns its ``file://`` URI."""
    import rerun as rr

    path = directory / f"{name or episode.segment_id}.rrd"
    rec = rr.RecordingStream("strata-search-test", recording_id=episode.segment_id)
    rec.save(path)
    for n, vectors in enumerate(episode.embeddings):
        rec.set_time(TIMELINE, sequence=episode.first_frame + n)
        dimension = vectors.shape[1]
        rec.log("camera", rr.AnyValues(embedding=pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.ravel(), pa.float32()), dimension)))
        if n < len(episode.hashes):
            hashed = episode.hashes[n]
            rec.log("camera", rr.AnyValues(hash=pa.FixedSizeListArray.from_arrays(
                pa.array(hashed.ravel(), pa.uint8()), hashed.shape[1])))
        if n < len(episode.texts) and episode.texts[n] is not None:
            rec.log("narration", rr.TextDocument(episode.texts[n]))
    if episode.instruction is not None:
        rec.log("task", rr.TextDocument(episode.instruction), static=True)
    rec.flush()
    del rec
    return path.as_uri()


def expected_rows(episodes: Sequence[Episode]) -> dict[str, list[tuple[str, int, int, object]]]:
    """What each column's index holds of ``episodes``, computed from the episodes themselves:
    (segment, frame, instance, value) per instance; a static instruction's frame is None."""
    Row = tuple[str, int, int, object]
    rows: dict[str, list[Row]] = {c: [] for c in (EMBEDDING, HASH, NARRATION, INSTRUCTION)}
    for episode in episodes:
        for n, vectors in enumerate(episode.embeddings):
            frame = episode.first_frame + n
            rows[EMBEDDING] += [(episode.segment_id, frame, i, tuple(v)) for i, v in enumerate(vectors)]
            if n < len(episode.hashes):
                hashed = episode.hashes[n]
                rows[HASH] += [(episode.segment_id, frame, i, tuple(v)) for i, v in enumerate(hashed)]
            if n < len(episode.texts) and episode.texts[n] is not None:
                rows[NARRATION].append((episode.segment_id, frame, 0, episode.texts[n]))
        if episode.instruction is not None:
            rows[INSTRUCTION].append((episode.segment_id, None, 0, episode.instruction))  # type: ignore[arg-type]
    return rows
