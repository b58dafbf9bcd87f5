"""Recordings in object storage: ``s3://`` URLs read from a real S3-compatible server (S3Proxy),
registered through the real broker and Spark job."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

import sdk
from producers import end_offsets
from projector import schemas
from recordings import ObjectStore, ObjectStoreConfig, local_path, read_recording
from s3 import EmbeddedS3
from stack import Server
from stack.droid import write_episode


@pytest.fixture(scope="module")
def episode(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DROID-like episode of some megabytes, mostly camera frames."""
    path = tmp_path_factory.mktemp("s3-episodes") / "ep_s3_big.rrd"
    write_episode(path, "ep_s3_big", 3, steps=150, image_size=(320, 240))
    return path


@pytest.fixture(scope="module")
def bucket(s3: EmbeddedS3, request: pytest.FixtureRequest) -> str:
    name = f"recordings-{request.module.__name__.rsplit('.', 1)[-1].replace('_', '-')}"
    s3.create_bucket(name)
    return name


def objects(s3: EmbeddedS3, **overrides: str) -> ObjectStore:
    return ObjectStore(ObjectStoreConfig.resolve(s3.config(**overrides)))


@pytest.fixture
def nothing_produced(server: Server):
    before = end_offsets(server.bootstrap_servers)
    yield
    assert end_offsets(server.bootstrap_servers) == before, "bad input reached the log"


# -- reading --------------------------------------------------------------------------------------


def test_an_rrd_read_from_s3_is_the_local_file_read_with_a_fraction_of_its_bytes(
        s3: EmbeddedS3, bucket: str, episode: Path) -> None:
    url = s3.put(bucket, "droid/2023/ep_s3_big.rrd", episode)
    local = read_recording(episode.as_uri())

    sent = s3.bytes_sent()
    remote = read_recording(url, objects(s3))
    read = s3.bytes_sent() - sent

    assert remote.uri == url
    assert (remote.recording_id, remote.size_bytes, remote.num_chunks, remote.index_ranges) == \
        (local.recording_id, local.size_bytes, local.num_chunks, local.index_ranges)
    assert remote.arrow_schema.equals(local.arrow_schema, check_metadata=True)
    assert remote.properties is not None and remote.properties.equals(local.properties)
    assert schemas.properties_parts(remote.properties) == schemas.properties_parts(local.properties)
    assert episode.stat().st_size > 5_000_000
    assert 0 < read < 200_000, f"read {read} bytes of a {episode.stat().st_size}-byte recording"


@pytest.mark.parametrize("suffix", [".parquet", ".arrow", ".arrows"])
def test_parquet_and_arrow_files_read_from_s3_are_the_local_files(
        s3: EmbeddedS3, bucket: str, tmp_path: Path, suffix: str) -> None:
    table = pa.table({"x": [1, 2, 3]}).replace_schema_metadata({"recording_id": f"table{suffix[1:]}"})
    path = tmp_path / f"table{suffix}"
    if suffix == ".parquet":
        pq.write_table(table, path)
    else:
        opener = pa.ipc.new_file if suffix == ".arrow" else pa.ipc.new_stream
        with opener(path, table.schema) as writer:
            writer.write_table(table)
    remote = read_recording(s3.put(bucket, f"tables/{path.name}", path), objects(s3))
    local = read_recording(path.as_uri())
    assert (remote.recording_id, remote.size_bytes) == (local.recording_id, local.size_bytes)
    assert remote.arrow_schema.equals(local.arrow_schema, check_metadata=True)


