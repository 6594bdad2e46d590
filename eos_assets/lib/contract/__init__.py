"""The event contract: a stream's declared shape, and how a Kafka record becomes a bronze row or a
malformed one.
"""
