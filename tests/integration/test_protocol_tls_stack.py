"""The endpoint that ``sdk.Server(protocol_port=...)`` starts, over TLS with ``protocol_tls``
(``strata up --tls-cert/--tls-key``): its URL is ``rerun+https://``, rerun-sdk's own client that
trusts the certificate lists the datasets and reads a registered recording's rows (their chunks
fetched from direct URLs over HTTPS), strata's own client connects through it too, and a plain
``rerun+http://`` client of the same port gets nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import rerun as rr

import sdk
from secured import make_certificates
from stack import Server
from stack_tools import frames_recording

pytestmark = pytest.mark.own_store

RERUN_READER = """
import json
import sys
import pyarrow as pa
import rerun as rr
client = rr.catalog.CatalogClient(sys.argv[1])
rows = pa.table(client.get_dataset("frames").reader(index="frame"))
print(json.dumps({"datasets": client.dataset_names(),
                  "segments": rows["rerun_segment_id"].to_pylist(),
                  "frames": rows["frame"].to_pylist(),
                  "joint": rows["/arm/joint:Scalars:scalars"].to_pylist()}))
"""
"""Rerun's client in a process of its own: it reads ``SSL_CERT_FILE`` once per process for its
direct fetches, so the variable must be set before the process starts."""



def test_a_server_with_protocol_tls_serves_rerun_s_client_over_tls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    certificates = make_certificates(tmp_path / "tls", ["127.0.0.1"])
    recording = frames_recording(tmp_path / "ep_0.rrd")
    monkeypatch.delenv("STRATA_TOKEN_SECRET", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))  # both clients trust the test's CA
    with Server(tmp_path / "stack", protocol_port=0, protocol_tls=(certificates.cert, certificates.key),
                datasets={"frames": [recording]}) as server:
        url = server.url()
        assert url.startswith("rerun+https://127.0.0.1:") and server.protocol_url == url
        assert rr.catalog.CatalogClient(url).dataset_names() == ["frames"]
        done = subprocess.run([sys.executable, "-c", RERUN_READER, url], capture_output=True, text=True,
                              timeout=120, env=dict(os.environ))
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout) == {
            "datasets": ["frames"], "segments": ["ep_0"] * 6, "frames": list(range(6)),
            "joint": [[frame * 10.0] for frame in range(6)]}
        ours = server.client()  # asks the endpoint, over TLS, where its catalog is
        assert ours.url == url and ours.dataset_names() == ["frames"]
        plain = url.replace("rerun+https://", "rerun+http://")
        with pytest.raises(RuntimeError, match="verifying connection to server"):
            rr.catalog.CatalogClient(plain)
        with pytest.raises(sdk.EndpointUnavailableError, match=f"no catalog answered at {re.escape(plain)} "):
            sdk.CatalogClient(plain)
