"""rerun-sdk's own, unmodified ``rr.catalog.CatalogClient`` against Rerun's server
(``rr.server.Server``) and against strata's endpoint of Rerun's catalog protocol (a stack of the
module's own, served by ``protocol.serve``): the same calls on entries, datasets and registrations, the
same answers, the same exception classes, and the same schemas with their field metadata. Then
the two ways strata runs the endpoint: ``strata serve`` beside a running stack, and
``Server(protocol_port=...)``, in a process of its own that stops with the server.

What differs, by design, and is not compared: ids (strata's are random UUIDs, so the time part of
the Tuid Rerun's client reads is no time), times, and ``rerun_size_bytes``, which strata counts
as the size of the registered files and Rerun's server as the bytes of their chunks.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import uuid
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import rerun as rr

import sdk
from projector.stores import normalize
from protocol.tokens import mint
from stack import Server
from stack_tools import frames_recording

pytestmark = pytest.mark.store_agnostic

NOT_COMPARED = ("rerun_last_updated_at", "rerun_size_bytes")
"""Segment table columns whose values differ by design (see the module's docstring)."""


def _name(stem: str) -> str:
    return f"{stem}_{os.urandom(3).hex()}"


def test_entries_are_created_listed_found_renamed_and_deleted_alike(clients) -> None:
    seen = {}
    for server, client in clients.items():
        first, second = _name("proto_a"), _name("proto_b")
        created = [client.create_dataset(first), client.create_dataset(second)]
        assert [type(d) for d in created] == [rr.catalog.DatasetEntry] * 2
        assert [d.name for d in created] == [first, second]
        assert {first, second} <= set(client.dataset_names())
        assert {first, second} <= {d.name for d in client.datasets()}
        assert {first, second} <= {e.name for e in client.entries()}
        found = client.get_dataset(first)
        assert found.id == created[0].id and str(found.id) == str(created[0].id)
        assert len(found.id.as_bytes()) == 16 and len(str(found.id)) == 32
        assert client.get_dataset(id=created[1].id).name == second
        assert client.get_dataset(id=str(created[1].id)).name == second
        assert client.create_dataset(first, exist_ok=True).id == created[0].id

        renamed = _name("proto_renamed")
        found.set_name(renamed)
        names = client.dataset_names()
        assert renamed in names and first not in names
        assert client.get_dataset(renamed).id == created[0].id
        client.get_dataset(second).delete()
        assert second not in client.dataset_names()
        seen[server] = {
            "kinds": sorted({str(d.kind) for d in client.datasets()}),
            "hidden kinds": sorted({str(d.kind) for d in client.datasets(include_hidden=True)}),
            "tables": [t.name for t in client.tables(include_hidden=True) if t.name == "__entries"],
            "no hidden among the datasets": all(not d.name.startswith("__") for d in client.datasets()),
            "created_at": type(created[0].created_at),
        }
        client.get_dataset(renamed).delete()
    assert seen["strata"] == seen["rerun"]


def test_refusals_carry_rerun_s_words(clients, tmp_path: Path) -> None:
    for client in clients.values():
        dataset = client.create_dataset(_name("proto_words"))
        with pytest.raises(ValueError, match="no data sources to register"):
            dataset.register([]).wait()
        dataset.blueprint_dataset().delete()
        with pytest.raises(ValueError, match="dataset blueprint dataset does not exist"):
            dataset.set_default_blueprint("layout_1")


def _raised(call, *args) -> str:
    """The name of the class of what ``call(*args)`` raises."""
    with pytest.raises(Exception) as error:
        call(*args)
    return type(error.value).__name__


def test_errors_are_the_same_classes(clients) -> None:
    raised: dict[str, list[str]] = {}
    for server, client in clients.items():
        name = _name("proto_err")
        dataset = client.create_dataset(name)
        classes = [_raised(client.create_dataset, name), _raised(client.get_dataset, _name("nope")),
                   _raised(partial(client.get_dataset, id="0" * 31 + "1"))]
        dataset.delete()
        classes.append(_raised(dataset.delete))
        with pytest.raises(LookupError, match="No dataset found with name"):
            client.get_dataset(name)
        raised[server] = classes
    assert raised["strata"] == raised["rerun"] == [
        "AlreadyExistsError", "LookupError", "NotFoundError", "NotFoundError"]
    # strata's messages reach Rerun's client.
    with pytest.raises(rr.catalog.AlreadyExistsError, match="already exists: a dataset named"):
        name = _name("proto_dup")
        clients["strata"].create_dataset(name)
        clients["strata"].create_dataset(name)


def _fields(schema: pa.Schema) -> list[tuple[str, str, bool, dict]]:
    return [(f.name, str(f.type), f.nullable, dict(f.metadata or {})) for f in schema]


def test_an_empty_dataset_has_the_same_schema_and_segment_table(clients) -> None:
    shown = {}
    for server, client in clients.items():
        dataset = client.create_dataset(_name("proto_empty"))
        segments = dataset.segment_table()
        shown[server] = {
            "schema": dataset.schema().to_arrow(),
            "segment table": segments.schema(),
            "rows": segments.count(),
            "segment ids": dataset.segment_ids(),
        }
        dataset.delete()
    assert shown["strata"]["schema"].equals(shown["rerun"]["schema"], check_metadata=True)
    assert _fields(shown["strata"]["segment table"]) == _fields(shown["rerun"]["segment table"])
    assert shown["strata"]["segment table"].metadata == shown["rerun"]["segment table"].metadata
    assert shown["strata"]["rows"] == shown["rerun"]["rows"] == 0
    assert shown["strata"]["segment ids"] == shown["rerun"]["segment ids"] == []


def test_recordings_registered_through_strata_s_sdk_read_as_on_rerun_s_server(
        clients, own_client: sdk.CatalogClient, make_rrd) -> None:
    tag = os.urandom(3).hex()
    uris = [make_rrd(f"proto_{tag}_{i}", properties={"meta": {"score": float(i)}}) for i in range(3)]
    shown = {}
    for server, rerun_side in clients.items():
        name = _name("proto_reg")
        dataset = rerun_side.create_dataset(name)
        if server == "strata":  # registered through strata's SDK, read through the protocol
            own_client.get_dataset(name).register(uris).wait()
        else:
            dataset.register(uris).wait()
        table = dataset.segment_table()
        rows = table.drop(*NOT_COMPARED).to_arrow_table().sort_by("rerun_segment_id")
        shown[server] = {
            "schema": dataset.schema().to_arrow(),
            "segment table": table.schema(),
            "rows": rows.to_pylist(),
            "segment ids": sorted(dataset.segment_ids()),
            "projected": dataset.segment_table().select("rerun_segment_id").to_arrow_table().schema.names,
            "index ranges": sorted(dataset.get_index_ranges().schema().names),
        }
    strata, rerun = shown["strata"], shown["rerun"]
    assert strata["segment ids"] == rerun["segment ids"] == sorted(f"proto_{tag}_{i}" for i in range(3))
    assert _fields(strata["schema"]) == _fields(rerun["schema"])
    assert strata["schema"].metadata == rerun["schema"].metadata
    assert _fields(strata["segment table"]) == _fields(rerun["segment table"])
    assert strata["rows"] == rerun["rows"]
    assert strata["projected"] == rerun["projected"] == ["rerun_segment_id"]
    assert strata["index ranges"] == rerun["index ranges"]


def test_rerun_s_client_registers_alike_and_gets_the_same_refusal(clients, make_rrd) -> None:
    tag = os.urandom(3).hex()
    uris = [make_rrd(f"proto_rr_{tag}_{i}") for i in range(2)]
    shown = {}
    for server, rerun_side in clients.items():
        dataset = rerun_side.create_dataset(_name("proto_rr_reg"))
        result = dataset.register(uris).wait()
        with pytest.raises(ValueError) as refused:
            dataset.register(uris[:1], layer_name="base").wait()
        skipped = dataset.register(uris[:1], on_duplicate="skip").wait()
        shown[server] = {
            "registered": sorted(result.segment_ids),
            "refusal": (type(refused.value).__name__, "already exists" in str(refused.value)),
            "skipped": skipped.segment_ids,
            "segments": sorted(dataset.segment_ids()),
            "rows": dataset.segment_table().drop(*NOT_COMPARED).to_arrow_table()
                           .sort_by("rerun_segment_id").to_pylist(),
        }
    assert shown["strata"] == shown["rerun"]
    assert shown["strata"]["refusal"] == ("ValueError", True)


def _static_rrd(path: Path, recording_id: str) -> str:
    """An .rrd of static data only, an asset; its URI."""
    with rr.RecordingStream("strata-test", recording_id=recording_id) as rec:
        rec.save(path)
        rec.log("mesh", rr.Points3D([[0, 0, 0], [1, 1, 1]]), static=True)
    return path.as_uri()


def test_an_asset_s_scope_is_its_segment_properties_edited_at_their_revision_alike(
        clients, make_rrd, tmp_path: Path) -> None:
    """Rerun's ``register_asset`` and its edits go through segment properties: the same scope,
    the same refusal of a stale revision, the same state once deleted."""
    tag = os.urandom(3).hex()
    episodes = [make_rrd(f"props_{tag}_{i}") for i in range(2)]
    mesh = _static_rrd(tmp_path / "mesh.rrd", f"mesh_{tag}")
    shown = {}
    for server, rerun_side in clients.items():
        dataset = rerun_side.create_dataset(_name("props"))
        dataset.register(episodes).wait()
        asset = dataset.register_asset(mesh, mode="opt_in", segments=[f"props_{tag}_0"])
        assets = dataset.asset_dataset()
        mode, segments, first = assets._read_asset_property(asset)
        dataset.add_segments_to_asset(asset, [f"props_{tag}_1"])
        edited = assets._read_asset_property(asset)
        with pytest.raises(RuntimeError) as stale:
            assets._write_asset_property(asset, mode="OptOut", segments=[], expected_revision=first)
        dataset.remove_segments_from_asset(asset, [f"props_{tag}_0"])
        applying = [dataset.assets_for_segment(f"props_{tag}_{i}") for i in range(2)]
        assets.delete_segment_properties([asset, "no-such-segment"])
        deleted = (assets._internal._get_segment_properties(asset), assets._read_asset_property(asset))
        assets._write_asset_property(asset, mode="OptIn", segments=[], expected_revision=0)
        shown[server] = {
            "asset": asset == f"mesh_{tag}", "read": (mode, segments, first != 0),
            "edited": (edited[0], edited[1], edited[2] not in (0, first)),
            "stale": "FailedPrecondition" in str(stale.value), "applying": applying, "deleted": deleted,
            "scoped again": [dataset.assets_for_segment(f"props_{tag}_{i}") for i in range(2)],
        }
    assert shown["strata"] == shown["rerun"]
    assert shown["strata"]["read"] == ("OptIn", [f"props_{tag}_0"], True)
    assert shown["strata"]["deleted"] == (None, ("OptOut", [], 0))


def test_an_entry_id_is_strata_s_uuid_in_rerun_s_form(clients, own_client: sdk.CatalogClient) -> None:
    name = _name("proto_id")
    made = clients["strata"].create_dataset(name)
    ours = own_client.get_dataset(name).id
    assert uuid.UUID(hex=str(made.id)) == ours
    assert bytes(made.id.as_bytes()) == ours.as_bytes() == ours.bytes  # both clients' EntryId.as_bytes()
    made.delete()


# -- how it runs ----------------------------------------------------------------------------------


def test_strata_serve_runs_beside_the_stack_and_writes_through_its_log(own_stack: Server,
                                                                       own_client: sdk.CatalogClient) -> None:
    command = [sys.executable, "-m", "stack.cli", "serve", "--store", normalize(own_stack.store),
               "--bootstrap-servers", own_stack.bootstrap_servers, "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = process.stdout.readline()
        assert banner.startswith("strata serve: rerun+http://127.0.0.1:"), process.stderr.read()
        url = banner.split()[2]
        assert f"writes through Kafka at {own_stack.bootstrap_servers}" in banner
        theirs = rr.catalog.CatalogClient(url)
        name = _name("proto_served")
        theirs.create_dataset(name)
        assert own_client.get_dataset(name).name == name  # in the stack's log and store
        assert name in theirs.dataset_names()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)
    assert process.returncode == 0
    assert process.stdout.read().strip() == "strata serve: stopped"
    assert process.stderr.read() == ""  # no grpc noise on the terminal



@pytest.mark.own_store
def test_a_server_started_with_a_protocol_port_serves_rerun_s_client(
        tmp_path: Path, own_stack: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    assert own_stack.protocol_url is None  # protocol_port=None
    recording = frames_recording(tmp_path / "ep_0.rrd")
    secret = os.urandom(32)
    monkeypatch.setenv("STRATA_TOKEN_SECRET", base64.b64encode(secret).decode())  # tokens asked for
    with Server(tmp_path / "stack", protocol_port=0, datasets={"frames": [recording]}) as own:
        url, pid = own.protocol_url, own.protocol_pid
        assert url is not None and url.startswith("rerun+http://127.0.0.1:")
        assert own.url() == url  # as Rerun's Server.url(): both clients take it
        assert pid is not None and pid != os.getpid()  # a process of its own
        with pytest.raises(PermissionError, match="this catalog needs a token"):
            rr.catalog.CatalogClient(own.url()).dataset_names()
        with pytest.raises(sdk.EndpointRefusedError):
            sdk.CatalogClient(own.url())
        token = mint(secret, hosts=["127.0.0.1"])
        theirs = rr.catalog.CatalogClient(own.url(), token=token)
        theirs.create_dataset("droid")
        assert own.client().url == url  # so that Rerun's segment_url(dataset) takes dataset.catalog.url
        ours = sdk.CatalogClient(own.url(), token=token)  # asks the endpoint for the Kafka cluster and store
        assert (ours.bootstrap_servers, ours.store, ours.url) == (own.bootstrap_servers, own.store, url)
        ours.create_dataset("tables")  # through the stack's log
        assert own.client().dataset_names() == theirs.dataset_names() == ["frames", "droid", "tables"]
        ours.close()
        # Rerun's client waits on this read holding Python's global lock: an endpoint in this
        # process would never answer it.
        rows = theirs.get_dataset("frames").reader(
            index="frame", using_index_values=np.array([2, 4], dtype=np.int64)).to_arrow_table()
        assert rows["frame"].to_pylist() == [2, 4]
        assert rows["/arm/joint:Scalars:scalars"].to_pylist() == [[20.0], [40.0]]
    assert own.protocol_url is None and own.protocol_pid is None
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as probe:  # stopped with the server
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.own_store
def test_a_server_whose_protocol_port_is_taken_says_why_and_stops(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said = (r"(?s)endpoint exited with code 1; end of .*protocol\.log:\n"
                rf".*cannot serve Rerun's catalog protocol on 127\.0\.0\.1:{port}")
        with pytest.raises(RuntimeError, match=said):
            Server(tmp_path / "stack", protocol_port=port)
    assert not (tmp_path / "stack" / "server.json").exists()  # the stack it started is stopped
