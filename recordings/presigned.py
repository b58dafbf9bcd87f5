"""Presigned URLs of ``s3://`` objects: a ``GET`` of the object that anyone holding the URL may
make until it expires, signed with the object store's credentials (AWS Signature Version 4, by
botocore). Clients that fetch byte ranges themselves (Rerun's, through direct URLs) read the
object store directly with them, not through the server that handed them out.

botocore is imported on first use (``ImportError`` saying what to install if it is missing): it
comes with ``strata[protocol]``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from events.errors import import_extra
from recordings.errors import NotFoundError, ObjectStoreError
from recordings.locations import split
from recordings.objects import CONNECT_TIMEOUT_SECS, MAX_ATTEMPTS, REQUEST_TIMEOUT_SECS, ObjectStoreConfig

MAX_EXPIRY_SECS = 7 * 24 * 3600
"""The longest a Signature Version 4 URL may be good for."""


@dataclass(frozen=True)
class PresignedObject:
    """An object's presigned ``GET`` URL, with its size and ``ETag`` as the object store gave them
    when it was signed: a client that sends ``If-Match: <etag>`` is refused (412) once the object
    is replaced."""

    url: str
    size: int
    etag: str


@functools.cache
def presigner(config: ObjectStoreConfig) -> Presigner:
    """The presigner of ``config``, one per process and configuration (its client made once)."""
    return Presigner(config)


class Presigner:
    """Presigns ``GET`` URLs of objects on the store ``config`` names."""

    def __init__(self, config: ObjectStoreConfig) -> None:
        self.config = config

    @functools.cached_property
    def _client(self) -> Any:
        import_extra("botocore", "protocol", "presigning URLs of s3:// layers")
        import botocore.config
        import botocore.session

        config = self.config
        session = botocore.session.get_session()
        return session.create_client(
            "s3", region_name=config.region or "us-east-1", endpoint_url=config.endpoint_url,
            aws_access_key_id=config.access_key_id, aws_secret_access_key=config.secret_access_key,
            aws_session_token=config.session_token,
            config=botocore.config.Config(
                signature_version="s3v4", connect_timeout=CONNECT_TIMEOUT_SECS,
                read_timeout=REQUEST_TIMEOUT_SECS, retries={"max_attempts": MAX_ATTEMPTS},
                # an S3-compatible server at an endpoint of its own names buckets in the path
                s3={"addressing_style": "path" if config.endpoint_url else "auto"}))

    def presign(self, uri: str, expires_secs: int) -> PresignedObject:
        """The presigned ``GET`` URL of the object at ``uri``, good for ``expires_secs`` (at most
        ``MAX_EXPIRY_SECS``), after one ``HEAD`` of it. Raises ``NotFoundError`` for a missing
        object or bucket, ``ObjectStoreError`` for an endpoint that cannot be reached or refuses
        the credentials."""
        import botocore.exceptions

        bucket, key = split(uri)
        where = self.config.describe()
        try:
            head = self._client.head_object(Bucket=bucket, Key=key)
            url: str = self._client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key},
                ExpiresIn=max(1, min(expires_secs, MAX_EXPIRY_SECS)))
        except botocore.exceptions.ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 404:
                raise NotFoundError(f"no object at {uri} on {where}") from None
            if status == 403:
                raise ObjectStoreError(
                    f"{uri}: {where} refused the credentials; check AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or object_store_config)") from None
            raise ObjectStoreError(f"{uri}: {where} answered {status} ({exc})") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise ObjectStoreError(f"{uri}: cannot read from {where} ({exc}); check the endpoint "
                                   "(AWS_ENDPOINT_URL or object_store_config)") from None
        return PresignedObject(url, int(head["ContentLength"]), str(head["ETag"]))
