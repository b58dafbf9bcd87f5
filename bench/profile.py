"""Where a micro-batch's time goes: Spark's ``StreamingQueryProgress.durationMs`` (from the
event log ``bench.probe`` has Spark write) and the projector log's own fetch vs fold+commit times."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import NotRequired, TypeAlias, TypedDict

DURATION_KEYS = ("triggerExecution", "latestOffset", "queryPlanning", "walCommit", "addBatch",
                 "commitOffsets", "getBatch")
PROGRESS_EVENT = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
BATCH_LINE = re.compile(r"batch (\d+): (\d+) records.*fetch (\d+) ms, fold and commit (\d+) ms")


class SourceProgress(TypedDict):
    numInputRows: int


class Progress(TypedDict):
    """The fields read here of a ``StreamingQueryProgress`` in Spark's event log."""

    sources: list[SourceProgress]
    durationMs: dict[str, int]
    numInputRows: int
    """Left out of the event log: summed from ``sources`` when read."""


ProgressSummary: TypeAlias = dict[str, float | dict[str, float]]
"""``batches``, ``rows``, ``rows_per_batch_median`` and, per ``durationMs`` key, its
``median_ms``, ``p90_ms`` and ``total_ms``."""


class LogSummary(TypedDict):
    batches: int
    records: NotRequired[int]
    fetch_median_ms: NotRequired[float]
    fetch_total_ms: NotRequired[int]
    fold_commit_median_ms: NotRequired[float]
    fold_commit_total_ms: NotRequired[int]


def progress_batches(event_log_dir: Path) -> list[Progress]:
    """The progress of every micro-batch that read at least one record, from the event logs of
    every projector run in ``event_log_dir``, in the order the runs started."""
    batches: list[Progress] = []
    logs = sorted(event_log_dir.glob("*"), key=lambda p: p.stat().st_mtime) if event_log_dir.exists() else []
    for log in logs:
        for line in log.read_text().splitlines():
            if PROGRESS_EVENT not in line:
                continue
            try:
                progress: Progress = json.loads(line)["progress"]
            except (ValueError, KeyError):  # the last line of a log still being written
                continue
            # The event log leaves out the total that StreamingQueryProgress.json computes.
            progress["numInputRows"] = sum(source["numInputRows"] for source in progress["sources"])
            if progress["numInputRows"] > 0:
                batches.append(progress)
    return batches


def summarize_progress(batches: list[Progress]) -> ProgressSummary:
    """Batch count, rows, and per ``durationMs`` key the median, p90 and total milliseconds."""
    if not batches:
        return {"batches": 0}
    summary: ProgressSummary = {"batches": len(batches), "rows": sum(b["numInputRows"] for b in batches),
               "rows_per_batch_median": statistics.median(b["numInputRows"] for b in batches)}
    for key in DURATION_KEYS:
        values = [b["durationMs"][key] for b in batches if key in b["durationMs"]]
        if values:
            values.sort()
            summary[key] = {"median_ms": statistics.median(values),
                            "p90_ms": values[min(len(values) - 1, round(0.9 * (len(values) - 1)))],
                            "total_ms": sum(values)}
    return summary


def summarize_log(path: Path) -> LogSummary:
    """From the projector log's per-batch lines: medians and totals of fetch and fold+commit."""
    if not path.exists():
        return {"batches": 0}
    rows = [tuple(int(x) for x in m.groups()) for m in BATCH_LINE.finditer(path.read_text())]
    rows = [r for r in rows if r[1] > 0]
    if not rows:
        return {"batches": 0}
    fetch = [r[2] for r in rows]
    fold = [r[3] for r in rows]
    return {"batches": len(rows), "records": sum(r[1] for r in rows),
            "fetch_median_ms": statistics.median(fetch), "fetch_total_ms": sum(fetch),
            "fold_commit_median_ms": statistics.median(fold), "fold_commit_total_ms": sum(fold)}


def small_batches(batches: list[Progress], *, max_rows: int = 2) -> list[Progress]:
    """Batches of one or two records: the read-your-writes path."""
    return [b for b in batches if b["numInputRows"] <= max_rows]
