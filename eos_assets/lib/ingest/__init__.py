"""Bronze's exactly-once ingest: plan offset ranges, read them in Spark tasks, commit data and
positions in one Delta commit.
"""
