"""Where librdkafka's own log lines go: Python logging (``strata.kafka``), never the terminal.

Every confluent-kafka client strata creates (producers, consumers, admin clients) passes
``LOGGER`` as its ``logger`` setting; without it librdkafka prints to stderr. Its warnings are
transient (a coordinator still loading, a broker reconnecting) and failures reach the caller as
exceptions, so nothing is printed unless the application configures logging.
"""

from __future__ import annotations

import logging

LOGGER = logging.getLogger("strata.kafka")
LOGGER.addHandler(logging.NullHandler())  # else Python's last-resort handler prints warnings
