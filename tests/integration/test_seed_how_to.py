"""The layers how-to of the seeds, its code run on strata and on Rerun's own server with the same
files; only the connection line differs: ``Server(data_dir, datasets=...)`` (``sdk.Server``) for
``rr.server.Server(datasets=...)``, both started by their constructor."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
import rerun as rr
from datafusion import col

from producers import end_offsets
from stack import Server, demo
from stack.droid import write_episode
from stack_tools import projector_on


def how_to(dataset, directory: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The how-to's three blocks on a dataset of either system; the tables it prints."""
    before = pa.table(dataset.segment_table().select("rerun_segment_id", "rerun_layer_names")
                      .sort(col("rerun_segment_id")))
    demo.add_tracking_error(dataset, directory / "tracking_error")
    stats = demo.add_quality(dataset, directory / "quality")
    after = pa.table(dataset.segment_table()
                     .select("rerun_segment_id", "rerun_layer_names", "property:quality:tracking_good")
                     .sort(col("rerun_segment_id")))
    return before, stats, after


@pytest.mark.store_agnostic  # the SDK's tables against Rerun's
def test_the_how_to_gives_rerun_s_tables(tmp_path: Path, new_store) -> None:
    base = tmp_path / "sample_5"
    demo.write_base(base)
    name = f"sample_dataset_{os.urandom(3).hex()}"

    # The how-to's own lines: the server constructed (which starts it), then its client.
    ours = Server(tmp_path / "strata", datasets={name: base}, store=new_store())
    try:
        strata = how_to(ours.client().get_dataset(name=name), tmp_path / "strata-layers")
    finally:
        ours.shutdown()
    theirs = rr.server.Server(datasets={name: base})
    try:
        rerun = how_to(theirs.client().get_dataset(name=name), tmp_path / "rerun-layers")
    finally:
        theirs.shutdown()

    for ours_table, rerun_table in zip(strata, rerun, strict=True):
        assert ours_table.to_pylist() == rerun_table.to_pylist()
    assert strata[0].column("rerun_layer_names").to_pylist() == [["base"]] * 5
    assert strata[2].column("property:quality:tracking_good").to_pylist() == [
        [False], [False], [True], [True], [True]]


def test_datasets_are_registered_once(own_broker: str, tmp_path: Path, new_store) -> None:
    # Its projectors read their whole log: a broker of its own, whose log holds only this test's.
    directory = tmp_path / "episodes"
    demo.write_base(directory)
    name = f"once_{os.urandom(3).hex()}"
    store = new_store()
    with projector_on(own_broker, tmp_path / "stack", datasets={name: directory},
                      store=store) as first:
        assert sorted(first.client().get_dataset(name=name).segment_ids()) == sorted(demo.SEGMENT_IDS)
    write_episode(directory / "later" / "added.rrd", "added_later", 9)
    log_end = sum(end_offsets(own_broker).values())
    with projector_on(own_broker, tmp_path / "stack", datasets={name: directory},
                      store=store) as again:
        dataset = again.client().get_dataset(name=name)
        assert sorted(dataset.segment_ids()) == sorted([*demo.SEGMENT_IDS, "added_later"])
        # One event: the new recording's; nothing registered twice, no dataset created again.
        assert sum(end_offsets(own_broker).values()) == log_end + 1