def test_the_aws_variables_name_the_endpoint_and_credentials(
        s3: EmbeddedS3, bucket: str, episode: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = s3.put(bucket, "env/ep_s3_big.rrd", episode)
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    assert read_recording(url).recording_id == "ep_s3_big"
    # A per-call setting wins over the variables, key by key.
    with pytest.raises(sdk.ObjectStoreError, match="refused the credentials"):
        read_recording(url, ObjectStore(ObjectStoreConfig.resolve({"secret_access_key": "wrong"})))


def test_missing_objects_and_buckets_are_not_found_errors(s3: EmbeddedS3, bucket: str) -> None:
    with pytest.raises(sdk.NotFoundError, match=f"no object at s3://{bucket}/missing.rrd on "
                                                f"{s3.endpoint_url}"):
        read_recording(f"s3://{bucket}/missing.rrd", objects(s3))
    with pytest.raises(sdk.NotFoundError, match="bucket 'no-such-bucket' does not exist"):
        objects(s3).list("s3://no-such-bucket/droid/", (".rrd",))


def test_wrong_credentials_are_a_clear_error_without_the_secret(s3: EmbeddedS3, bucket: str,
                                                                episode: Path) -> None:
    url = s3.put(bucket, "creds/ep_s3_big.rrd", episode)
    with pytest.raises(sdk.ObjectStoreError, match="refused the credentials") as info:
        read_recording(url, objects(s3, secret_access_key="not-the-secret"))
    assert "not-the-secret" not in str(info.value)
    with pytest.raises(sdk.ObjectStoreError, match="refused the credentials"):
        read_recording(url, objects(s3, access_key_id="nobody"))


def test_an_unreachable_endpoint_is_an_error_in_bounded_time(bucket: str) -> None:
    start = time.monotonic()
    with pytest.raises(sdk.ObjectStoreError, match="cannot read from http://127.0.0.1:9 .*AWS_ENDPOINT_URL"):
        read_recording(f"s3://{bucket}/ep.rrd", ObjectStore(ObjectStoreConfig.resolve(
            {"endpoint_url": "http://127.0.0.1:9", "access_key_id": "a", "secret_access_key": "b"})))
    assert time.monotonic() - start < 30


def test_bad_object_store_configs_are_value_errors() -> None:
    with pytest.raises(ValueError, match=r"unknown keys \['endpoint'\]; the keys are endpoint_url"):
        ObjectStoreConfig.resolve({"endpoint": "http://x"})
    with pytest.raises(ValueError, match="not a JSON object"):
        ObjectStoreConfig.resolve("endpoint_url=http://x")
    assert ObjectStoreConfig.resolve('{"region": "eu-west-1"}').region == "eu-west-1"
    with pytest.raises(ValueError, match="both access_key_id and secret_access_key"):
        ObjectStore(ObjectStoreConfig(access_key_id="only-the-id"))


# -- registering ----------------------------------------------------------------------------------


def test_register_and_register_prefix_from_s3(client: sdk.CatalogClient, s3: EmbeddedS3, bucket: str,
                                              tmp_path: Path) -> None:
    for i in range(4):
        write_episode(tmp_path / f"ep_{i}.rrd", f"s3_episode_{i}", i, steps=20)
    urls = [s3.put(bucket, f"fleet/robot-{i % 2}/day-{i}/ep_{i}.rrd", tmp_path / f"ep_{i}.rrd")
            for i in range(4)]
    s3.put(bucket, "fleet/notes.txt", tmp_path / "ep_0.rrd")  # not a recording by its name
    dataset = client.create_dataset(f"s3-{time.monotonic_ns()}")

    result = dataset.register([urls[0]], object_store_config=s3.config()).wait()
    assert result.segment_ids == ["s3_episode_0"]
    result = dataset.register_prefix(f"s3://{bucket}/fleet/", layer_name="base", on_duplicate="skip",
                                     object_store_config=s3.config()).wait()
    assert sorted(result.segment_ids) == [f"s3_episode_{i}" for i in range(4)]

    table = dataset.segment_table().to_arrow_table().sort_by("rerun_segment_id")
    assert table.column("rerun_segment_id").to_pylist() == [f"s3_episode_{i}" for i in range(4)]
    assert table.column("rerun_storage_urls").to_pylist() == [[u] for u in urls]
    assert table.column("property:episode:num_steps").to_pylist() == [[20]] * 4


def test_s3_registrations_that_fail_produce_nothing(dataset: sdk.DatasetEntry, s3: EmbeddedS3,
                                                     bucket: str, make_rrd, nothing_produced) -> None:
    good = s3.put(bucket, "bad/good.rrd", local_path(make_rrd("s3_good")))
    with pytest.raises(sdk.NotFoundError, match="no object at"):
        dataset.register([good, f"s3://{bucket}/bad/missing.rrd"], object_store_config=s3.config())
    with pytest.raises(sdk.ObjectStoreError, match="refused the credentials"):
        dataset.register([good], object_store_config=s3.config(secret_access_key="wrong"))
    with pytest.raises(sdk.NotFoundError, match="does not exist"):
        dataset.register_prefix("s3://no-such-bucket/x/", object_store_config=s3.config())
    with pytest.raises(ValueError, match="no rrd files found in"):
        dataset.register_prefix(f"s3://{bucket}/bad/none-here/", object_store_config=s3.config())



def test_recordings_in_s3_read_as_the_same_rows_as_local_files(
        client: sdk.CatalogClient, s3: EmbeddedS3, bucket: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"rows_{i}.rrd")
        write_episode(paths[-1], f"s3_rows_{i}", i, steps=30)
    urls = [s3.put(bucket, f"rows/{p.name}", p) for p in paths]
    for name, value in s3.environment().items():  # the client reads them when it is made
        monkeypatch.setenv(name, value)
    remote_client = sdk.CatalogClient(client.bootstrap_servers, client.store)
    remote = remote_client.create_dataset(f"s3-rows-{time.monotonic_ns()}")
    local = client.create_dataset(f"local-rows-{time.monotonic_ns()}")
    remote.register(urls).wait()
    local.register([p.as_uri() for p in paths]).wait()

    def rows(dataset: sdk.DatasetEntry) -> pa.Table:
        table = dataset.filter_contents(["/observation/**"]).reader(index="real_time").to_arrow_table()
        return table.sort_by([("rerun_segment_id", "ascending"), ("real_time", "ascending")])

    expected = rows(local)
    assert expected.num_rows == 60
    assert rows(remote).equals(expected)
