"""Where commands go: one topic with one partition, keyed by dataset id.

Every outcome must be a function of the log alone, whatever the projector's micro-batch
boundaries (invariant 1). Names are unique across the catalog and a dataset's lifecycle (create,
rename, delete) decides what its layer commands do, so all commands share one total order: a
single partition. The fold runs in one process anyway, so more partitions would add no
parallelism; a Kafka partition carries far more events per second than the fold consumes.
The key is still the dataset id, so compaction and tooling see per-dataset streams.
"""

from events.model import Command

CATALOG_TOPIC = "strata.catalog"
TOPICS = (CATALOG_TOPIC,)


def topic_for(command: Command) -> str:
    return CATALOG_TOPIC
