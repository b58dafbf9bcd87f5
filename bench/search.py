"""``python -m bench.search``: the search indexes on generated DROID-like episodes, each with an
embeddings layer (``stack.droid.write_embeddings``: 120 steps of 768 floats and a narration per
step), on an embedded stack (``sdk.Server``: broker, Spark projector, the indexes' follower).

  build         from ``create_vector_index`` until ``list_indexes()`` covers every row: the
                command through Kafka and the projector, then the follower reading each
                segment's rows, writing the Lance copy, training IVF_SQ (also timed from the
                command's outcome, the follower's part)
  vector        ``search_vector(..., top_k=10)`` p50 through the SDK, trained, and its recall@10
                against the exact top 10 (numpy on the same rows, the baseline)
  exact         the same query searched exactly by Lance (every row compared) and by numpy
  full text     ``search_fts`` p50 over the narrations
  after wait    a new episode's ``register(...).wait()``, then the first ``search_vector`` that
                finds it: its time against a search's p50 is the wait the index added

Prints the table and writes bench/results/<date>-search.{json,md}. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import sdk
from recordings.segments import SEGMENT_ID
from search import copies
from search.rows import VALUE
from settings import search_indexes
from stack import droid

RESULTS_DIR = Path(__file__).resolve().parent / "results"
COLUMN = f"{droid.EMBEDDING_ENTITY}:embedding"
TEXT = f"{droid.NARRATION_ENTITY}:TextDocument:text"
STEPS = 120


def _write(directory: Path, index: int) -> str:
    path = directory / f"emb_{index:05d}.rrd"
    if not path.exists():
        droid.write_embeddings(path, f"episode_{index:05d}", index, steps=STEPS)
    return path.as_uri()


def episodes(directory: Path, count: int, first: int = 0) -> list[str]:
    """``count`` embeddings layers (kept in ``directory`` for the next run), two at a time (in
    processes of their own: this one has Lance's threads, which a fork does not copy)."""
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_write, [directory] * count, range(first, first + count)))


def p50(call: Any, queries: list[Any]) -> tuple[float, list[Any]]:
    """The median time of ``call(q)`` over ``queries`` (ms), and the answers."""
    times, answers = [], []
    for q in queries:
        started = time.perf_counter()
        answers.append(call(q))
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, answers


