"""What leaves the lake: window aggregates published to Kafka exactly once, and alerts delivered
over HTTP at least once with an idempotency key (their ledger).
"""
