"""A real S3-compatible server for tests: S3Proxy (``org.gaul:s3proxy`` from Maven Central, put in
``.cache/jars/s3proxy`` by scripts/test-deps.sh) on a free port, storing buckets as directories of
its own, with AWS signature checks on one access key."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import settings

ACCESS_KEY_ID = "strata-tests"
SECRET_ACCESS_KEY = "strata-tests-secret"
REGION = "us-east-1"


def _jar() -> Path:
    found = sorted((settings.jars_dir() / "s3proxy").glob("s3proxy-*-jar-with-dependencies.jar"))
    if not found:
        raise RuntimeError(f"S3Proxy is not in {settings.jars_dir() / 's3proxy'}: run "
                           "'bash scripts/test-deps.sh' (make test does it)")
    return found[-1]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EmbeddedS3:
    """An S3 endpoint at ``endpoint_url``; ``config()`` is the matching ``object_store_config``,
    ``environment()`` the AWS variables that say the same.

    >>> with EmbeddedS3() as s3:  # doctest: +SKIP
    ...     s3.put("recordings", "droid/ep_1.rrd", path)
    """

    def __init__(self, *, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = _free_port(host)
        self.endpoint_url = f"http://{host}:{self.port}"
        self.directory = Path(tempfile.mkdtemp(prefix="strata-s3-"))
        self.buckets = self.directory / "buckets"
        self.log = self.directory / "s3proxy.log"
        self._process: subprocess.Popen | None = None

    def start(self, timeout_secs: float = 60) -> EmbeddedS3:
        self.buckets.mkdir()
        properties = self.directory / "s3proxy.conf"
        properties.write_text(
            f"s3proxy.endpoint={self.endpoint_url}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={ACCESS_KEY_ID}\n"
            f"s3proxy.credential={SECRET_ACCESS_KEY}\n"
            "jclouds.provider=filesystem-nio2\n"
            f"jclouds.filesystem.basedir={self.buckets}\n")
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(["java", "-jar", str(_jar()), "--properties", str(properties)],
                                             stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_secs
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"S3Proxy exited with {self._process.returncode}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(self.endpoint_url, timeout=1)
            except urllib.error.HTTPError:
                return self  # it answers (403 to an unsigned request): it is up
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"S3Proxy did not answer on {self.endpoint_url} in {timeout_secs} s")

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def bytes_sent(self) -> int:
        """Bytes the server has written to its sockets and files so far (``/proc/PID/io``)."""
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
        raise RuntimeError("no wchar in /proc/PID/io")

    def config(self, **overrides: str) -> dict[str, str]:
        return {"endpoint_url": self.endpoint_url, "region": REGION, "access_key_id": ACCESS_KEY_ID,
                "secret_access_key": SECRET_ACCESS_KEY, **overrides}

    def environment(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_REGION": REGION,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY}

    def filesystem(self):
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=ACCESS_KEY_ID, secret_key=SECRET_ACCESS_KEY, region=REGION,
                                 endpoint_override=f"{self.host}:{self.port}", scheme="http",
                                 allow_bucket_creation=True)

    def create_bucket(self, bucket: str) -> None:
        self.filesystem().create_dir(bucket)

    def put(self, bucket: str, key: str, source: Path) -> str:
        """Uploads ``source`` as ``key`` (creating the bucket if needed) through the S3 API;
        returns its ``s3://`` URL."""
        fs = self.filesystem()
        fs.create_dir(bucket)
        with source.open("rb") as src, fs.open_output_stream(f"{bucket}/{key}") as out:
            shutil.copyfileobj(src, out, 8 << 20)
        return f"s3://{bucket}/{key}"

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> EmbeddedS3:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
