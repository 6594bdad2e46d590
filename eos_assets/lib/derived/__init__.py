"""The derived tables and the incremental protocol they share: silver events, entity state,
windows, declared KPIs.
"""
