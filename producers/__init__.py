"""Appending events to the Kafka log.

Owns: the typed producer over confluent-kafka (idempotent, acks=all, murmur2_random, key = dataset
id) and topic creation. Returns the (topic, partition, offset) of every event from its delivery
report. Imports no Spark or store code.
"""

from producers.producer import DeliveryError, EventProducer, Position
from producers.topics import ensure_topics

__all__ = ["DeliveryError", "EventProducer", "Position", "ensure_topics"]
