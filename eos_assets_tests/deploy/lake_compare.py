"""Two lakes (and their DuckDB mirrors) compared table by table, row by row, in any order."""

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
from deltalake import DeltaTable

from eos_assets.lib.delta.delta_io import read_rows

Row = tuple[Any, ...]
# Written at mirror time or naming the lake: they differ between two runs by construction.
_RUN_SPECIFIC = {
    "eos_delta_versions": ("delta_uri", "mirrored_at"),
}


def delta_tables(lake_root: str) -> list[str]:
    """Paths (relative to the lake root: a folder or an ``s3://`` URI, read with the store's
    variables of this process) of every Delta table in it."""
    fs, base = pafs.FileSystem.from_uri(lake_root)
    found = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    logs = {f.path.split("/_delta_log/", 1)[0] for f in found if "/_delta_log/" in f.path}
    return sorted(log.removeprefix(base.rstrip("/") + "/") for log in logs)


def delta_rows(lake_root: str, table: str) -> tuple[list[str], list[Row]]:
    """Column names and every row of the latest snapshot of a Delta table."""
    dt = DeltaTable(f"{lake_root.rstrip('/')}/{table}")
    data = read_rows(dt, pa.schema(dt.schema().to_arrow()))  # type: ignore[arg-type]
    return data.column_names, [tuple(r.values()) for r in data.to_pylist()]


def duckdb_rows(path: Path) -> dict[str, tuple[list[str], list[Row]]]:
    """Column names and rows of every table of a DuckDB file, less the run-specific columns."""
    out = {}
    with duckdb.connect(str(path), read_only=True) as conn:
        tables = conn.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        qualified = {t if s == "main" else f"{s}.{t}": f'"{s}"."{t}"' for s, t in tables}
        for name in sorted(qualified):
            cursor = conn.execute(f"SELECT * FROM {qualified[name]}")
            columns = [d[0] for d in cursor.description or []]
            keep = [i for i, c in enumerate(columns) if c not in _RUN_SPECIFIC.get(name, ())]
            rows = [tuple(r[i] for i in keep) for r in cursor.fetchall()]
            out[name] = ([columns[i] for i in keep], rows)
    return out


def differences(what: str, want: Sequence[Row], got: Sequence[Row]) -> list[str]:
    """What differs between two bags of rows; floats equal within 1e-9 relative, 1e-9 absolute.

    Rows are paired after sorting on their non-float values (every table has a key without
    floats); Spark may sum floats in another order on another cluster layout.
    """
    if len(want) != len(got):
        return [f"{what}: {len(got)} rows, want {len(want)}"]
    out = []
    for a, b in zip(sorted(want, key=_order), sorted(got, key=_order), strict=True):
        if not all(_same(x, y) for x, y in zip(a, b, strict=True)):
            out.append(f"{what}: got {b!r}, want {a!r}")
    return out


def _order(row: Row) -> tuple[tuple[str, ...], tuple[float, ...]]:
    exact = tuple(repr(v) for v in row if not isinstance(v, float))
    return exact, tuple(round(v, 3) for v in row if isinstance(v, float))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b
