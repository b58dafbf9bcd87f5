"""Records decoded by Spark's tasks (``spark_streaming.decoding``) against the driver's own
decoding (``folding.decode_batch``): for random logs of every command kind, registrations written
by every schema version, undecodable values among them, and any split of a batch into
contiguous tasks, the fold's records made of the tasks' columns are the driver's, record for
record."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from events import encode
from events.codec import SCHEMAS
from profiles import examples
from spark_streaming.decoding import DECODED, decode_columns, decode_partitions, parts_in_order, records
from spark_streaming.folding import decode_batch

from .test_batch_boundaries import TOPIC, build_log
from .test_batch_fold import histories

VERSIONS = sorted(SCHEMAS)


@st.composite
def kafka_rows(draw: st.DrawFn) -> pa.Table:
    """The Kafka rows of a random log: now and then an event written by an older schema version
    (as an older producer writes it), a null value, or the bytes of no event at all."""
    values: list[bytes | None] = []
    for record in build_log(draw(histories)):
        value: bytes | None = record.raw
        change = draw(st.integers(0, 12))
        if change < 3 and record.event is not None:
            try:
                value = encode(record.event, schema_version=draw(st.sampled_from(VERSIONS)))
            except (KeyError, ValueError):  # a command that version cannot carry
                pass
        elif change == 3:
            value = None
        elif change == 4:
            value = draw(st.binary(max_size=40))
        values.append(value)
    return pa.table({"topic": [TOPIC] * len(values), "partition": pa.array([0] * len(values), pa.int32()),
                     "offset": pa.array(range(len(values)), pa.int64()),
                     "value": pa.array(values, pa.binary())})


@settings(max_examples=examples(60), deadline=None, database=None)
@given(rows=kafka_rows(), data=st.data())
def test_records_made_of_the_tasks_columns_are_the_drivers_decoding(rows: pa.Table,
                                                                    data: st.DataObject) -> None:
    expected = decode_batch(rows)
    columns = decode_columns(rows)
    assert records(columns) == expected
    # Registrations cross as columns, anything else as its bytes alone.
    assert [s is not None for s in columns.column("segment_id").to_pylist()] == \
        [r.event is not None and r.event.event_type == "RegisterLayer" for r in expected]

    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, rows.num_rows - 1)), max_size=4)))
    bounds = [0, *[c for c in cuts if c < rows.num_rows], rows.num_rows]
    parts = [part for start, end in zip(bounds, bounds[1:], strict=False)
             for part in decode_partitions(iter(rows.slice(start, end - start).to_batches()))]
    answered = pa.Table.from_batches(data.draw(st.permutations(parts))) if parts else None
    decoded = parts_in_order(answered) if answered is not None else DECODED.empty_table()
    assert records(decoded) == expected
