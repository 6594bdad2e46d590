"""The core, free of Dagster: each subpackage holds one responsibility.

- ``kafka``: offsets, admin calls, consumer lag, declared start positions.
- ``contract``: a stream's declared shape; a Kafka record into a bronze row or a malformed one.
- ``ingest``: bronze's exactly-once ingest (ranges, Spark task reads, one commit per run).
- ``delta``: Delta reads and commits, the log entries an increment reads, statistics,
  maintenance, every ``txn`` app id and commit-metadata key.
- ``derived``: the incremental protocol and the derived tables (silver, state, windows, KPIs).
- ``checks``: the logic of the asset checks and their thresholds.
- ``outbound``: aggregates published to Kafka exactly once, and declared KPI alerts.
- ``serving``: the DuckDB serving file.
- ``spark``: sessions, jars, Java, the class archive, the Spark Connect server.

``errors`` (one-line errors with their fix), ``faults`` (named crash points for the fault
tests), ``ports`` and ``local_process`` (the record of a local service's process) sit at the
top: more than one subpackage uses them.
"""
