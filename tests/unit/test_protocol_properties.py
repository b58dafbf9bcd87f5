"""Segment properties through Rerun's client: ``register_asset()`` writes an asset's scope as its
``asset`` property, ``add_segments_to_asset()`` edits it at the revision it read, a stale
revision is Rerun's ``FailedPrecondition`` (its client's ``RuntimeError``) with nothing changed,
``delete_segment_properties()`` removes it; what strata keeps is the same scope either way."""

from __future__ import annotations

import pyarrow as pa
import pytest
import rerun as rr

import sdk

from .test_dataset_entry import static_recording
from .test_registration import recording


@pytest.fixture
def assets(served, stack, tmp_path):
    """Rerun's client's ``droid`` and its asset dataset, with two episodes and the asset ``mesh``
    registered through it."""
    stack.dataset.register([recording(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    theirs = rr.catalog.CatalogClient(served.url).get_dataset("droid")
    assert theirs.register_asset(static_recording(tmp_path / "mesh.rrd", "mesh"), mode="opt_in",
                                 segments=["ep_0"]) == "mesh"
    return theirs, theirs.asset_dataset()


def test_register_asset_writes_the_scope_and_rerun_s_client_edits_it_at_its_revision(assets, stack) -> None:
    theirs, asset_dataset = assets
    ours = stack.dataset.asset_dataset()
    mode, segments, revision = asset_dataset._read_asset_property("mesh")
    assert (mode, segments) == ("OptIn", ["ep_0"]) and revision > 0
    properties, stored = ours.get_segment_properties("mesh")
    assert stored == revision
    assert properties.to_pylist() == [{"property:asset:mode": ["OptIn"], "property:asset:segments": ["ep_0"]}]
    assert theirs.assets_for_segment("ep_0") == ["mesh"] and theirs.assets_for_segment("ep_1") == []

    theirs.add_segments_to_asset("mesh", ["ep_1"])
    scope = stack.client.get_dataset("droid").asset_dataset().get_segment_properties("mesh")
    assert scope is not None and scope[0].column("property:asset:segments").to_pylist() == [["ep_0", "ep_1"]]
    assert theirs.assets_for_segment("ep_1") == ["mesh"]
    assert stack.dataset.assets_for_segment("ep_1") == ["mesh"]  # strata's client: the same scope
    theirs.remove_segments_from_asset("mesh", ["ep_0"])
    assert asset_dataset._read_asset_property("mesh")[:2] == ("OptIn", ["ep_1"])


def test_a_stale_revision_is_refused_with_nothing_changed(assets, stack) -> None:
    _, asset_dataset = assets
    _, _, revision = asset_dataset._read_asset_property("mesh")
    sent = stack.producer.next_offset
    with pytest.raises(RuntimeError, match=rf"was changed meanwhile: expected revision 1, found {revision}"):
        asset_dataset._write_asset_property("mesh", mode="OptOut", segments=[], expected_revision=1)
    assert stack.producer.next_offset == sent + 1  # the command went to the log, and the fold refused it
    assert asset_dataset._read_asset_property("mesh") == ("OptIn", ["ep_0"], revision)
    with pytest.raises(sdk.RevisionConflictError, match="expected revision 0"):
        stack.dataset.asset_dataset().set_segment_properties(
            "mesh", pa.table({"property:asset:mode": [["OptOut"]]}), expected_revision=0)


def test_deleted_properties_are_gone_and_the_asset_applies_to_every_segment(assets, stack) -> None:
    theirs, asset_dataset = assets
    asset_dataset.delete_segment_properties(["mesh", "never-scoped"])
    assert asset_dataset._internal._get_segment_properties("mesh") is None
    assert asset_dataset._read_asset_property("mesh") == ("OptOut", [], 0)
    assert theirs.assets_for_segment("ep_1") == ["mesh"]
    asset_dataset._write_asset_property("mesh", mode="OptIn", segments=["ep_1"], expected_revision=0)
    scope = stack.dataset.asset_dataset().get_segment_properties("mesh")
    assert scope is not None and scope[1] > 0
    assert stack.dataset.assets_for_segment("ep_0") == []


def test_other_properties_are_invalid_arguments_and_other_datasets_have_none(assets, stack) -> None:
    theirs, asset_dataset = assets
    before = asset_dataset._read_asset_property("mesh")
    with pytest.raises(ValueError, match="strata keeps one segment property, the scope of an asset"):
        asset_dataset._internal._set_segment_properties(
            "mesh", pa.RecordBatch.from_pydict({"property:foo:bar": [[1]]}), None)
    with pytest.raises(ValueError, match="'OptSideways': an asset's mode is OptOut or OptIn"):
        asset_dataset._write_asset_property("mesh", mode="OptSideways", segments=[])
    assert asset_dataset._read_asset_property("mesh") == before
    assert theirs._internal._get_segment_properties("ep_0") is None
    theirs.delete_segment_properties("ep_0")  # none to delete: a no-op, as on Rerun's server
    with pytest.raises(ValueError, match="'droid' is not an asset dataset"):
        stack.dataset.set_segment_properties("ep_0", pa.table({"property:asset:mode": [["OptIn"]]}))
    assert stack.dataset.asset_dataset().get_segment_properties("mesh")[0].num_rows == 1
    assert stack.client.get_dataset("droid").assets_for_segment("ep_0") == ["mesh"]
