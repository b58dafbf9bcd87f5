"""Stopping and restarting the stack, politely or by kill -9: every event lands exactly once."""

from __future__ import annotations

import re
import shutil
import signal

import pyarrow as pa

from stack import Server
from stack_tools import wait_until
from stores import dump


def counts(server: Server) -> dict[str, int]:
    return {table: len(rows) for table, rows in dump(server.store).items()
            if table in ("datasets", "schemas", "segments", "layers", "outcomes")}


def test_restart_mid_way_applies_every_event_once(tmp_path, make_rrd, new_store) -> None:
    data_dir = tmp_path / "stack"
    uris = [make_rrd(f"restart_{i}") for i in range(30)]
    store = new_store()
    with Server(data_dir, store=store, protocol_port=None) as first:
        dataset = first.client().create_dataset("restart")
        dataset.register(uris[:10]).wait()
        # In flight when the stack stops: sent, not awaited.
        dataset.register(uris[10:20])
        broker_port = first.broker.port

    with Server(data_dir, store=store, protocol_port=None) as second:
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
        # The first register() defined the files' schema and their properties' schema, once: the
        # later calls, from another client too, found them in the store.
        # The dataset and its hidden blueprint and asset datasets.
        assert counts(second) == {"datasets": 3, "schemas": 2, "segments": 30, "layers": 30,
                                  "outcomes": 1 + 2 + 30}
        table: pa.Table = dataset.segment_table().to_arrow_table()
        assert table.column("rerun_layer_names").to_pylist() == [["base"]] * 30
        offsets = client._internal.wait_for_store().next_offsets()
        assert sum(offsets.values()) == 33


def test_a_lost_checkpoint_resumes_from_the_store_offsets(tmp_path, make_rrd, new_store) -> None:
    data_dir = tmp_path / "stack"
    uris = [make_rrd(f"lost_{i}") for i in range(6)]
    store = new_store()
    with Server(data_dir, store=store, protocol_port=None) as first:
        first.client().create_dataset("lost").register(uris[:3]).wait()
    shutil.rmtree(first.checkpoint_dir)
    earlier_log = first.projector_log.read_text()

    with Server(data_dir, store=store, protocol_port=None) as second:
        dataset = second.client().get_dataset(name="lost")
        dataset.register(uris[3:]).wait(timeout_secs=120)
        assert dataset.segment_ids() == [f"lost_{i}" for i in range(6)]
        offsets = second.client()._internal.wait_for_store().next_offsets()
        assert sum(offsets.values()) == 1 + 2 + 6  # 2 schemas defined
        # The projector logs a batch after committing it, so a reader that has seen the commit may
        # be ahead of the log line, and stopping the projector then may cancel the line: wait for
        # the lines of the 3 new records (of more, if the store's offsets were not used).
        wait_until(lambda: records_read(second.projector_log.read_text().removeprefix(earlier_log)) >= 3,
                   120, "the projector's lines of the new records' batches")
    # Only the 3 new registrations were read, not the 6 records the store already held.
    assert records_read(second.projector_log.read_text().removeprefix(earlier_log)) == 3


def records_read(log: str) -> int:
    """The records of every batch the projector logged in ``log``."""
    return sum(int(n) for n in re.findall(r"batch \d+: (\d+) records", log))
