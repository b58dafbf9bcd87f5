"""What runs strata's services on one machine or next to existing clusters: ``Server`` (the
embedded Kafka broker, the topics, the Spark projector in a process of its own), the broker and
process helpers, the ``strata`` command line, the demo and its DROID-like recordings.

The top room: it imports the rooms below it (``spark_streaming``, ``dashboard``, ``sdk``,
``projector``, ``producers``, ``events``, ``settings``) and none imports it, except ``sdk.Server``,
a forward to ``Server`` made on first use.
"""

from stack.server import Server

__all__ = ["Server"]