def wait_covered(dataset: Any, column: str, rows: int, timeout_secs: float = 3600) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_secs:
        listed = {r["column"]: r for r in pa.table(dataset.list_indexes()).to_pylist()}
        if listed.get(column, {}).get("rows") == rows and listed[column]["search"] != "building":
            return time.perf_counter() - started
        time.sleep(0.05)
    raise TimeoutError(f"the index of {column} did not cover {rows} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=834, help="episodes of 120 steps (834: 100,080 rows)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--files", type=Path, default=Path(tempfile.gettempdir()) / "strata-bench-search",
                        help="where the episodes are written, and found again by the next run")
    args = parser.parse_args()
    args.files.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    uris = episodes(args.files, args.episodes)
    print(f"{len(uris)} episodes in {args.files} ({time.perf_counter() - started:.0f} s)", flush=True)
    rows = args.episodes * STEPS
    results: dict[str, Any] = {"episodes": args.episodes, "rows": rows, "dimension": 768}
    with tempfile.TemporaryDirectory() as data, sdk.Server(data, protocol_port=None) as server:
        client = server.client()
        dataset = client.create_dataset("search_bench")
        for start in range(0, len(uris), 200):
            dataset.register(uris[start:start + 200], layer_name="embeddings").wait(timeout_secs=600)
        print(f"registered {len(uris)} layers", flush=True)

        begun = time.perf_counter()
        dataset.create_vector_index(column=COLUMN, time_index="real_time", distance_metric="Cosine")
        applied = time.perf_counter()  # the command is in the store: the follower starts
        wait_covered(dataset, COLUMN, rows)
        build = time.perf_counter() - begun
        results["build_secs"] = round(build, 2)
        results["build_rows_per_sec"] = round(rows / build)
        results["build_after_command_secs"] = round(time.perf_counter() - applied, 2)
        results["build_after_command_rows_per_sec"] = round(rows / (time.perf_counter() - applied))
        listed = pa.table(dataset.list_indexes()).to_pylist()[0]
        results["vector_search_mode"] = listed["search"]
        print(f"vector index: {rows} rows in {build:.1f} s ({rows / build:,.0f} rows/s), {listed['search']}",
              flush=True)

        store_dir = search_indexes(str(Path(data) / "store.db"))
        copy_path = next(Path(store_dir).glob(f"{dataset.id}/*embedding.lance"))
        table = copies.open_dataset(str(copy_path)).to_table(columns=[SEGMENT_ID, "real_time", VALUE])
        vectors = np.stack(table.column(VALUE).to_numpy(zero_copy_only=False)).astype(np.float32)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        rng = np.random.default_rng(1)
        queries = [vectors[i] + rng.normal(0, 0.1, 768).astype(np.float32)
                   for i in rng.integers(0, len(vectors), args.queries)]
        keys = list(zip(table.column(SEGMENT_ID).to_pylist(), table.column("real_time").to_pylist(),
                        strict=True))

        def exact_numpy(q: np.ndarray) -> set[Any]:
            return {keys[i] for i in np.argsort(1 - unit @ (q / np.linalg.norm(q)))[:10]}

        numpy_ms, exact = p50(exact_numpy, queries)
        vector_ms, found = p50(lambda q: pa.table(dataset.search_vector(q, COLUMN, top_k=10)), queries)
        recall = np.mean([len(e & set(zip(f.column(SEGMENT_ID).to_pylist(), f.column("real_time").to_pylist(),
                                          strict=True))) / 10 for e, f in zip(exact, found, strict=True)])
        lance_copy = copies.open_dataset(str(copy_path))
        lance_exact_ms, _ = p50(lambda q: lance_copy.to_table(nearest={
            "column": VALUE, "q": q, "k": 10, "metric": "cosine", "use_index": False}), queries[:10])
        results.update(vector_p50_ms=round(vector_ms, 2), recall_at_10=round(float(recall), 3),
                       exact_numpy_p50_ms=round(numpy_ms, 2), exact_lance_p50_ms=round(lance_exact_ms, 2))
        print(f"vector search p50 {vector_ms:.1f} ms, recall@10 {recall:.3f}; exact: numpy "
              f"{numpy_ms:.1f} ms, Lance {lance_exact_ms:.1f} ms", flush=True)

        begun = time.perf_counter()
        dataset.create_fts_index(column=TEXT, time_index="real_time")
        wait_covered(dataset, TEXT, rows)
        text_build = time.perf_counter() - begun
        words = ["red cup", "lifting sponge", "marker", "grasping the towel", "blue block", "spoon"]
        text_ms, _ = p50(lambda w: pa.table(dataset.search_fts(w, TEXT, limit=10)), words * 5)
        results.update(text_build_secs=round(text_build, 2), text_p50_ms=round(text_ms, 2))
        print(f"full text: {rows} texts indexed in {text_build:.1f} s, search p50 {text_ms:.1f} ms",
              flush=True)

        extra = episodes(args.files, 5, first=100_000)
        waits = []
        for n, uri in enumerate(extra):
            dataset.register(uri, layer_name="embeddings").wait()
            target = droid.embeddings(100_000 + n, STEPS, 768)[0]
            begun = time.perf_counter()
            hits = pa.table(dataset.search_vector(target, COLUMN, top_k=1))
            waits.append((time.perf_counter() - begun) * 1000)
            assert hits.column(SEGMENT_ID)[0].as_py() == f"episode_{100_000 + n:05d}", "not found at once"
        results.update(after_wait_search_ms=round(statistics.median(waits), 1))
        print(f"a registration's first search after its wait(): {statistics.median(waits):.1f} ms "
              f"(a search alone: {vector_ms:.1f} ms)", flush=True)
    write_results(results)


def write_results(results: dict[str, Any]) -> None:
    day = datetime.date.today().isoformat()
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{day}-search.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["| measure | value |", "|---|---:|", *[f"| {k} | {v} |" for k, v in results.items()]]
    (RESULTS_DIR / f"{day}-search.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
