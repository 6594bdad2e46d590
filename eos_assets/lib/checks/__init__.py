"""The logic of the asset checks: uniqueness, offset contiguity, audit against Kafka, freshness,
malformed rate, window reconciliation.
"""
