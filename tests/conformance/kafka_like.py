"""The Kafka-like "port" the tests drive: the kit's model of upstream Kafka, served as a port.

``kafka_like("kafka")`` (or comma-separated ids) is ``kpurgatory.conformance.kafka_model``:
the reference with the named Kafka behaviours switched on. Served through an adapter
(``broken_adapter.py --bug kafka``) it stands for a port that follows Kafka in those
respects and the spec everywhere else.
"""

from kpurgatory.conformance.kafka_model import kafka_like

__all__ = ["kafka_like"]
