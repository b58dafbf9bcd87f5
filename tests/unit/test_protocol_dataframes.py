"""Arrow data on the wire: a ``DataframePart`` round trip, uncompressed and LZ4-block compressed
as Rerun's client sends it, a ``Schema`` message with no batches, and every way a part can be
malformed refused with ``INVALID_ARGUMENT`` and a message saying what was wrong."""

from __future__ import annotations

import grpc
import pyarrow as pa
import pytest

from protocol.dataframes import decode, encode, ipc_stream, read_schema, schema_message
from protocol.descriptors import common, enum_value
from protocol.errors import InvalidRequestError, status_of

TABLE = pa.table({"rerun_segment_id": ["a", "b", "c"], "score": [0.5, None, 1.0],
                  "tags": [["x"], [], None]},
                 schema=pa.schema([pa.field("rerun_segment_id", pa.string(), nullable=False),
                                   pa.field("score", pa.float64(), metadata={"rerun:kind": "data"}),
                                   ("tags", pa.list_(pa.string()))]))
LZ4 = enum_value("rerun.common.v1alpha1.Compression", "COMPRESSION_LZ4")
NONE = enum_value("rerun.common.v1alpha1.Compression", "COMPRESSION_NONE")


@pytest.mark.parametrize("compress", [False, True], ids=["none", "lz4"])
def test_a_part_round_trips_with_its_schema_and_field_metadata(compress: bool) -> None:
    part = encode(TABLE, compress=compress)
    assert part.compression == (LZ4 if compress else NONE)
    decoded = decode(type(part).FromString(part.SerializeToString()))
    assert decoded.equals(TABLE, check_metadata=True)
    assert decoded.schema.field("score").metadata == {b"rerun:kind": b"data"}


def test_an_lz4_part_is_one_block_of_the_whole_stream_as_rerun_s_client_sends_it() -> None:
    part = encode(TABLE, compress=True)
    stream = ipc_stream(TABLE)
    assert part.uncompressed_size == len(stream)
    assert pa.decompress(part.payload, len(stream), codec="lz4_raw", asbytes=True) == stream
    # A part compressed by another writer of LZ4 blocks reads the same.
    other = common("DataframePart", encoder_version=1, compression=LZ4, uncompressed_size=len(stream),
                   payload=pa.compress(stream, codec="lz4_raw", asbytes=True))
    assert decode(other).equals(TABLE)


def test_an_uncompressed_part_of_an_older_writer_reads_as_none() -> None:
    part = common("DataframePart", encoder_version=1, payload=ipc_stream(TABLE))  # compression unset
    assert decode(part).equals(TABLE)


def test_a_schema_message_is_a_stream_without_batches() -> None:
    message = schema_message(TABLE.schema)
    reader = pa.ipc.open_stream(message.arrow_schema)
    assert reader.schema.equals(TABLE.schema, check_metadata=True)
    assert reader.read_all().num_rows == 0
    assert read_schema(message).equals(TABLE.schema, check_metadata=True)


def malformed() -> dict[str, tuple[object, str]]:
    good = encode(TABLE, compress=True)

    def part(**changes: object) -> object:
        copy = type(good)()
        copy.CopyFrom(good)
        for name, value in changes.items():
            if value is None:
                copy.ClearField(name)
            else:
                setattr(copy, name, value)
        return copy

    stream = ipc_stream(TABLE)
    return {
        "encoder version": (part(encoder_version=0), "encoder_version 0 is not ENCODER_VERSION_V0"),
        "no payload": (part(payload=None), "no payload"),
        "unknown compression": (part(compression=7), "unknown compression 7"),
        "no size": (part(uncompressed_size=0), "needs an uncompressed_size"),
        "oversized": (part(uncompressed_size=5 << 30), "needs an uncompressed_size"),
        "corrupt lz4": (part(payload=b"\xff" * 40), "does not decompress"),
        "understated size": (part(uncompressed_size=len(stream) - 1), "does not decompress"),
        "not arrow": (part(compression=NONE, payload=b"not an arrow stream"), "not an Arrow IPC stream"),
        "truncated": (part(compression=NONE, payload=stream[: len(stream) // 2]), "not an Arrow IPC stream"),
    }


@pytest.mark.parametrize("case", sorted(malformed()))
def test_a_malformed_part_is_invalid_argument_saying_what_is_wrong(case: str) -> None:
    part, message = malformed()[case]
    with pytest.raises(InvalidRequestError, match=message) as raised:
        decode(part)
    assert status_of(raised.value) is grpc.StatusCode.INVALID_ARGUMENT
    assert str(raised.value).startswith("DataframePart: ")


def test_a_schema_message_without_a_schema_is_invalid_argument() -> None:
    with pytest.raises(InvalidRequestError, match="arrow_schema is not an Arrow IPC stream"):
        read_schema(common("Schema", arrow_schema=b"nope"))
