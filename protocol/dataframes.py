"""Arrow data on the wire, as Rerun's protocol carries it: a ``DataframePart`` (an Arrow IPC
stream, uncompressed or LZ4-block compressed as a whole) and a ``Schema`` (an IPC stream with no
batches). A part that cannot be read is an ``InvalidRequestError`` saying what was wrong."""

from __future__ import annotations

import pyarrow as pa
from google.protobuf.message import Message

from protocol.descriptors import common, enum_value
from protocol.errors import InvalidRequestError

COMPRESSION = "rerun.common.v1alpha1.Compression"
ENCODER_VERSION = "rerun.common.v1alpha1.EncoderVersion"
MAX_UNCOMPRESSED_BYTES = 4 << 30
"""The largest part strata decompresses: the 4 GiB Rerun's client accepts in one message."""


def ipc_stream(data: pa.Table | pa.RecordBatch | pa.Schema) -> bytes:
    """``data`` as an Arrow IPC stream: its schema, its batches (none for a schema), the end."""
    schema = data if isinstance(data, pa.Schema) else data.schema
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        if isinstance(data, pa.Table):
            writer.write_table(data)
        elif isinstance(data, pa.RecordBatch):
            writer.write_batch(data)
    return bytes(sink.getvalue().to_pybytes())


def encode(data: pa.Table | pa.RecordBatch, *, compress: bool = False) -> Message:
    """A ``DataframePart`` holding ``data``; with ``compress``, LZ4-block compressed as Rerun's
    client sends its parts.

    >>> decode(encode(pa.table({"a": [1, 2]}), compress=True)).to_pydict()
    {'a': [1, 2]}
    """
    payload = ipc_stream(data)
    part = common("DataframePart", encoder_version=enum_value(ENCODER_VERSION, "ENCODER_VERSION_V0"))
    if compress:
        part.payload = pa.compress(payload, codec="lz4_raw", asbytes=True)
        part.compression = enum_value(COMPRESSION, "COMPRESSION_LZ4")
        part.uncompressed_size = len(payload)
    else:
        part.payload = payload
        part.compression = enum_value(COMPRESSION, "COMPRESSION_NONE")
    return part


def decode(part: Message) -> pa.Table:
    """The table a ``DataframePart`` holds. ``InvalidRequestError`` saying what is wrong with a
    part of another encoder version, without a payload, of an unknown compression, that does not
    decompress to its stated size, or whose payload is not an Arrow IPC stream."""
    if part.encoder_version != enum_value(ENCODER_VERSION, "ENCODER_VERSION_V0"):
        raise InvalidRequestError(f"DataframePart: encoder_version {part.encoder_version} is not "
                                  "ENCODER_VERSION_V0, the only one strata reads")
    if not part.HasField("payload"):
        raise InvalidRequestError("DataframePart: no payload")
    payload = part.payload
    if part.compression == enum_value(COMPRESSION, "COMPRESSION_LZ4"):
        size = part.uncompressed_size
        if not 0 < size <= MAX_UNCOMPRESSED_BYTES:
            raise InvalidRequestError(f"DataframePart: an LZ4 payload needs an uncompressed_size from 1 to "
                                      f"{MAX_UNCOMPRESSED_BYTES} bytes, not {size}")
        try:
            payload = pa.decompress(payload, size, codec="lz4_raw", asbytes=True)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InvalidRequestError(f"DataframePart: the LZ4 payload does not decompress to "
                                      f"{size} bytes ({exc})") from exc
    elif part.compression not in (enum_value(COMPRESSION, "COMPRESSION_UNSPECIFIED"),
                                  enum_value(COMPRESSION, "COMPRESSION_NONE")):
        raise InvalidRequestError(f"DataframePart: unknown compression {part.compression}")
    try:
        table: pa.Table = pa.ipc.open_stream(payload).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InvalidRequestError(f"DataframePart: the payload is not an Arrow IPC stream ({exc})") from exc
    return table


def schema_message(schema: pa.Schema) -> Message:
    """A ``Schema`` message: ``schema`` as an IPC stream with no batches."""
    return common("Schema", arrow_schema=ipc_stream(schema))


def read_schema(message: Message) -> pa.Schema:
    """The Arrow schema of a ``Schema`` message. ``InvalidRequestError`` if it holds none."""
    try:
        schema: pa.Schema = pa.ipc.open_stream(message.arrow_schema).schema
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InvalidRequestError(f"Schema: arrow_schema is not an Arrow IPC stream ({exc})") from exc
    return schema
