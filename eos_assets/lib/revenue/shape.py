"""The order shape: the declared events the revenue KPIs compute from, field by field as a
declaration says it (``components/builtin.has_order_shape`` compares a stream with it)."""

ORDER_SHAPE: dict[str, object] = {
    "event_id": {"field": "event_id"},
    "event_time": {"field": "event_time", "format": "iso8601"},
    "payload": {
        "event_type": {
            "type": "string",
            "required": True,
            "values": ["order_created", "order_paid", "order_cancelled", "order_refunded"],
        },
        "order_id": {"type": "string", "required": False, "values": None},
        "customer_id": {"type": "string", "required": False, "values": None},
        "amount": {"type": "double", "required": True, "values": None},
        "currency": {"type": "string", "required": False, "values": None},
    },
    "windows.dimensions": ["event_type", "currency"],
    "windows.measures": {
        "event_count": {"agg": "count", "of": None},
        "distinct_orders": {"agg": "count_distinct", "of": "order_id"},
        "distinct_customers": {"agg": "count_distinct", "of": "customer_id"},
        "amount_sum": {"agg": "sum", "of": "amount"},
    },
}
