"""Bad SDK input: a clear error naming what was wrong, and nothing produced to the log.

Properties over generated input (hypothesis), plus the cases that need a file system fault:
files the process may not read, and recordings too large for the log.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import sdk
from producers import end_offsets
from projector.fold import MAX_NAME_LENGTH
from stack import Server

# rerun warns about every cut file it opens; the test checks the error instead.
pytestmark = pytest.mark.filterwarnings("ignore:RRD file has no footer")

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
# Capabilities that let root read and write any file whatever its mode.
DAC_CAPABILITIES = "-dac_override,-dac_read_search"


@pytest.fixture(scope="module")
def target(client: sdk.CatalogClient) -> sdk.DatasetEntry:
    return client.create_dataset(f"bad-sdk-input-{os.urandom(4).hex()}")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-input-files")


@pytest.fixture
def nothing_produced(server: Server) -> Iterator[None]:
    """Fails the test if the log grew while it ran."""
    before = end_offsets(server.bootstrap_servers)
    yield
    assert end_offsets(server.bootstrap_servers) == before, "bad input reached the log"


def test_bad_registrations_produce_nothing(target: sdk.DatasetEntry, make_rrd, tmp_path,
                                           nothing_produced) -> None:
    good = make_rrd("bad_input_ok")
    with pytest.raises(sdk.NotFoundError):
        target.register([good, (tmp_path / "missing.rrd").as_uri()])
    with pytest.raises(ValueError, match="file://"):
        target.register([str(tmp_path / "plain-path.rrd")])
    with pytest.raises(ValueError, match="is not a file"):
        target.register([tmp_path.as_uri()])
    corrupt = tmp_path / "corrupt.rrd"
    corrupt.write_bytes(os.urandom(256))
    with pytest.raises(ValueError, match="not a readable"):
        target.register([corrupt.as_uri()])
    with pytest.raises(ValueError, match="duplicate segment layers in request"):
        target.register([good, good])
    with pytest.raises(ValueError, match="on_duplicate"):
        target.register([good], on_duplicate="overwrite")
    with pytest.raises(ValueError, match="layer_name"):
        target.register([good], layer_name=["a", "b"])
    with pytest.raises(ValueError):
        target.register([])


@SETTINGS
@given(name=st.one_of(st.just(""), st.none(), st.integers(), st.binary(min_size=1),
                      st.lists(st.text(max_size=3), max_size=2)))
def test_invalid_dataset_names_produce_nothing(client: sdk.CatalogClient, name, nothing_produced) -> None:
    with pytest.raises(ValueError, match="dataset name"):
        client.create_dataset(name)


def test_too_long_dataset_name_produces_nothing(client: sdk.CatalogClient, server: Server) -> None:
    before = end_offsets(server.bootstrap_servers)
    with pytest.raises(ValueError, match=str(MAX_NAME_LENGTH)):
        client.create_dataset("n" * (MAX_NAME_LENGTH + 1))
    assert end_offsets(server.bootstrap_servers) == before, "the over-long name reached the log"


@SETTINGS
@given(uri=st.text(max_size=80).filter(lambda text: not text.lower().startswith(("file:", "s3:"))))
@example(uri="http://example.com/episode.rrd")
@example(uri="gs://bucket/episode.rrd")
@example(uri="/data/episode.rrd")
def test_uris_that_are_not_file_or_s3_urls_produce_nothing(target: sdk.DatasetEntry, uri: str,
                                                           nothing_produced) -> None:
    with pytest.raises(ValueError, match="file://"):
        target.register([uri])


@SETTINGS
@given(host=st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z]{2,5})?", fullmatch=True)
       .filter(lambda host: host != "localhost"))
def test_file_urls_of_other_hosts_produce_nothing(target: sdk.DatasetEntry, host: str,
                                                  nothing_produced) -> None:
    with pytest.raises(ValueError, match="only local files"):
        target.register([f"file://{host}/data/episode.rrd"])


@SETTINGS
@given(name=st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
                    min_size=1, max_size=40).filter(lambda name: name not in (".", "..")))
def test_missing_files_produce_nothing(target: sdk.DatasetEntry, files: Path, name: str,
                                       nothing_produced) -> None:
    missing = files / "missing" / f"{name}.rrd"
    with pytest.raises(sdk.NotFoundError, match="does not exist"):
        target.register([missing.as_uri()])


@SETTINGS
@given(name=st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True),
       suffix=st.sampled_from([".rrd", ".parquet", ".arrow", ""]))
def test_directories_produce_nothing(target: sdk.DatasetEntry, files: Path, name: str, suffix: str,
                                     nothing_produced) -> None:
    directory = files / "dirs" / f"{name}{suffix}"
    directory.mkdir(parents=True, exist_ok=True)
    with pytest.raises(ValueError, match="is not a file"):
        target.register([directory.as_uri()])


@pytest.fixture(scope="module")
def valid_rrd(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    import numpy as np
    import rerun as rr

    path = tmp_path_factory.mktemp("valid-rrd") / "valid.rrd"
    rec = rr.RecordingStream("strata-test", recording_id="truncated_source")
    rec.save(path)
    rec.log("points", rr.Points3D(np.arange(30, dtype=np.float32).reshape(10, 3)))
    rec.flush()
    del rec
    return path.read_bytes()


@SETTINGS
@given(data=st.data())
@example(data=None)  # the empty file
def test_rrd_files_without_a_recording_produce_nothing(target: sdk.DatasetEntry, files: Path,
                                                       valid_rrd: bytes, data, nothing_produced) -> None:
    """Empty files, every cut of a valid recording, and random bytes behind rerun's header."""
    if data is None:
        content = b""
    else:
        content = data.draw(st.one_of(
            st.integers(0, len(valid_rrd) - 1).map(lambda n: valid_rrd[:n]),
            st.binary(max_size=512).map(lambda tail: valid_rrd[:16] + tail)))
    path = files / f"cut-{uuid.uuid4().hex}.rrd"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not a readable .rrd recording|holds no recording"):
        target.register([path.as_uri()])


