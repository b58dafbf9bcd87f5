"""Registration on strata against Rerun's own catalog server, on the same files: which schemas a
dataset accepts (Rerun's schema contract, case by case), and the errors of bad arguments. Each
test makes the same calls on both and asserts the same outcome: the same exception type and a
message matching the same pattern (Rerun's words, which users match on), or the same rows read
back."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
import rerun as rr

import sdk
from endpoints import endpoint


def _write(path: Path, recording_id: str, column_type: pa.DataType) -> str:
    """A recording whose ``/data`` column ``value`` has ``column_type`` (three nulls)."""
    with rr.RecordingStream("strata-schema-contract", recording_id=recording_id) as rec:
        rec.save(path)
        rec.log("/data", rr.AnyValues(value=pa.array([None, None, None], type=column_type)))
    return path.as_uri()


STRUCT_WIDE = pa.struct([("a", pa.int32()), ("b", pa.int32()), ("c", pa.int32())])
STRUCT_NARROW = pa.struct([("a", pa.int32()), ("b", pa.int32())])
NON_NULL_ITEM = pa.field("item", pa.int32(), nullable=False)

# Each case: the column's type in the first and in the second recording of one dataset.
CONTRACT = {
    "struct_widening": [STRUCT_WIDE, STRUCT_NARROW],
    "nullability_widening": [pa.list_(pa.int32()), pa.list_(NON_NULL_ITEM)],
    "null_promotion": [pa.int32(), pa.null()],
    "list_inner_widened": [pa.list_(STRUCT_WIDE), pa.list_(STRUCT_NARROW)],
    "fixed_size_list_identical": [pa.list_(pa.int32(), 3)] * 2,
    "map_identical": [pa.map_(pa.string(), pa.int32())] * 2,
    "dictionary_identical": [pa.dictionary(pa.int32(), pa.string())] * 2,
    "primitive_change": [pa.int32(), pa.int64()],
    "fixed_size_list_length": [pa.list_(pa.int32(), 3), pa.list_(pa.int32(), 4)],
    "fsl_inner_nullability_drift": [pa.list_(NON_NULL_ITEM, 3), pa.list_(pa.int32(), 3)],
    "fsl_of_wider_struct": [pa.list_(STRUCT_NARROW, 2), pa.list_(STRUCT_WIDE, 2)],
    "list_vs_fixed_size_list": [pa.list_(pa.int32()), pa.list_(pa.int32(), 3)],
    "dictionary_value_type": [pa.dictionary(pa.int32(), pa.string()), pa.string()],
    "map_value_type_drift": [pa.map_(pa.string(), pa.int32()), pa.map_(pa.string(), pa.int64())],
}


def _outcome(register: Callable[[], object], read: Callable[[], pa.Table]) -> tuple[str, object]:
    """("rejected", (exception type, message)) if registering raises, else ("read", the rows
    read back)."""
    try:
        register()
    except Exception as exc:  # noqa: BLE001 - the outcome compared is the exception
        return "rejected", (type(exc), str(exc))
    table = read()
    return "read", sorted(repr(row) for row in table.select(sorted(table.column_names)).to_pylist())


@pytest.mark.parametrize("case", CONTRACT)
def test_schema_contract(case: str, client: sdk.CatalogClient, rerun_client, tmp_path: Path) -> None:
    uris = [_write(tmp_path / f"{case}_{i}.rrd", f"segment{i}", t) for i, t in enumerate(CONTRACT[case])]
    name = f"contract-{case}-{os.urandom(3).hex()}"
    ours, theirs = client.create_dataset(name), rerun_client.create_dataset(name)

    def read(dataset) -> pa.Table:
        return pa.table(dataset.filter_contents("/data").reader(index="log_time"))

    strata = _outcome(lambda: ours.register(uris).wait(), lambda: read(ours))
    rerun = _outcome(lambda: theirs.register(uris).wait(), lambda: read(theirs))
    assert strata[0] == rerun[0], f"strata {strata[0]}, Rerun {rerun[0]}"
    if strata[0] == "rejected":
        for kind, message in (strata[1], rerun[1]):
            assert kind is ValueError and "schema" in message, message
        # What was accepted before the refused recording stays.
        assert ours.segment_ids() == theirs.segment_ids() == ["segment0"]
    else:
        assert len(strata[1]) == len(rerun[1]) > 0


def test_a_refused_schema_says_which_column_and_why(client: sdk.CatalogClient, tmp_path: Path) -> None:
    types = CONTRACT["fsl_inner_nullability_drift"]
    uris = [_write(tmp_path / f"drift_{i}.rrd", f"drift{i}", t) for i, t in enumerate(types)]
    dataset = client.create_dataset(f"drift-{os.urandom(3).hex()}")
    with pytest.raises(ValueError, match="schema conflict in column .*value.*fixed-size lists"):
        dataset.register(uris).wait()


def _error(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is what is compared
        call()
    return info.type, str(info.value)


@pytest.fixture
def pair(client: sdk.CatalogClient, rerun_client) -> tuple[sdk.DatasetEntry, object]:
    name = f"arguments-{os.urandom(3).hex()}"
    return client.create_dataset(name), rerun_client.create_dataset(name)


def _recording(tmp_path: Path, recording_id: str) -> str:
    return _write(tmp_path / f"{recording_id}.rrd", recording_id, pa.int32())


ARGUMENT_ERRORS = {
    "no uris": (lambda ds, tmp: ds.register([]), "no data sources to register"),
    "empty prefix": (lambda ds, tmp: ds.register_prefix((tmp / "empty").as_uri()), "no rrd files found in"),
    "prefix is a file": (lambda ds, tmp: ds.register_prefix(_recording(tmp, "alone")),
                         "expected prefix / directory but got an object"),
    "layer names of another length": (
        lambda ds, tmp: ds.register([_recording(tmp, f"r{i}") for i in range(3)],
                                    layer_name=["layer_a", "layer_b"]),
        "must be the same length"),
}


@pytest.mark.parametrize("case", ARGUMENT_ERRORS)
def test_bad_arguments_raise_rerun_s_errors(case: str, pair, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    call, pattern = ARGUMENT_ERRORS[case]
    ours, theirs = pair
    strata, rerun = _error(lambda: call(ours, tmp_path)), _error(lambda: call(theirs, tmp_path))
    assert strata[0] is rerun[0] is ValueError
    assert pattern in rerun[1] and pattern in strata[1], (strata[1], rerun[1])
    assert ours.segment_ids() == theirs.segment_ids() == []


@pytest.mark.parametrize("on_duplicate", ["error", "skip", "replace"])
def test_the_same_segment_layer_twice_in_one_call(on_duplicate: str, pair, tmp_path: Path) -> None:
    first = _write(tmp_path / "twice_a.rrd", "twice", pa.int32())
    second = _write(tmp_path / "twice_b.rrd", "twice", pa.int32())
    ours, theirs = pair
    strata = _error(lambda: ours.register([first, second], on_duplicate=on_duplicate))
    rerun = _error(lambda: theirs.register(
        [first, second], on_duplicate=rr.catalog.OnDuplicateSegmentLayer(on_duplicate)))
    assert strata[0] is rerun[0] is ValueError
    for message in (strata[1], rerun[1]):
        assert "duplicate segment layers in request" in message
        assert first in message and second in message
    assert ours.segment_ids() == theirs.segment_ids() == []


BAD_FILES = {
    "not a recording": (ValueError, lambda tmp: _garbage(tmp / "garbage.rrd")),
    "missing": (rr.catalog.NotFoundError, lambda tmp: (tmp / "missing.rrd").as_uri()),
}


def _garbage(path: Path) -> str:
    path.write_bytes(b"not a recording at all")
    return path.as_uri()


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_file_among_good_ones_refuses_the_whole_call(case: str, pair, server, tmp_path: Path) -> None:
    """Rerun's server refuses a call naming a file it cannot read, and registers none of the
    call's other files; so does strata, through its SDK and through its endpoint, with an error
    naming the file."""
    error, bad_file = BAD_FILES[case]
    uris = [_recording(tmp_path, "good_a"), bad_file(tmp_path), _recording(tmp_path, "good_b")]
    ours, theirs = pair
    with endpoint(server, writes=True) as url:
        through = rr.catalog.CatalogClient(url).get_dataset(ours.name)
        errors = {name: _error(lambda dataset=dataset: dataset.register(uris).wait())
                  for name, dataset in (("sdk", ours), ("endpoint", through), ("rerun", theirs))}
        assert through.segment_ids() == []
    for name, (kind, message) in errors.items():
        assert issubclass(kind, error), (name, kind, message)
        if name != "rerun":  # strata's error names the file; Rerun's says only what was wrong
            assert uris[1] in message, (name, message)
    assert ours.segment_ids() == theirs.segment_ids() == []


def test_results_are_rerun_s_own_classes(pair, tmp_path: Path) -> None:
    """Code written for Rerun checks ``isinstance(result, rerun.catalog.SegmentRegistrationResult)``."""
    uris = [_recording(tmp_path, f"result{i}") for i in range(2)]
    seen = []
    for dataset in pair:
        results = list(dataset.register(uris).iter_results())
        assert all(isinstance(r, rr.catalog.SegmentRegistrationResult) and r.is_success for r in results)
        again = dataset.register(uris, on_duplicate="skip").wait()
        assert isinstance(again, rr.catalog.RegistrationResult)
        seen.append(([(r.uri, r.segment_id, r.error) for r in results], again.segment_ids))
    assert seen[0] == seen[1]


def _rrd(path: Path, recording_id: str, entity: str) -> str:
    with rr.RecordingStream("strata-segment-handles", recording_id=recording_id) as rec:
        rec.save(path)
        rec.set_time("step", sequence=1)
        rec.log(entity, rr.Scalars([1.0]))
    return path.as_uri()


def test_segment_and_layer_handles_read_and_delete_alike(client: sdk.CatalogClient, rerun_client,
                                                          tmp_path: Path) -> None:
    tag = os.urandom(3).hex()
    base = [_rrd(tmp_path / f"{s}.rrd", f"{s}_{tag}", "/arm") for s in ("ep_b", "ep_a")]
    extra = _rrd(tmp_path / "extra.rrd", f"ep_b_{tag}", "/extra")
    seen = {}
    for side, catalog in (("strata", client), ("rerun", rerun_client)):
        dataset = catalog.create_dataset(f"handles-{tag}")
        dataset.register(base).wait()
        dataset.register([extra], layer_name="extra").wait()
        segment = dataset.segment(f"ep_b_{tag}")
        shown: dict[str, object] = {
            "id": segment.id,
            "layers": segment.layers(),
            "schema": sorted(f.name for f in segment.schema().to_arrow()),
            "base": sorted(dataset.layer("base").segment_ids()),  # Rerun's order is its own
            "extra": dataset.layer("extra").segment_ids(),
            "repr": repr(segment).rsplit("id=", 1)[1],
        }
        with pytest.raises(rr.catalog.NotFoundError):  # strata's NotFoundError is Rerun's too
            dataset.segment("nope")
        with pytest.raises(ValueError, match="Layer .*nope.* not found in dataset .*Available layers"):
            dataset.layer("nope")
        segment.delete_layer("extra").wait()
        segment.delete_layer("nope").wait()  # nothing there: no error on both
        shown["after"] = segment.layers()
        with pytest.raises(ValueError, match="Layer .*extra.* not found"):
            dataset.layer("extra")
        seen[side] = shown
    assert seen["strata"] == seen["rerun"]
    assert seen["strata"]["layers"] == {"base", "extra"} and seen["strata"]["after"] == {"base"}
    assert seen["strata"]["base"] == [f"ep_a_{tag}", f"ep_b_{tag}"]
