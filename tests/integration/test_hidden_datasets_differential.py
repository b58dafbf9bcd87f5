"""Hidden blueprint and asset datasets on strata against Rerun's own catalog server, the cases of
Rerun's end-to-end suite (``test_blueprint_dataset``, ``test_dataset_delete``): the same calls on
both, the same answers, and the same words in the errors users match on."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
import rerun as rr
import rerun.blueprint as rrb

import sdk

NOT_FOUND = rr.catalog.NotFoundError  # strata's are Rerun's too
ALREADY_EXISTS = rr.catalog.AlreadyExistsError


@pytest.fixture(scope="module")
def rbl(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two blueprint files, as ``rr.blueprint.Blueprint.save`` writes them."""
    directory = tmp_path_factory.mktemp("blueprints")
    uris = []
    for i, origin in enumerate(("/camera", "/arm")):
        path = directory / f"table_blueprint{i}.rbl"
        rrb.Blueprint(rrb.Spatial2DView(origin=origin)).save("strata-blueprints", path)
        uris.append(path.as_uri())
    return uris


def _name(stem: str) -> str:
    return f"{stem}_{os.urandom(3).hex()}"  # a table name is an SQL identifier for Rerun


def _both(client: sdk.CatalogClient, rerun_client, make) -> list:
    """``make(catalog client)`` on strata, then on Rerun."""
    return [make(client), make(rerun_client)]


def test_a_dataset_has_hidden_blueprint_and_asset_datasets(client, rerun_client) -> None:
    name = _name("hidden")
    for catalog in (client, rerun_client):
        dataset = catalog.create_dataset(name)
        blueprints, assets = dataset.blueprint_dataset(), dataset.asset_dataset()
        owner = str(dataset.id).replace("-", "")  # strata's ids are UUIDs, named by their hex
        assert (blueprints.name, assets.name) == (f"__bp_{owner}", f"__as_{owner}")
        assert int(blueprints.kind) == int(rr.catalog.EntryKind.BLUEPRINT_DATASET)
        assert int(assets.kind) == int(rr.catalog.EntryKind.ASSET_DATASET)
        assert blueprints.segment_ids() == [] and assets.segment_ids() == []
        # Hidden: listed only when asked for, found by name and id all the same.
        assert name in catalog.dataset_names()
        assert blueprints.name not in catalog.dataset_names() + catalog.entry_names()
        assert {blueprints.name, assets.name} <= set(catalog.dataset_names(include_hidden=True))
        assert {blueprints.name, assets.name} <= set(catalog.entry_names(include_hidden=True))
        assert catalog.get_dataset(blueprints.name).id == blueprints.id
        assert catalog.get_dataset(id=assets.id).name == assets.name
        # A hidden dataset has none of its own.
        assert blueprints.blueprint_dataset() is None and assets.asset_dataset() is None
        with pytest.raises(ALREADY_EXISTS, match="already exists"):
            catalog.create_dataset(blueprints.name)


def test_configure_blueprint_dataset(client, rerun_client, rbl, make_rrd) -> None:
    """Rerun's ``test_configure_blueprint_dataset`` and ``test_reregister_same_blueprint``."""
    episode = make_rrd("episode_0")

    def run(catalog) -> dict:
        dataset = catalog.create_dataset(_name("blueprints"))
        dataset.register([episode]).wait()
        blueprints = dataset.blueprint_dataset()
        dataset.register_blueprint(rbl[0])
        first = dataset.default_blueprint()
        assert blueprints.segment_ids() == dataset.blueprints() == [first]
        dataset.register_blueprint(rbl[1], set_default=False)
        assert len(blueprints.segment_ids()) == 2 and dataset.default_blueprint() == first
        [second] = set(blueprints.segment_ids()) - {first}
        dataset.set_default_blueprint(second)
        assert dataset.default_blueprint() == second
        dataset.register_blueprint(rbl[1])  # the same blueprint again replaces it
        table = pa.table(blueprints.segment_table())
        return {"blueprints": len(dataset.blueprints()),
                "default_is_second": dataset.default_blueprint() == second,
                "layers": table["rerun_layer_names"].to_pylist(),
                "urls": sorted(u for urls in table["rerun_storage_urls"].to_pylist() for u in urls),
                "segments": dataset.segment_ids()}

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs
    assert ours["urls"] == sorted(rbl) and ours["segments"] == ["episode_0"]


def test_a_blueprint_is_named_by_its_id(client, rerun_client, rbl) -> None:
    from rerun.chunk import RrdReader

    [expected] = RrdReader(rbl[0][len("file://"):]).blueprints()

    def run(catalog) -> list[str]:
        dataset = catalog.create_dataset(_name("named"))
        returned = dataset.register_blueprint(rbl[0])
        assert returned in (None, expected.recording_id)  # Rerun returns None, strata the name
        return dataset.blueprints()

    assert _both(client, rerun_client, run) == [[expected.recording_id]] * 2


