"""The Spark Structured Streaming adapter: Kafka source -> foreachBatch -> decode -> fold -> store.

Thin by design: it decodes record values with ``events``, hands them to ``projector.apply_batch``
and holds no domain rule of its own. Imports no confluent_kafka.
"""

from spark_streaming.job import ProjectorJob, build_session, connector_jars, decode_batch

__all__ = ["ProjectorJob", "build_session", "connector_jars", "decode_batch"]
