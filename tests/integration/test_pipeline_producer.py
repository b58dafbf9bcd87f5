"""A pipeline that never imports strata registers recordings with examples/pipeline_producer.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import sdk
from producers import Position
from stack import Server

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pipeline_producer.py"
SAME = ["rerun_segment_id", "rerun_layer_names", "rerun_storage_urls", "rerun_size_bytes"]


def run_example(server: Server, dataset: sdk.DatasetEntry, *args: str) -> list[Position]:
    done = subprocess.run([sys.executable, str(EXAMPLE), "--bootstrap-servers", server.bootstrap_servers,
                           "--dataset-id", str(dataset.id), *args],
                          capture_output=True, text=True, timeout=120, check=True)
    positions = []
    for line in done.stdout.split():
        topic, _, rest = line.partition("[")
        partition, _, offset = rest.partition("]@")
        positions.append(Position(topic, int(partition), int(offset)))
    return positions


def test_pipeline_events_are_projected_like_the_sdks(server: Server, client: sdk.CatalogClient,
                                                     make_rrd, request) -> None:
    uris = [make_rrd(f"pipe_{i}") for i in range(3)]
    by_pipeline = client.create_dataset(f"pipeline-{request.node.name}")
    by_sdk = client.create_dataset(f"sdk-{request.node.name}")

    positions = run_example(server, by_pipeline, *(f"pipe_{i}={u}" for i, u in enumerate(uris)))
    positions += run_example(server, by_pipeline, "--layer", "extra", f"pipe_1={uris[1]}")
    positions += run_example(server, by_pipeline, f"pipe_0={uris[2]}")  # duplicate: rejected
    client._internal.wait(positions, 60)
    by_sdk.register(uris).wait()
    by_sdk.register([uris[1]], layer_name="extra").wait()
    duplicate = next(by_sdk.register([make_rrd("pipe_0", name="pipe_0_again")]).iter_results())

    assert len(positions) == 5
    pipeline_rows = by_pipeline.segment_table().select(*SAME).to_arrow_table().to_pylist()
    assert pipeline_rows == by_sdk.segment_table().select(*SAME).to_arrow_table().to_pylist()
    assert [r["rerun_layer_names"] for r in pipeline_rows] == [["base"], ["base", "extra"], ["base"]]
    outcomes = [client._internal.wait_for_store().outcome_at(p) for p in positions]
    assert [o.status for o in outcomes] == ["accepted"] * 4 + ["already_exists"]
    assert outcomes[-1].reason == duplicate.error
    # The schema came by reference, defined by the pipeline before its first RegisterLayer.
    assert by_pipeline.arrow_schema() == by_sdk.arrow_schema()
    assert {layer.schema_sha256 for layer in client._internal.wait_for_store().layers(by_pipeline.id)} != {""}
