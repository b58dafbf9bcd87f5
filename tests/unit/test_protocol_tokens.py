"""The endpoint's tokens and TLS: with a secret, a call without a valid token is
``UNAUTHENTICATED`` (missing, expired, forged, malformed), a write with a read-only token is
``PERMISSION_DENIED`` with nothing written, and ``WhoAmI`` says which token may write; Rerun's
client and strata's own reach it with a token over ``rerun+https://``, direct URLs over HTTPS."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import jwt
import pyarrow as pa
import pytest
import rerun as rr

import protocol
import sdk
from protocol.descriptors import service
from protocol.tls import Certificate
from protocol.tokens import AUDIENCE, READS, mint
from secured import make_certificates

from .conftest import rpc
from .in_process import InProcessStack
from .test_protocol_reads import episode

SECRET = b"strata-test-secret-of-32-bytes!!"
HOSTS = ["127.0.0.1"]


@pytest.fixture
def guarded(stack: InProcessStack) -> Iterator[protocol.ProtocolServer]:
    """The endpoint on ``stack``'s client, asking for tokens signed with ``SECRET``."""
    with protocol.serve(stack.catalog, port=0, token_secret=SECRET) as server:
        yield server


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def refusal(server: protocol.ProtocolServer, name: str, metadata: tuple[tuple[str, str], ...] = (),
            request: object = None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        rpc(server, name, request, metadata=metadata)
    return refused.value


def test_a_token_carries_rerun_s_claims_and_names_its_hosts() -> None:
    token = mint(SECRET, hosts=["catalog.example.com", ".example.org"], read_only=True, lifetime_secs=60,
                 subject="ana")
    claims = jwt.decode(token, SECRET, algorithms=["HS256"], audience=AUDIENCE)
    assert claims["permissions"] == ["read"] and claims["sub"] == "ana" and claims["iss"] == "strata"
    assert claims["allowed_hosts"] == ["catalog.example.com", ".example.org"]
    assert claims["exp"] - claims["iat"] == 60
    assert jwt.decode(mint(SECRET, hosts=HOSTS), SECRET, algorithms=["HS256"],
                      audience=AUDIENCE)["permissions"] == ["read-write"]
    with pytest.raises(ValueError, match="names the hosts"):
        mint(SECRET, hosts=[])


def test_every_call_without_a_valid_token_is_unauthenticated(guarded, stack) -> None:
    missing = refusal(guarded, "Version")
    assert missing.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "this catalog needs a token" in missing.details()
    # An RPC strata does not serve, and a stream, are refused before anything else.
    assert refusal(guarded, "DoMaintenance").code() is grpc.StatusCode.UNAUTHENTICATED
    assert refusal(guarded, "WatchEvents").code() is grpc.StatusCode.UNAUTHENTICATED

    forged = refusal(guarded, "FindEntries", bearer(mint(b"x" * 32, hosts=HOSTS)))
    assert (forged.code(), forged.details()) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "invalid token signature: the token was not made with this catalog's secret")
    now = int(time.time())
    expired = jwt.encode({"iss": "strata", "sub": "ana", "aud": [AUDIENCE], "iat": now - 7200,
                          "exp": now - 3600, "permissions": ["read-write"]}, SECRET, algorithm="HS256")
    assert "the token has expired" in refusal(guarded, "FindEntries", bearer(expired)).details()
    assert "malformed authorization header" in refusal(
        guarded, "FindEntries", (("authorization", f"Basic {mint(SECRET, hosts=HOSTS)}"),)).details()
    assert "invalid token" in refusal(guarded, "FindEntries", bearer("not.a.token")).details()

    # Rerun's client and strata's: the refusal, with strata's message.
    with pytest.raises(PermissionError, match="this catalog needs a token"):
        rr.catalog.CatalogClient(guarded.url).dataset_names()
    with pytest.raises(sdk.EndpointRefusedError, match="refused this client: this catalog needs a token"):
        sdk.CatalogClient(guarded.url)
    with pytest.raises(PermissionError, match="invalid token signature"):
        rr.catalog.CatalogClient(guarded.url, token=mint(b"y" * 32, hosts=HOSTS)).dataset_names()