def run_unprivileged(code: str, *args: str) -> dict:
    """Run ``code`` in a child Python that cannot bypass file modes, and return the JSON it
    prints. As root, chmod stops no read, so the child runs without the DAC capabilities."""
    command = [sys.executable, "-c", code, *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: chmod 000 cannot make a file unreadable")
        command = [setpriv, f"--bounding-set={DAC_CAPABILITIES}", *command]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).parents[2])
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout.strip().splitlines()[-1])


REGISTER_IN_CHILD = """
import json, sys
import sdk
bootstrap, store, dataset_id, uri = sys.argv[1:]
with sdk.CatalogClient(bootstrap, store) as client:
    try:
        client.get_dataset(id=dataset_id).register([uri])
        print(json.dumps({"error": None}))
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def test_unreadable_files_produce_nothing(server: Server, target: sdk.DatasetEntry, make_rrd,
                                          nothing_produced) -> None:
    path = Path(make_rrd("unreadable").removeprefix("file://"))
    path.chmod(0)
    try:
        outcome = run_unprivileged(REGISTER_IN_CHILD, server.bootstrap_servers,
                                   str(server.store), str(target.id), path.as_uri())
    finally:
        path.chmod(0o644)
    assert outcome["error"] == "ValueError", outcome
    assert "permission denied" in outcome["message"], outcome


def test_huge_property_values_produce_nothing(server: Server, target: sdk.DatasetEntry,
                                              make_rrd) -> None:
    before = end_offsets(server.bootstrap_servers)
    small = make_rrd("huge_neighbour")
    huge = make_rrd("huge_properties", properties={"notes": {"text": "x" * 2_000_000}})
    with pytest.raises(ValueError, match="more than"):
        target.register([small, huge])
    assert end_offsets(server.bootstrap_servers) == before, "part of the registration reached the log"
