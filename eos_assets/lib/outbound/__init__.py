"""What leaves the lake: window aggregates published to Kafka exactly once, and KPI alerts."""
