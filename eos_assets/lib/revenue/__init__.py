"""The revenue KPIs and KPI alerts of streams of the order shape: the one part of the core that
knows the orders fields.
"""
