"""No projector running: ``wait()`` gives up on time and says how far the projection got; once
the projector is back, the registration is applied exactly once."""

from __future__ import annotations

import re
import time

import pytest

import sdk
from events import CATALOG_TOPIC
from stack import Server
from stack_tools import returns_within
from stores import store_offsets


def test_wait_times_out_while_the_projector_is_down_then_applies_once(
        server: Server, dataset: sdk.DatasetEntry, make_rrd) -> None:
    uri = make_rrd("while_down")
    server.stop_projector()
    try:
        operation = dataset.register([uri])
        [awaited] = operation.positions
        started = time.monotonic()
        with pytest.raises(TimeoutError) as raised:  # an error, not a hang
            returns_within(20, lambda: operation.wait(timeout_secs=2))
        assert time.monotonic() - started >= 2  # it waited as long as it was told
        store_next = store_offsets(server.store)[(CATALOG_TOPIC, 0)]
    finally:
        server.start_projector()

    message = str(raised.value)
    assert isinstance(raised.value, sdk.ProjectionTimeoutError)
    assert raised.value.awaited == [awaited]
    assert raised.value.reached == {(CATALOG_TOPIC, 0): store_next}
    assert store_next <= awaited.offset
    # The message names the awaited offset and the store's position.
    assert f"{CATALOG_TOPIC}[0] offset {awaited.offset}" in message, message
    assert re.search(rf"store's next offset: {store_next}\b", message), message

    assert operation.wait(timeout_secs=120).segment_ids == ["while_down"]
    assert dataset.segment_ids().count("while_down") == 1
    manifest = dataset.manifest().to_arrow_table()
    assert manifest.column("rerun_storage_url").to_pylist().count(uri) == 1