def test_a_default_blueprint_is_any_name_until_the_blueprint_dataset_is_deleted(client, rerun_client) -> None:
    """Rerun's ``test_table_default_blueprint_uses_creation_blueprint_dataset`` and
    ``test_dataset_default_blueprint_rejects_deleted_blueprint_dataset``."""
    for catalog in (client, rerun_client):
        dataset = catalog.create_dataset(_name("default"))
        dataset.set_default_blueprint("missing_blueprint_segment")
        assert dataset.default_blueprint() == "missing_blueprint_segment"
        dataset.set_default_blueprint(None)
        assert dataset.default_blueprint() is None
        dataset.blueprint_dataset().delete()
        with pytest.raises(Exception, match="dataset blueprint dataset does not exist"):
            dataset.set_default_blueprint("missing_blueprint_segment")
        with pytest.raises(NOT_FOUND):
            dataset.blueprint_dataset()


def test_a_segment_table_blueprint(client, rerun_client, rbl) -> None:
    def run(catalog) -> list:
        dataset = catalog.create_dataset(_name("segment_table"))
        dataset.register_blueprint(rbl[0], segment_table=True)
        first = dataset.default_segment_table_blueprint()
        seen = [first in dataset.blueprints(), dataset.default_blueprint()]
        dataset.register_blueprint(rbl[1], set_default=False, segment_table=True)  # no effect
        seen.append(dataset.default_segment_table_blueprint() == first)
        dataset.set_default_segment_table_blueprint(None)
        return [*seen, dataset.default_segment_table_blueprint(), len(dataset.blueprints())]

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs == [True, None, True, None, 2]


def test_table_blueprints(client, rerun_client, rbl, tmp_path: Path) -> None:
    """Rerun's ``test_configure_table_blueprint_dataset``,
    ``test_table_blueprint_set_default_false_creates_dataset_without_default`` and
    ``test_table_default_blueprint_rejects_deleted_blueprint_dataset``."""
    schema = pa.schema([pa.field("col", pa.int32())])

    def run(catalog) -> dict:
        name = _name("table_with_blueprints")
        url = None if catalog is client else (tmp_path / name).as_uri()  # url= belongs to issue 30
        table = catalog.create_table(name, schema, url)
        blueprints = table.blueprint_dataset()
        assert int(blueprints.kind) == int(rr.catalog.EntryKind.BLUEPRINT_DATASET)
        assert table.blueprints() == [] and table.default_blueprint() is None
        table.register_blueprint(rbl[0], set_default=False)
        assert table.default_blueprint() is None and table.blueprints() == blueprints.segment_ids()
        table.register_blueprint(rbl[1])
        seen = {"blueprints": len(table.blueprints()),
                "default": table.default_blueprint() in table.blueprints(),
                "hidden": blueprints.name in catalog.entry_names(include_hidden=True),
                "listed": blueprints.name in catalog.entry_names()}
        table.set_default_blueprint(None)
        assert table.default_blueprint() is None
        blueprints.delete()
        with pytest.raises(Exception, match="table blueprint dataset does not exist"):
            table.set_default_blueprint("missing_blueprint_segment")
        return seen

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs == {"blueprints": 2, "default": True, "hidden": True, "listed": False}


def test_deleting_a_dataset_deletes_its_hidden_datasets(client, rerun_client, make_rrd) -> None:
    """Rerun's ``test_delete_dataset_removes_catalog_entry`` and
    ``test_deleting_dataset_deletes_asset_dataset``."""
    episode = make_rrd("episode_1")
    for catalog in (client, rerun_client):
        name = _name("deleted")
        dataset = catalog.create_dataset(name)
        dataset.register([episode]).wait()
        hidden = [dataset.blueprint_dataset().id, dataset.asset_dataset().id]
        dataset_id = dataset.id
        dataset.delete()
        with pytest.raises(LookupError):
            catalog.get_dataset(name)
        for entry_id in (dataset_id, *hidden):
            with pytest.raises(NOT_FOUND):
                catalog.get_dataset(id=entry_id)
            assert all(e.id != entry_id for e in catalog.entries(include_hidden=True))
        assert name not in catalog.dataset_names() and name not in catalog.entry_names()


# -- assets -----------------------------------------------------------------------------------------


