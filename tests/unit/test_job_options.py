"""Where the projector's query starts, how large its batches get, and how a batch runs, by default."""

from __future__ import annotations

import argparse
import gc
import json

import pytest

from events import CATALOG_TOPIC
from spark_streaming.folding import paused_gc
from spark_streaming.job import starting_offsets
from spark_streaming.options import MAX_OFFSETS_PER_TRIGGER, add_max_offsets_option


def test_a_query_without_checkpoint_starts_at_the_store_offsets() -> None:
    assert json.loads(starting_offsets({(CATALOG_TOPIC, 0): 1234})) == {CATALOG_TOPIC: {"0": 1234}}


def test_an_empty_store_starts_at_the_beginning_of_the_log() -> None:
    assert starting_offsets({}) == "earliest"


def test_offsets_of_other_topics_or_partitions_start_at_the_beginning() -> None:
    assert starting_offsets({("another.topic", 0): 5}) == "earliest"
    assert starting_offsets({(CATALOG_TOPIC, 0): 5, (CATALOG_TOPIC, 1): 7}) == "earliest"


def test_batches_are_bounded_unless_told_otherwise() -> None:
    parser = argparse.ArgumentParser()
    add_max_offsets_option(parser)
    assert parser.parse_args([]).max_offsets_per_trigger == MAX_OFFSETS_PER_TRIGGER
    assert parser.parse_args(["--max-offsets-per-trigger", "0"]).max_offsets_per_trigger == 0


@pytest.mark.parametrize("value", ["-5", "many"])
def test_a_batch_size_that_is_not_a_count_is_refused(value: str, capsys) -> None:
    parser = argparse.ArgumentParser()
    add_max_offsets_option(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-offsets-per-trigger", value])
    assert f"expected a number of records (0 for no limit), got '{value}'" in capsys.readouterr().err


def test_a_batch_runs_with_the_cyclic_collector_paused_and_restored():
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        assert not gc.isenabled()
        raise RuntimeError("a batch that fails")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # paused before: left paused
    finally:
        gc.enable()
