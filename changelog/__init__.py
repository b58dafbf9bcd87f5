"""The changelog: the change feed published to a compacted Kafka topic for Kafka-native
subscribers (``strata.catalog.changes``); and beside it the Lance copies of tables created with a
``url`` (``changelog.lance_mirror``), which follow the store the same way.

A relay follows the store's feed (it reads the store like any client) and publishes, for each
dataset, segment, layer, table and rejection a change touched, its state as the store now holds
it, or a tombstone once it is gone. A consumer that reads the topic from the beginning and keeps
the last value per key ends with the catalog the store holds. The relay resumes from the source
offset in the topic's last record, so a crash repeats some records and loses none; repeating a
state is harmless. Owns the topic's keys and values (``events/schemas/catalog_change.v1.avsc``).
"""

from changelog.records import CHANGES_TOPIC, OFFSET_HEADER, decode_value, key_of, records_of
from changelog.relay import ChangelogRelay

__all__ = ["CHANGES_TOPIC", "OFFSET_HEADER", "ChangelogRelay", "decode_value", "key_of", "records_of"]
