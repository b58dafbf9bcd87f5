"""Rerun's definitions as the installed rerun-sdk carries them: the encoded ``FileDescriptorSet``
its ``rerun_bindings`` library embeds, loaded once into a protobuf descriptor pool, and from it
the message classes by name. The ``.rrd`` footer (``recordings.rrd``) and the catalog protocol
(``protocol.descriptors``) are read and written with them.

The definitions are read from the installed library, never from a copy of Rerun's ``.proto``
text: strata speaks what the pinned rerun-sdk speaks (``tests/unit/test_protocol_pin.py`` holds
the pin).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import mmap
from pathlib import Path

from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    message_factory,
    timestamp_pb2,
)
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from recordings.errors import DescriptorsUnavailableError

PINNED_RERUN_SDK = "0.41.0"
"""The rerun-sdk whose protocol strata serves (pyproject.toml pins the same)."""
FOOTER = "rerun.log_msg.v1alpha1.RrdFooter"
"""A message every set of Rerun's definitions has: found, the set is Rerun's."""
FIRST_FILE = "rerun/v1alpha1/common.proto"
"""The first file of the embedded set; the others follow it."""
WELL_KNOWN = {module.DESCRIPTOR.name: module for module in (any_pb2, duration_pb2, empty_pb2, timestamp_pb2)}
"""protobuf's own files the rerun files import, taken from the protobuf package."""


def library() -> Path:
    """The installed ``rerun_bindings`` shared library."""
    spec = importlib.util.find_spec("rerun_bindings")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    found = sorted(p for location in locations for p in Path(location).glob("rerun_bindings*.so"))
    if not found:
        raise _unavailable(f"no rerun_bindings library in {locations or 'the environment'}")
    return found[0]


def _rerun_sdk_version() -> str:
    try:
        return importlib.metadata.version("rerun-sdk")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _unavailable(reason: str) -> DescriptorsUnavailableError:
    return DescriptorsUnavailableError(
        f"cannot read Rerun's protocol definitions from the installed rerun-sdk "
        f"({_rerun_sdk_version()}): {reason}. strata serves the protocol of rerun-sdk {PINNED_RERUN_SDK}: "
        f"pip install 'rerun-sdk[catalog]=={PINNED_RERUN_SDK}'")


def _varint(data: bytes | mmap.mmap, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the position after it."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
        if shift > 63:
            raise ValueError("varint too long")


def embedded_files(data: bytes | mmap.mmap) -> list[descriptor_pb2.FileDescriptorProto]:
    """The rerun files of the first encoded ``FileDescriptorSet`` in ``data``: consecutive set
    entries (``0x0a <length> <FileDescriptorProto>``) starting with ``common.proto``.
    ``DescriptorsUnavailableError`` if there is none, or it does not parse."""
    name = FIRST_FILE.encode()
    start = data.find(b"\x0a" + bytes([len(name)]) + name)
    if start < 0:
        raise _unavailable(f"the library holds no {FIRST_FILE}")
    entry = next((start - back for back in range(2, 7)
                  if data[start - back] == 0x0A and _varint(data, start - back + 1)[1] == start), None)
    if entry is None:
        raise _unavailable(f"{FIRST_FILE} is not an entry of an encoded FileDescriptorSet")
    files = []
    while entry < len(data) and data[entry] == 0x0A:
        length, body = _varint(data, entry + 1)
        try:
            parsed = descriptor_pb2.FileDescriptorProto.FromString(bytes(data[body:body + length]))
        except DecodeError:
            break
        if not parsed.name.startswith("rerun/") or not parsed.name.endswith(".proto"):
            break
        files.append(parsed)
        entry = body + length
    return files


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """The descriptor pool of the installed rerun-sdk's protocol, loaded once (about 0.1 s).
    ``DescriptorsUnavailableError`` if the definitions cannot be found or read."""
    path = library()
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        files = embedded_files(data)
    loaded = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    try:
        for file in files:
            for dependency in file.dependency:
                if dependency in WELL_KNOWN and dependency not in added:
                    proto = descriptor_pb2.FileDescriptorProto()
                    WELL_KNOWN[dependency].DESCRIPTOR.CopyToProto(proto)
                    loaded.Add(proto)
                    added.add(dependency)
            loaded.Add(file)
            added.add(file.name)
        loaded.FindMessageTypeByName(FOOTER)
    except (TypeError, KeyError) as exc:
        raise _unavailable(f"the definitions in {path} do not load ({exc})") from exc
    return loaded


@functools.cache
def message_class(full_name: str) -> type[Message]:
    """The message class of ``full_name`` (``rerun.cloud.v1alpha1.FindEntriesRequest``).
    ``KeyError`` for a name the protocol does not define."""
    descriptor: Descriptor = pool().FindMessageTypeByName(full_name)
    made: type[Message] = message_factory.GetMessageClass(descriptor)
    return made
