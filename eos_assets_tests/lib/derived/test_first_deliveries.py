"""Which delivery of an event silver/events keeps, decided from bronze files on the driver."""

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eos_assets.lib.derived.first_deliveries import decide, read_batch
from eos_assets.lib.derived.increments import AddedFile
from eos_assets.lib.errors import EosError

T0 = datetime(2026, 11, 21, 23, 50, tzinfo=UTC)
SPAN_US = 15 * 60 * 1_000_000


def _bronze(path: Path, rows: list[tuple[str, str, int, int, str | None]]) -> str:
    """A bronze-like file of ``(event_id, topic, partition, offset, error)`` rows."""
    ids, topics, parts, offsets, errors = zip(*rows, strict=True)
    table = pa.table(
        {
            "event_id": pa.array(ids),
            "event_time": pa.array([T0] * len(rows), pa.timestamp("us", "UTC")),
            "error": pa.array(errors, pa.string()),
            "topic": pa.array(topics),
            "partition": pa.array(parts, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
        }
    )
    pq.write_table(table, path)
    return str(path)


def _files(tmp_path: Path, versions: dict[int, list[tuple]]) -> list[AddedFile]:
    return [
        AddedFile(v, _bronze(tmp_path / f"{v}.parquet", rows), 0, len(rows), {})
        for v, rows in versions.items()
    ]


def _kept(decided: pa.Table) -> dict[str, tuple | None]:
    names = ["_keep_bronze_version", "_keep_topic", "_keep_partition", "_keep_offset"]
    return {
        r["event_id"]: None if r["_keep_offset"] is None else tuple(r[n] for n in names)
        for r in decided.to_pylist()
    }


def test_the_first_delivery_wins_across_versions_and_positions(tmp_path: Path) -> None:
    files = _files(
        tmp_path,
        {
            3: [("a", "t", 1, 9, None), ("b", "t", 0, 5, None), ("a", "t", 0, 7, None)],
            2: [("a", "u", 0, 1, None), ("c", "t", 0, 1, None), ("b", "t", 0, 2, "bad")],
            4: [("b", "s", 0, 1, None)],
        },
    )
    batch = read_batch(files, SPAN_US)
    assert batch.rows.num_rows == 6 and len(batch.ids) == 3
    assert batch.spans == [datetime(2026, 11, 21, 23, 45, tzinfo=UTC)]
    # a: version 2 before 3; b: its version-2 row is malformed, so version 3 wins; c: once.
    assert _kept(decide(batch, [])) == {"a": (2, "u", 0, 1), "b": (3, "t", 0, 5)}


def test_an_id_silver_holds_keeps_no_delivery(tmp_path: Path) -> None:
    silver = tmp_path / "silver.parquet"
    pq.write_table(pa.table({"event_id": ["a", "c", "y", "z"]}), silver)
    rows = [("a", "t", 0, 1, None), ("a", "t", 0, 2, None), ("c", "t", 0, 3, None)]
    batch = read_batch(_files(tmp_path, {0: [*rows, ("d", "t", 0, 4, None)]}), SPAN_US)
    assert _kept(decide(batch, [str(silver)])) == {"a": None, "c": None}
    # The same with more ids in the batch than in silver (the other side is looked up).
    batch = read_batch(
        _files(tmp_path, {0: [*rows, *((f"e{i}", "t", 0, i, None) for i in range(5, 9))]}), SPAN_US
    )
    assert _kept(decide(batch, [str(silver)])) == {"a": None, "c": None}


def test_one_position_twice_is_refused(tmp_path: Path) -> None:
    files = _files(tmp_path, {0: [("a", "t", 0, 1, None), ("a", "t", 0, 1, None)]})
    with pytest.raises(EosError, match="offset 1 twice"):
        decide(read_batch(files, SPAN_US), [])
