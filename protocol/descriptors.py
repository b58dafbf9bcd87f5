"""Rerun's catalog protocol as the installed rerun-sdk defines it (``recordings.definitions``
loads its definitions): the service (``RerunCloudService``) and its messages by name."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from recordings.definitions import PINNED_RERUN_SDK, embedded_files, message_class, pool

__all__ = ["PINNED_RERUN_SDK", "SERVICE", "cloud", "common", "embedded_files", "enum_value",
           "message_class", "pool", "service"]

SERVICE = "rerun.cloud.v1alpha1.RerunCloudService"


def service() -> ServiceDescriptor:
    """``rerun.cloud.v1alpha1.RerunCloudService``, as the installed rerun-sdk defines it."""
    return pool().FindServiceByName(SERVICE)


def cloud(name: str, /, **fields: Any) -> Message:
    """A new ``rerun.cloud.v1alpha1`` message: ``cloud("EntryDetails", name="droid")``."""
    return message_class(f"rerun.cloud.v1alpha1.{name}")(**fields)


def common(name: str, /, **fields: Any) -> Message:
    """A new ``rerun.common.v1alpha1`` message: ``common("SegmentId", id="ep_1")``."""
    return message_class(f"rerun.common.v1alpha1.{name}")(**fields)


def enum_value(enum: str, name: str) -> int:
    """The number of ``name`` in the enum ``enum`` (``enum_value("rerun.common.v1alpha1.Compression",
    "COMPRESSION_LZ4")``). ``KeyError`` for an unknown enum or value."""
    return int(pool().FindEnumTypeByName(enum).values_by_name[name].number)
