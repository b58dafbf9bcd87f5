"""The layers how-to of the seeds (001), end to end on the real broker and Spark job."""

from __future__ import annotations

import pyarrow as pa
import pytest

import sdk

SEGMENTS = [
    "ILIAD_50aee79f_2023_07_12_20h_55m_08s",
    "ILIAD_5e938e3b_2023_07_20_10h_40m_10s",
    "ILIAD_5e938e3b_2023_07_28_11h_25m_26s",
    "ILIAD_j807b3f8_2023_06_15_13h_42m_56s",
    "ILIAD_sbd7d2c6_2023_12_24_16h_20m_37s",
]
TRACKING_GOOD = [False, False, True, True, True]


def table(df) -> pa.Table:
    return df.to_arrow_table()


def test_layers_how_to(dataset: sdk.DatasetEntry, make_rrd) -> None:
    base = [make_rrd(s, name=f"{s}-base") for s in SEGMENTS]
    result = dataset.register(base).wait(timeout_secs=60)
    assert result.segment_ids == SEGMENTS
    rows = table(dataset.segment_table().select("rerun_segment_id", "rerun_layer_names"))
    assert rows.to_pylist() == [
        {"rerun_segment_id": s, "rerun_layer_names": ["base"]} for s in SEGMENTS]

    tracking = [make_rrd(s, name=f"{s}-tracking") for s in SEGMENTS]
    assert dataset.register(tracking, layer_name="tracking_error").wait().segment_ids == SEGMENTS
    rows = table(dataset.segment_table())
    assert rows.column("rerun_layer_names").to_pylist() == [["base", "tracking_error"]] * 5

    quality = [make_rrd(s, name=f"{s}-quality", properties={"quality": {"tracking_good": good}})
               for s, good in zip(SEGMENTS, TRACKING_GOOD, strict=True)]
    assert dataset.register(quality, layer_name="quality").wait().segment_ids == SEGMENTS

    segment_table = table(dataset.segment_table())
    assert segment_table.column("rerun_segment_id").to_pylist() == SEGMENTS
    assert segment_table.column("rerun_layer_names").to_pylist() == [
        ["base", "tracking_error", "quality"]] * 5
    assert segment_table.column("property:quality:tracking_good").to_pylist() == [
        [good] for good in TRACKING_GOOD]
    assert segment_table.column("rerun_storage_urls").to_pylist() == [
        [b, t, q] for b, t, q in zip(base, tracking, quality, strict=True)]

    manifest = table(dataset.manifest())
    assert manifest.num_rows == 15
    got = {(r["rerun_segment_id"], r["rerun_layer_name"]): r["property:quality:tracking_good"]
           for r in manifest.to_pylist()}
    expected = {}
    for segment, good in zip(SEGMENTS, TRACKING_GOOD, strict=True):
        expected[(segment, "base")] = None
        expected[(segment, "tracking_error")] = None
        expected[(segment, "quality")] = [good]
    assert got == expected
    assert dataset.segment_ids() == SEGMENTS


def test_duplicate_layer_fails_with_error_and_replaces_with_replace(
        dataset: sdk.DatasetEntry, make_rrd) -> None:
    first = make_rrd("seg_dup", name="first", properties={"quality": {"score": 1}})
    second = make_rrd("seg_dup", name="second", properties={"quality": {"score": 2}})
    other = make_rrd("seg_other")
    dataset.register([first]).wait()
    dataset.register([other], layer_name="extra").wait()

    with pytest.raises(ValueError, match=r'Segment "seg_dup", layer "base": already exists'):
        dataset.register([second]).wait()
    # The first registration in log order still holds.
    assert table(dataset.manifest()).to_pylist()[0]["rerun_storage_url"] == first

    results = list(dataset.register([second, other], layer_name=["base", "base"]).iter_results())
    assert [r.error is None for r in results] == [False, True]
    assert "already exists" in results[0].error

    assert dataset.register([second], on_duplicate="skip").wait().segment_ids == ["seg_dup"]
    assert table(dataset.segment_table()).column("rerun_storage_urls").to_pylist()[0] == [first]

    dataset.register([make_rrd("seg_dup", name="layer_b")], layer_name="b").wait()
    dataset.register([second], on_duplicate="replace").wait()
    row = table(dataset.segment_table()).to_pylist()[0]
    # The replaced layer moves to the end and wins property merges.
    assert row["rerun_layer_names"] == ["b", "base"]
    assert row["rerun_storage_urls"][-1] == second
    assert row["property:quality:score"] == [2]


def test_wait_returns_only_once_the_change_is_visible(dataset: sdk.DatasetEntry, make_rrd) -> None:
    for i in range(5):
        uri = make_rrd(f"visible_{i}")
        dataset.register([uri]).wait()
        assert f"visible_{i}" in dataset.segment_ids()
        assert table(dataset.manifest()).column("rerun_storage_url").to_pylist()[-1] == uri


def test_catalog_entries(client: sdk.CatalogClient, dataset: sdk.DatasetEntry) -> None:
    assert dataset.name in client.dataset_names()
    assert client.get_dataset(name=dataset.name).id == dataset.id
    assert client.get_dataset(id=dataset.id).name == dataset.name
    with pytest.raises(sdk.AlreadyExistsError):
        client.create_dataset(dataset.name)
    assert client.create_dataset(dataset.name, exist_ok=True).id == dataset.id
    with pytest.raises(LookupError):
        client.get_dataset(name="no such dataset")
    with pytest.raises(sdk.NotFoundError):
        client.get_dataset(id="00000000-0000-0000-0000-000000000000")
    assert dataset.id in [d.id for d in client.datasets()]
