"""Which topic each command goes to.

Catalog-wide decisions (a dataset name is unique) need one total order, so entry lifecycle events
go to a single-partition topic that the projector applies before layer events in each batch.
Layer events are keyed by dataset id, so everything about one dataset keeps its order.
"""

from events.model import Command, CreateDataset

ENTRIES_TOPIC = "strata.entries"
LAYERS_TOPIC = "strata.layers"
TOPICS = (ENTRIES_TOPIC, LAYERS_TOPIC)


def topic_for(command: Command) -> str:
    return ENTRIES_TOPIC if isinstance(command, CreateDataset) else LAYERS_TOPIC
