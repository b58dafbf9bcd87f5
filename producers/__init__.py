"""Appending events to the Kafka log.

Owns: the typed producer over confluent-kafka (idempotent, acks=all, murmur2_random, key = dataset
id), which returns the (topic, partition, offset) of every event from its delivery report; topic
creation; and reading the log back (end offsets, a range of records); and ``LOGGER``, the Python
logger (``strata.kafka``) every confluent-kafka client of strata hands librdkafka's log lines to.
Imports no Spark or store code.
"""

from producers._logging import LOGGER
from producers.log_reader import end_offsets, offset_after, read_range
from producers.producer import DeliveryError, EventProducer, Position
from producers.topics import ensure_topics, wait_for_topics

__all__ = ["LOGGER", "DeliveryError", "EventProducer", "Position", "end_offsets", "ensure_topics",
           "offset_after", "read_range", "wait_for_topics"]
