"""The same deduplication and window aggregation as silver/events + gold/window_aggregates,
written directly in DuckDB SQL over the same bronze files: information for users choosing."""

import math
import time
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import unquote, urlparse

import duckdb
import pyarrow as pa
from deltalake import DeltaTable

from eos_assets.defs.stream import ORDERS
from eos_assets.lib.delta.delta_io import read_rows
from eos_assets.lib.derived.window_aggregates import window_schema
from eos_assets.lib.derived.windows import EPOCH

_US = timedelta(microseconds=1)

# First delivery wins (lowest partition, offset: one bronze version here), valid records only,
# then 5-minute tumbling windows per event type and currency, as gold/window_aggregates has.
PEER_SQL = """
WITH firsts AS (
    SELECT * FROM read_parquet(?)
    WHERE error IS NULL
    QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY topic, "partition", "offset") = 1
)
SELECT
    epoch_us(event_time) // {size_us} * {size_us} AS window_start_us,
    event_type,
    coalesce(currency, '') AS currency,
    count(*) AS event_count,
    count(DISTINCT order_id) AS distinct_orders,
    count(DISTINCT customer_id) AS distinct_customers,
    sum(amount) AS amount_sum
FROM firsts
GROUP BY ALL
"""


@dataclass(frozen=True)
class PeerResult:
    """DuckDB's time, its windows, and how they compare with gold/window_aggregates."""

    seconds: float
    rows: int
    bronze_rows: int
    mismatched_windows: int


def _local(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def duckdb_peer(
    bronze_uri: str, bronze_version: int, windows_uri: str, threads: int, size_s: int = 300
) -> PeerResult:
    """Run the peer over bronze at ``bronze_version`` with ``threads`` threads; compare windows."""
    files = [_local(u) for u in DeltaTable(bronze_uri, version=bronze_version).file_uris()]
    began = time.monotonic()
    with duckdb.connect() as conn:
        conn.execute(f"SET threads = {threads}")
        conn.execute("SET TimeZone = 'UTC'")
        sql = PEER_SQL.format(size_us=size_s * 1_000_000)
        got = conn.sql(sql, params=[files]).to_arrow_table()
        seconds = time.monotonic() - began
        bronze_rows = conn.execute("SELECT count(*) FROM read_parquet(?)", [files]).fetchone()
    return PeerResult(
        seconds, got.num_rows, int(bronze_rows[0]) if bronze_rows else 0, _compare(got, windows_uri)
    )


def _compare(peer: pa.Table, windows_uri: str) -> int:
    """Windows whose counts or amount differ between the peer and gold (0: the same work)."""
    gold = read_rows(DeltaTable(windows_uri), window_schema(ORDERS.windows, ORDERS.contract))
    measures = ("event_count", "distinct_orders", "distinct_customers")

    def keyed(rows: list[dict], start: str) -> dict[tuple, dict]:
        return {(r[start], r["event_type"], r["currency"]): r for r in rows}

    a = keyed(peer.to_pylist(), "window_start_us")
    b = keyed([{**r, "us": (r["window_start"] - EPOCH) // _US} for r in gold.to_pylist()], "us")

    def same(x: dict, y: dict) -> bool:
        close = math.isclose(x["amount_sum"] or 0.0, y["amount_sum"] or 0.0, abs_tol=1e-6)
        return close and all(x[m] == y[m] for m in measures)

    return len(a.keys() ^ b.keys()) + sum(1 for k in a.keys() & b.keys() if not same(a[k], b[k]))
