"""The Spark Structured Streaming adapter: Kafka source -> foreachBatch -> decode -> fold -> store.

Thin by design: ``job`` decodes record values with ``events``, hands them to
``projector.apply_batch`` and holds no domain rule of its own; ``__main__`` runs it. Imports no
confluent_kafka.
"""
