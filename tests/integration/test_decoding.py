"""Records decoded in Spark's JVM (``spark_streaming.decoding``) are the records
``events.codec.decode`` makes of the same bytes: the same events, the same decode errors, for
registrations of every shape, every schema version ever written and bytes that are not events."""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Iterator

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import (
    SCHEMA_VERSION,
    CreateDataset,
    Event,
    IndexKind,
    IndexRange,
    OnDuplicate,
    RegisterLayer,
    UnregisterLayers,
    codec,
    encode,
)
from profiles import examples
from projector import LogRecord
from spark_streaming import decoding
from spark_streaming.job import build_session

pytestmark = pytest.mark.store_agnostic
TOPIC = "strata.catalog"


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session("local[2]", app_name="strata-test-decoding")
    yield session
    session.stop()


def decoded_in_spark(spark, values: list[bytes]) -> tuple[list[LogRecord], list[bool]]:
    """The records the projector's source makes of ``values``, and which the JVM read."""

    rows = [(TOPIC, 0, offset, value) for offset, value in enumerate(values)]
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long, value binary")
    table = decoding.decoded(frame).toArrow()
    return decoding.log_records(table), table.column(decoding.COLUMN).to_pylist()


def decoded_by_the_codec(values: list[bytes]) -> list[LogRecord]:
    return [LogRecord.from_kafka(TOPIC, 0, offset, value) for offset, value in enumerate(values)]


texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
registrations = st.builds(
    lambda d, s, n, url, mode, size, digest, chunks, ranges, producer: Event(
        d, RegisterLayer(s, n, url, mode, size, schema_sha256=digest, properties_schema_sha256=digest,
                         properties_batch=digest.encode() * 3, num_chunks=chunks, index_ranges=ranges),
        producer_id=producer),
    st.uuids(), texts, texts, texts, st.sampled_from(list(OnDuplicate)), st.integers(-(2**63), 2**63 - 1),
    st.sampled_from(["", "ab" * 32]), st.one_of(st.none(), st.integers(0, 2**40)),
    st.lists(st.builds(IndexRange, texts, st.sampled_from(list(IndexKind)), st.integers(-(2**63), 2**63 - 1),
                       st.integers(0, 2**62)), max_size=3).map(tuple),
    texts)


@settings(max_examples=examples(20), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(registrations, min_size=1, max_size=30))
def test_registrations_read_in_the_jvm_are_the_codecs_events(spark, events):
    values = [encode(event) for event in events]
    records, read_in_the_jvm = decoded_in_spark(spark, values)
    assert records == decoded_by_the_codec(values)
    assert all(read_in_the_jvm)


def test_every_other_record_is_decoded_by_the_codec_and_refused_for_the_same_reason(spark):
    dataset = uuid.uuid4()
    registration = Event(dataset, RegisterLayer("seg", "base", "file:///seg.rrd", OnDuplicate.REPLACE, 3,
                                                index_ranges=(IndexRange("t", IndexKind.SEQUENCE, 0, 9),)))
    good = encode(registration)
    event_id = str(registration.event_id).encode()
    older = [encode(registration, schema_version=version) for version in range(1, SCHEMA_VERSION)]
    others = [encode(Event(dataset, CreateDataset("droid"))),
              encode(Event(dataset, UnregisterLayers(("seg",), ())))]
    broken = {
        "trailing bytes": good + b"\x00",
        "truncated": good[:-3],
        "header only": good[:codec.HEADER_SIZE],
        "empty": b"",
        "not avro": b"not an event",
        "text that is not UTF-8": good.replace(b"seg", b"s\xffg", 1),
        "an id that is not a UUID": good.replace(event_id, b"x" * len(event_id)),
        "a command of another type than named": good.replace(b"RegisterLayer", b"RegisterLayeX", 1),
        "an unknown symbol": good.replace(b"file:///seg.rrd\x04", b"file:///seg.rrd\x0c", 1),
    }
    values = [good, *older, *others, *broken.values()]

    records, read_in_the_jvm = decoded_in_spark(spark, values)

    assert records == decoded_by_the_codec(values)
    reasons = dict(zip(broken, [record.decode_error for record in records[-len(broken):]], strict=True))
    assert all(reasons.values()), reasons
    # Read in the JVM: the registration of the newest version, and the one whose id only Python
    # finds is not a UUID.
    read = {value for value, jvm in zip(values, read_in_the_jvm, strict=True) if jvm}
    assert read == {good, broken["an id that is not a UUID"]}


def test_a_batch_with_a_time_python_cannot_hold_is_decoded_by_the_codec(spark):
    # Avro's Java reader takes any long as microseconds; Python's datetime stops at year 9999.
    good = encode(Event(uuid.uuid4(), RegisterLayer("seg", "base", "file:///seg.rrd")))
    schema = codec.SCHEMAS[SCHEMA_VERSION]
    record = fastavro.schemaless_reader(io.BytesIO(good[codec.HEADER_SIZE:]), schema, None,
                                        return_record_name=True)
    record["produced_at"] = 10**18  # microseconds: the year 33658
    body = io.BytesIO()
    fastavro.schemaless_writer(body, schema, record)
    values = [good[:codec.HEADER_SIZE] + body.getvalue(), good]

    records, read_in_the_jvm = decoded_in_spark(spark, values)

    assert read_in_the_jvm == [True, True]
    assert records == decoded_by_the_codec(values)
    assert "Overflow" in (records[0].decode_error or "") and records[1].event is not None
