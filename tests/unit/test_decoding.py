"""Records decoded by Spark's tasks (``spark_streaming.decoding``) against the driver's own
decoding (``folding.decode_batch``): for random logs of every command kind, registrations written
by every schema version, undecodable values among them, and any split of a batch into
contiguous tasks answered in any order, the fold's records made of the tasks' columns are the
driver's, record for record, and the batch fold of them, in batches of any size, is the fold one
record at a time."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from events import encode
from events.codec import SCHEMAS
from profiles import examples
from projector import fold
from projector.batch_fold import fold_batch
from projector.layer_runs import materialized
from spark_streaming.decoding import DECODED, decode_columns, decode_partitions, parts_in_order, records
from spark_streaming.folding import decode_batch

from .conftest import MemoryCatalog
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

    assert records(decoded_by_tasks(rows, data)) == expected


@settings(max_examples=examples(40), deadline=None, database=None)
@given(rows=kafka_rows(), data=st.data())
def test_the_batch_fold_of_what_the_tasks_decoded_is_the_fold_one_record_at_a_time(
        rows: pa.Table, data: st.DataObject) -> None:
    memory = MemoryCatalog()
    start = 0
    while start < rows.num_rows:  # batches of any size
        batch = rows.slice(start, data.draw(st.integers(1, rows.num_rows - start)))
        expected = fold(memory, decode_batch(batch))
        assert materialized(fold_batch(memory, records(decoded_by_tasks(batch, data)))) == expected
        memory.apply(expected)
        start += batch.num_rows


def decoded_by_tasks(rows: pa.Table, data: st.DataObject) -> pa.Table:
    """``rows`` split into up to five contiguous tasks, decoded by each, their answers handed back
    in any order and put together as the driver does."""
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, rows.num_rows - 1)), max_size=4)))
    bounds = [0, *[c for c in cuts if c < rows.num_rows], rows.num_rows]
    parts = [part for start, end in zip(bounds, bounds[1:], strict=False)
             for part in decode_partitions(iter(rows.slice(start, end - start).to_batches()))]
    answered = pa.Table.from_batches(data.draw(st.permutations(parts))) if parts else None
    return parts_in_order(answered) if answered is not None else DECODED.empty_table()
