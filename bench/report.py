"""The results of one run as JSON, a markdown table of strata vs rerun, and a plot."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from bench.profile import LogSummary, ProgressSummary
    from bench.rebuild import RebuildResult
    from bench.scenarios import (
        HistoryResult,
        KafkaReadResult,
        LatencyResult,
        ProducerThroughputResult,
        QueryResult,
        ReadResult,
        ReplayResult,
        SdkThroughputResult,
        SparkReadResult,
        StagesResult,
        StartupResult,
        TablesResult,
        WorkersResult,
    )

NOT_APPLICABLE = "n/a"
RESULTS_DIR = Path(__file__).resolve().parent / "results"


class SystemResults(TypedDict, total=False):
    """What one system measured, by scenario (queries and reads by size); ``error`` if it
    stopped early."""

    startup: StartupResult
    latency: LatencyResult
    sdk_throughput: SdkThroughputResult
    queries: dict[str, QueryResult]
    reads: dict[str, ReadResult]
    tables: TablesResult
    error: str


class StrataResults(SystemResults, total=False):
    """And what strata alone measures: workers by pool size."""

    producer_throughput: ProducerThroughputResult
    stages: StagesResult
    history: HistoryResult
    rebuild: RebuildResult
    workers: dict[str, WorkersResult]
    spark_read: SparkReadResult
    latency_profile: ProgressSummary
    live_profile: ProgressSummary
    live_log_profile: LogSummary
    replay: list[ReplayResult]
    kafka_read: KafkaReadResult


class RunResults(TypedDict):
    """One run of ``python -m bench``, as its JSON file holds it (with the table)."""

    date: str
    scale: str
    strata: StrataResults
    rerun: SystemResults
    timings_s: dict[str, float]
    """Seconds per step of the run."""
    options: dict[str, object]
    machine: dict[str, object]


@dataclass
class Row:
    """One line of the comparison table. A value is a number, ``None`` (not measured: see
    ``note``) or ``"n/a"`` (the system has no such scenario)."""

    scenario: str
    metric: str
    better: str
    """"lower" or "higher"."""
    strata: float | str | None
    rerun: float | str | None = NOT_APPLICABLE
    target: float | None = None
    note: str = ""

    def ratio(self) -> float | None:
        if isinstance(self.strata, int | float) and isinstance(self.rerun, int | float) and self.rerun:
            return self.strata / self.rerun
        return None

    def winner(self) -> str:
        ratio = self.ratio()
        if ratio is None:
            return ""
        strata_wins = ratio < 1 if self.better == "lower" else ratio > 1
        return "strata" if strata_wins else "rerun"

    def meets_target(self) -> str:
        if self.target is None or not isinstance(self.strata, int | float):
            return ""
        ok = self.strata <= self.target if self.better == "lower" else self.strata >= self.target
        return "yes" if ok else "no"


def _cell(value: float | str | None) -> str:
    if value is None:
        return "not measured"
    if isinstance(value, str):
        return value
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def markdown(rows: list[Row], header: str) -> str:
    lines = [header, "",
             "| scenario | metric | better | strata | rerun | strata / rerun | winner | target | meets |"
             " note |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- |"]
    for row in rows:
        ratio = row.ratio()
        target = "" if row.target is None else ("<= " if row.better == "lower" else ">= ") + _cell(row.target)
        lines.append(f"| {row.scenario} | {row.metric} | {row.better} | {_cell(row.strata)} | "
                     f"{_cell(row.rerun)} | {'' if ratio is None else f'{ratio:.2f}x'} | {row.winner()} | "
                     f"{target} | {row.meets_target()} | {row.note} |")
    return "\n".join(lines) + "\n"


QUERY_LINES: tuple[tuple[Literal["segment_table_ms", "manifest_ms"], str], ...] = (
    ("segment_table_ms", "-"), ("manifest_ms", "--"))


def plot(results: RunResults, path: Path) -> bool:
    """Latency distributions (ECDF) and query times; False if there is nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems: dict[str, SystemResults] = {"strata": results["strata"], "rerun": results["rerun"]}
    latency = {name: measured["latency"].get("samples_ms") if "latency" in measured else None
               for name, measured in systems.items()}
    queries = {name: measured.get("queries") for name, measured in systems.items()}
    if not any(latency.values()) and not any(queries.values()):
        return False
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for name, samples in latency.items():
        if samples:
            ordered = sorted(samples)
            left.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post",
                      label=f"{name} (n={len(ordered)})")
    left.axvline(150, linestyle="--", color="grey", linewidth=0.8, label="target p50 150 ms")
    left.axvline(400, linestyle=":", color="grey", linewidth=0.8, label="target p99 400 ms")
    left.set_xscale("log")
    left.set_xlabel("register([uri]).wait() latency (ms, log scale)")
    left.set_ylabel("fraction of calls")
    left.set_title("Read-your-writes latency")
    left.legend()
    for name, marker in (("strata", "o"), ("rerun", "s")):
        sizes = queries[name] or {}
        xs = [int(size) for size in sizes]
        for query, style in QUERY_LINES:
            if xs:
                right.plot(xs, [sizes[str(x)][query] for x in xs], style, marker=marker,
                           label=f"{name} {query.removesuffix('_ms')}()")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("segments (3 layers each)")
    right.set_ylabel("to_arrow_table() time (ms)")
    right.set_title("Queries")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write(results: RunResults, rows: list[Row], directory: Path, stem: str, header: str) -> dict[str, Path]:
    """``<stem>.json``, ``<stem>.md`` and ``<stem>.png`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"json": directory / f"{stem}.json", "markdown": directory / f"{stem}.md"}
    table = markdown(rows, header)
    paths["markdown"].write_text(table)
    png = directory / f"{stem}.png"
    if plot(results, png):
        paths["plot"] = png
    document = {**results, "table": [asdict(row) | {"ratio": row.ratio()} for row in rows]}
    paths["json"].write_text(json.dumps(document, indent=2, default=str) + "\n")
    return paths


def save(module: str, results: Mapping[str, object], table: str) -> None:
    """A one-system benchmark's run (``python -m bench.<module>``): ``<date>-<module>.json`` with
    every number and ``.md`` with its table, under ``RESULTS_DIR``; the table printed."""
    RESULTS_DIR.mkdir(exist_ok=True)
    stem = RESULTS_DIR / f"{results['date']}-{module}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    stem.with_suffix(".md").write_text(f"# python -m bench.{module} ({results['date']})\n\n{table}\n")
    print(table)
