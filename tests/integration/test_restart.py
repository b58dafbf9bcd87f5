"""Stopping and restarting the stack, politely or by kill -9: every event lands exactly once."""

from __future__ import annotations

import signal

import pyarrow as pa

from sdk._server import Server


def counts(server: Server) -> dict[str, int]:
    db = server.client()._store.db
    return {table: db[table].count for table in ("datasets", "segments", "layers", "outcomes")}


def test_restart_mid_way_applies_every_event_once(tmp_path, make_rrd) -> None:
    data_dir = tmp_path / "stack"
    uris = [make_rrd(f"restart_{i}") for i in range(30)]
    with Server(data_dir) as first:
        dataset = first.client().create_dataset("restart")
        dataset.register(uris[:10]).wait()
        # In flight when the stack stops: sent, not awaited.
        dataset.register(uris[10:20])
        broker_port = first.broker.port

    with Server(data_dir) as second:
        assert second.broker.port == broker_port
        client = second.client()
        dataset = client.get_dataset(name="restart")
        late = dataset.register(uris[20:25])
        # kill -9 the projector mid-stream, then restart it.
        second._projector.send_signal(signal.SIGKILL)
        second._projector.wait()
        second.start_projector()
        late.wait(timeout_secs=120)
        dataset.register(uris[25:]).wait(timeout_secs=120)

        segment_ids = dataset.segment_ids()
        assert segment_ids == [f"restart_{i}" for i in range(30)]
        assert counts(second) == {"datasets": 1, "segments": 30, "layers": 30, "outcomes": 31}
        table: pa.Table = dataset.segment_table().to_arrow_table()
        assert table.column("rerun_layer_names").to_pylist() == [["base"]] * 30
        offsets = client._store.next_offsets()
        assert sum(offsets.values()) == 31