def _static(path: Path, recording_id: str, entity: str) -> str:
    """An asset: a recording of static data only."""
    with rr.RecordingStream("strata-assets", recording_id=recording_id) as rec:
        rec.save(path)
        rec.log(entity, rr.Points3D([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), static=True)
    return path.as_uri()


def test_register_and_unregister_assets(client, rerun_client, tmp_path: Path) -> None:
    """Rerun's ``test_register_asset_appears_in_asset_dataset``,
    ``test_register_asset_replaces_duplicate``, ``test_unregister_asset_removes_it_from_asset_dataset``
    and ``test_unregister_unknown_asset_is_noop``."""
    first = _static(tmp_path / "mesh_v1.rrd", "gripper_mesh", "/mesh")
    again = _static(tmp_path / "mesh_v2.rrd", "gripper_mesh", "/mesh")

    def run(catalog) -> list:
        dataset = catalog.create_dataset(_name("with_assets"))
        assets = dataset.asset_dataset()
        seen = [assets.segment_ids()]
        seen.append(dataset.register_asset(first))
        seen.append(dataset.register_asset(again))  # the same recording id: replaced
        urls = pa.table(assets.segment_table())["rerun_storage_urls"].to_pylist()
        seen += [assets.segment_ids(), urls]
        dataset.unregister_asset("never-registered-segment")
        seen.append(assets.segment_ids())
        dataset.unregister_asset("gripper_mesh")
        seen.append(assets.segment_ids())
        return seen

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs == [[], "gripper_mesh", "gripper_mesh", ["gripper_mesh"], [[again]],
                              ["gripper_mesh"], []]


def test_which_assets_apply_to_a_segment(client, rerun_client, tmp_path: Path, make_rrd) -> None:
    episodes = [make_rrd(f"ep{i}") for i in range(3)]
    mesh = _static(tmp_path / "mesh.rrd", "mesh", "/mesh")
    urdf = _static(tmp_path / "urdf.rrd", "urdf", "/urdf")

    def run(catalog) -> list:
        dataset = catalog.create_dataset(_name("scoped"))
        dataset.register(episodes).wait()
        dataset.register_asset(mesh)  # opt_out, no list: every segment
        dataset.register_asset(urdf, mode="opt_in", segments=["ep0"])

        def applying() -> list[list[str]]:
            return [sorted(dataset.assets_for_segment(s)) for s in ("ep0", "ep1", "ep2", "unknown")]

        seen = [sorted(dataset.assets()), applying()]
        dataset.add_segments_to_asset("urdf", ["ep2"])
        dataset.remove_segments_from_asset("mesh", ["ep1", "ep2"])
        seen.append(applying())
        dataset.add_segments_to_asset("mesh", ["ep2"])  # opt_out: un-listed again
        dataset.remove_segments_from_asset("urdf", ["ep0"])
        seen.append(applying())
        dataset.unregister_asset("urdf")
        dataset.register_asset(urdf, mode="opt_in")  # registered again: a fresh scope, no segments
        seen.append(applying())
        return seen

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs
    assert ours[1] == [["mesh", "urdf"], ["mesh"], ["mesh"], ["mesh"]]


def test_an_asset_is_static_data_only(client, rerun_client, make_rrd) -> None:
    temporal = make_rrd("temporal_asset")
    for catalog in (client, rerun_client):
        dataset = catalog.create_dataset(_name("static_only"))
        with pytest.raises(ValueError):
            dataset.register_asset(temporal)
        assert dataset.asset_dataset().segment_ids() == []
    with pytest.raises(ValueError, match="not static data only .timelines: .*log it with static=True"):
        client.create_dataset(_name("static_only")).register_asset(temporal)


def test_segment_store_includes_the_assets_that_apply(client, rerun_client, tmp_path: Path, make_rrd) -> None:
    """Rerun's ``segment_store(include_assets=True)``: the segment's chunks and its assets'."""
    episodes = [make_rrd("store_ep0"), make_rrd("store_ep1")]
    mesh = _static(tmp_path / "store_mesh.rrd", "store_mesh", "/mesh")

    def run(catalog) -> list:
        dataset = catalog.create_dataset(_name("store_assets"))
        dataset.register(episodes).wait()
        dataset.register_asset(mesh, mode="opt_in", segments=["store_ep0"])
        seen = []
        for segment, include in (("store_ep0", True), ("store_ep0", False), ("store_ep1", True)):
            store = dataset.segment_store(segment, include_assets=include)
            chunks = store.stream().collect()
            seen.append((sorted(store.schema().entity_paths()), len(store), chunks.schema().entity_paths()
                         and sorted(chunks.schema().entity_paths())))
        return seen

    ours, theirs = _both(client, rerun_client, run)
    assert ours == theirs
    assert "/mesh" in ours[0][0] and "/mesh" not in ours[1][0] and "/mesh" not in ours[2][0]


def test_one_segment_id_is_one_segment(client, tmp_path: Path) -> None:
    """A string is one segment id, not a sequence of one-letter ones."""
    dataset = client.create_dataset(_name("one_id"))
    dataset.register_asset(_static(tmp_path / "one_mesh.rrd", "one_mesh", "/mesh"), mode="opt_in",
                           segments="ep0")
    dataset.add_segments_to_asset("one_mesh", "ep1")
    dataset.remove_segments_from_asset("one_mesh", "ep0")
    assert [dataset.assets_for_segment(s) for s in ("ep0", "ep1", "e")] == [[], ["one_mesh"], []]
