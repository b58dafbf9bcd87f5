"""The protocol strata serves, pinned to the installed rerun-sdk: its version is the pinned one,
its ``RerunCloudService`` has exactly the RPCs listed here, strata serves the ones listed as
served and answers every other one ``UNIMPLEMENTED``. Moving the pin, or serving another RPC,
fails here until the lists are reviewed."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from pathlib import Path

import grpc
import pytest

import protocol
from protocol import descriptors
from protocol.descriptors import embedded_files
from recordings import definitions

from .conftest import rpc

ROOT = Path(__file__).resolve().parents[2]

RPCS = {
    "Version", "WhoAmI", "DoBandwidthTest", "WatchEvents", "FindEntries", "DeleteEntry", "UpdateEntry",
    "CreateDatasetEntry", "CreateTableEntry", "ReadDatasetEntry", "UpdateDatasetEntry", "ReadTableEntry",
    "UpdateTableEntry", "GetWriteAccessGrant", "GetMultipartUploadPartGrants", "CompleteMultipartUpload",
    "AbortMultipartUpload", "RegisterWithDataset", "UnregisterFromDataset", "GetSegmentTableSchema",
    "ScanSegmentTable", "GetDatasetManifestSchema", "ScanDatasetManifest", "GetDatasetSchema", "GetSchemas",
    "GetRrdManifest", "GetAssetsForSegment", "GetSegmentProperties", "SetSegmentProperties",
    "DeleteSegmentProperties", "QueryDataset", "FetchChunks", "FindChunks", "RegisterTable", "GetTableSchema",
    "ScanTable", "WriteTable", "QueryTasks", "QueryTasksOnCompletion", "CancelTasks", "DoMaintenance",
    "DoGlobalMaintenance",
}
"""``rerun.cloud.v1alpha1.RerunCloudService`` of rerun-sdk 0.41.0: 42 RPCs."""
SERVED = {
    "Version", "WhoAmI", "FindEntries", "CreateDatasetEntry", "ReadDatasetEntry", "UpdateDatasetEntry",
    "ReadTableEntry", "DeleteEntry", "UpdateEntry", "GetDatasetSchema", "GetSegmentTableSchema",
    "ScanSegmentTable", "GetDatasetManifestSchema", "ScanDatasetManifest", "RegisterWithDataset",
    "UnregisterFromDataset",
    "QueryTasks", "QueryTasksOnCompletion", "FindChunks", "QueryDataset", "FetchChunks", "GetRrdManifest",
    "GetAssetsForSegment", "GetSchemas", "CreateTableEntry", "RegisterTable", "UpdateTableEntry",
    "GetTableSchema", "ScanTable", "WriteTable", "WatchEvents", "GetSegmentProperties",
    "SetSegmentProperties", "DeleteSegmentProperties",
}
"""The RPCs strata serves."""
UNIMPLEMENTED = RPCS - SERVED


def test_the_installed_rerun_sdk_is_the_pinned_one() -> None:
    pinned = re.search(r'"rerun-sdk\[catalog\]==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert pinned is not None
    assert importlib.metadata.version("rerun-sdk") == protocol.PINNED_RERUN_SDK == pinned[1] == "0.41.0"


def test_the_service_has_exactly_the_listed_rpcs() -> None:
    methods = [method.name for method in descriptors.service().methods]
    assert len(methods) == len(RPCS) == 42
    assert set(methods) == RPCS


def test_strata_serves_the_listed_rpcs_and_no_other() -> None:
    assert protocol.SERVED == SERVED
    assert len(UNIMPLEMENTED) == 8


def test_no_proto_file_is_in_the_tree() -> None:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.proto"],
                            cwd=ROOT, capture_output=True, text=True, check=True)
    assert listed.stdout == ""


def test_a_library_without_the_definitions_is_a_clear_error() -> None:
    with pytest.raises(protocol.DescriptorsUnavailableError,
                       match=r"rerun-sdk \(0\.41\.0\).*no rerun/v1alpha1/common\.proto.*"
                             r"pip install 'rerun-sdk\[catalog\]==0\.41\.0'"):
        embedded_files(b"\x7fELF not the rerun library")
    name = b"rerun/v1alpha1/common.proto"
    with pytest.raises(protocol.DescriptorsUnavailableError,
                       match="not an entry of an encoded FileDescriptorSet"):
        embedded_files(b"\x00" * 8 + b"\x0a" + bytes([len(name)]) + name)


def test_the_embedded_set_holds_rerun_s_five_files() -> None:
    path = definitions.library()
    files = embedded_files(path.read_bytes())
    assert [f.name for f in files] == [f"rerun/v1alpha1/{n}.proto" for n in
                                       ("common", "log_msg", "cloud", "sdk_comms", "viewer_control")]


def call(server: protocol.ProtocolServer, name: str) -> grpc.StatusCode:
    """The status of ``name`` called with an empty request (a stream of none, for a client stream)."""
    try:
        rpc(server, name, timeout_secs=2 if name == "WatchEvents" else 30)  # a watch ends at its deadline
    except grpc.RpcError as exc:
        assert name in exc.details() or exc.code() is not grpc.StatusCode.UNIMPLEMENTED
        return exc.code()
    return grpc.StatusCode.OK


def test_every_rpc_strata_does_not_serve_answers_unimplemented_naming_it(served) -> None:
    assert {name: call(served, name) for name in sorted(UNIMPLEMENTED)} == {
        name: grpc.StatusCode.UNIMPLEMENTED for name in sorted(UNIMPLEMENTED)}


def test_every_rpc_strata_serves_answers_something_else(served) -> None:
    # An empty request is not always a valid one (a dataset's RPCs need its header), but none of
    # the served RPCs is left unimplemented.
    statuses = {name: call(served, name) for name in sorted(SERVED)}
    assert grpc.StatusCode.UNIMPLEMENTED not in statuses.values()
    assert statuses["WhoAmI"] == statuses["Version"] == statuses["FindEntries"] == grpc.StatusCode.OK
    assert statuses["ReadDatasetEntry"] == grpc.StatusCode.INVALID_ARGUMENT  # no entry header
    assert statuses["QueryTasks"] == grpc.StatusCode.INVALID_ARGUMENT  # no task named
    for tables in ("GetTableSchema", "ScanTable", "WriteTable", "UpdateTableEntry"):
        assert statuses[tables] == grpc.StatusCode.INVALID_ARGUMENT  # no table named
    assert statuses["CreateTableEntry"] == statuses["RegisterTable"] == grpc.StatusCode.INVALID_ARGUMENT


def test_rerun_s_client_refuses_exactly_the_name_characters_strata_leaves_out_of_listings() -> None:
    import rerun as rr

    from events.names import NAME_PUNCTUATION
    from protocol.entries import UNREADABLE_NAME_CHARACTERS

    server = rr.server.Server()
    try:
        client = server.client()
        refused = set()
        for number, character in enumerate(NAME_PUNCTUATION):
            try:
                client.create_dataset(f"name{number}{character}x")
            except ValueError:
                refused.add(character)
    finally:
        server.shutdown()
    assert refused == UNREADABLE_NAME_CHARACTERS
