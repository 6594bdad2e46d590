"""Step order inside a run: the path to the served KPIs first.

Among the steps whose inputs are ready, a run's executor starts the one with the highest
``dagster/priority`` first. The steps off the path bronze → silver/events → gold/<kpi> →
serving/kpis carry a lower one, so a run of ``ingest_and_refresh`` makes new events visible in
DuckDB before it refreshes order state, window aggregates and the outbound publishers, and
before bronze's malformed-rate check (it only warns, and reads bronze's whole error column).
"""

AFTER_SERVING = {"dagster/priority": "-1"}
