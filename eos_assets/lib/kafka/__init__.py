"""Kafka: offsets, admin calls, consumer lag and its trend, and where a declared start points."""
