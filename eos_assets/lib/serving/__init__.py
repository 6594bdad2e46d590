"""Serving: DuckDB tables of the KPIs, published by an atomic swap of the database file."""