def test_a_read_only_token_reads_and_every_write_is_permission_denied_with_nothing_written(
        guarded, stack, tmp_path) -> None:
    stack.dataset.register([episode(tmp_path / "ep_0.rrd", "ep_0")]).wait()
    read_only = mint(SECRET, hosts=HOSTS, read_only=True)
    answer = rpc(guarded, "WhoAmI", metadata=bearer(read_only))
    assert (answer.can_read, answer.can_write) == (True, False)
    assert rpc(guarded, "WhoAmI", metadata=bearer(mint(SECRET, hosts=HOSTS))).can_write

    client = rr.catalog.CatalogClient(guarded.url, token=read_only)
    dataset = client.get_dataset("droid")
    assert dataset.segment_ids() == ["ep_0"]
    assert pa.table(dataset.reader(index="real_time")).num_rows > 0  # chunks, by direct URLs or not
    sent = stack.producer.next_offset
    with pytest.raises(PermissionError, match="CreateDatasetEntry writes, and this token may only read"):
        client.create_dataset("refused")
    with pytest.raises(PermissionError, match="RegisterWithDataset writes"):
        dataset.register([episode(tmp_path / "ep_1.rrd", "ep_1")])
    with pytest.raises(PermissionError, match="DeleteEntry writes"):
        dataset.delete()
    refused = refusal(guarded, "WriteTable", bearer(read_only), [b"\x00" * 64])  # not even decoded
    assert refused.code() is grpc.StatusCode.PERMISSION_DENIED
    assert stack.producer.next_offset == sent  # nothing reached the log
    assert stack.client.dataset_names() == ["droid"]

    writer = rr.catalog.CatalogClient(guarded.url, token=mint(SECRET, hosts=HOSTS))
    writer.create_dataset("allowed")
    assert sorted(stack.client.dataset_names()) == ["allowed", "droid"]


def test_strata_s_client_sends_its_token_or_rerun_s_variable(guarded, stack, monkeypatch) -> None:
    token = mint(SECRET, hosts=HOSTS, read_only=True)
    client = sdk.CatalogClient(guarded.url, token=token, workers=0)
    assert client.dataset_names() == ["droid"]
    client.close()
    monkeypatch.setenv("REDAP_TOKEN", token)
    client = sdk.CatalogClient(guarded.url, workers=0)
    assert client.url == guarded.url
    client.close()


def test_the_reads_are_rpcs_of_the_service() -> None:
    served = {method.name for method in service().methods} | {"Location"}
    assert READS <= served
    assert {"CreateDatasetEntry", "RegisterWithDataset", "WriteTable", "DeleteEntry",
            "SetSegmentProperties"}.isdisjoint(READS)


RERUN_CLIENT = """
import sys
import pyarrow as pa
import rerun as rr
url, token, name = sys.argv[1:]
client = rr.catalog.CatalogClient(url, token=token)
rows = pa.table(client.get_dataset("droid").reader(index="real_time"))
print(sorted(set(rows.column("rerun_segment_id").to_pylist())))
client.create_dataset(name)
"""
"""Rerun's client in a process of its own: it reads ``SSL_CERT_FILE`` once per process for its
direct fetches, so the variable is set before it starts, as a user's environment would be."""


def test_over_tls_both_clients_connect_with_a_token_and_direct_urls_are_https(
        stack, tmp_path, monkeypatch) -> None:
    certificates = make_certificates(tmp_path / "tls", ["127.0.0.1"])
    stack.dataset.register([episode(tmp_path / f"ep_{i}.rrd", f"ep_{i}") for i in range(2)]).wait()
    with protocol.serve(stack.catalog, port=0, token_secret=SECRET,
                        certificate=Certificate(certificates.cert, certificates.key)) as served:
        assert served.url.startswith("rerun+https://127.0.0.1:")
        assert served.direct is not None and served.direct.base.startswith("https://127.0.0.1:")
        token = mint(SECRET, hosts=HOSTS)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(ConnectionError, match="UnknownIssuer"):  # an untrusted certificate
            rr.catalog.CatalogClient(served.url, token=token).dataset_names()
        name = f"over_tls_{uuid.uuid4().hex[:6]}"
        done = subprocess.run([sys.executable, "-c", RERUN_CLIENT, served.url, token, name],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SSL_CERT_FILE": str(certificates.ca)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines() == ["['ep_0', 'ep_1']"]
        assert served.direct.ranges_served > 0  # the chunks came over HTTPS
        monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
        ours = sdk.CatalogClient(served.url, token=token, workers=0)
        assert name in ours.dataset_names()
        ours.close()


def test_a_certificate_that_cannot_be_read_is_a_value_error(stack, tmp_path: Path) -> None:
    missing = Certificate(tmp_path / "cert.pem", tmp_path / "key.pem")
    with pytest.raises(ValueError, match="cannot read the endpoint's TLS certificate or key"):
        protocol.serve(stack.catalog, port=0, certificate=missing)
