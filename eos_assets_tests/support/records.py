"""Order records for the ingest tests, and what Kafka and bronze hold of them."""

import json
import uuid

import pyarrow as pa

from eos_assets.lib.delta import delta_io
from eos_assets_tests.support.txn_producer import Sent


def event(order: int, event_type: str = "order_created") -> bytes:
    return json.dumps(
        {
            "event_id": str(uuid.uuid4()),
            "event_type": event_type,
            "order_id": f"o-{order}",
            "customer_id": f"c-{order % 7}",
            "amount": 10.5 + order,
            "currency": "EUR",
            "event_time": "2026-11-21T10:00:00.123Z",
            "schema_version": 1,
        }
    ).encode()


def batch(n: int, partitions: int, first: int = 0) -> list[tuple[int, bytes, bytes]]:
    return [(i % partitions, f"o-{i}".encode(), event(i)) for i in range(first, first + n)]


def committed_truth(sent: list[Sent]) -> set[tuple[int, int, bytes | None]]:
    return {(p, o, v) for s in sent if s.committed for p, o, _, v in s.records}


def bronze(uri: str) -> pa.Table:
    return delta_io.read_arrow(uri)


def rows(uri: str) -> list[tuple[int, int, bytes | None]]:
    t = bronze(uri)
    return list(
        zip(
            t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist(), strict=True
        )
    )
