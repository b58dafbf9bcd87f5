"""Where librdkafka's own log lines go: Python logging (``strata.kafka``), never the terminal.

Every confluent-kafka client strata creates (producers, consumers, admin clients) passes
``LOGGER`` as its ``logger`` setting; without it librdkafka prints to stderr.
"""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("strata.kafka")
