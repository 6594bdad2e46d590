"""How a Spark write task cuts its sorted rows into one file per group."""

import pyarrow as pa

from eos_assets.lib.delta.file_writer import _slices


def groups(table: pa.Table, keys: list[str]) -> list[list[object]]:
    return [s.column(keys[0]).to_pylist() for s in _slices(table, keys)]


def test_a_task_with_one_row_writes_one_group() -> None:
    assert groups(pa.table({"d": ["2026-11-26"]}), ["d"]) == [["2026-11-26"]]


def test_runs_of_equal_keys_are_groups_and_nulls_are_one_group() -> None:
    table = pa.table({"d": ["a", "a", "b", None, None], "s": [1, 2, 2, 3, 3]})
    assert groups(table, ["d"]) == [["a", "a"], ["b"], [None, None]]
    assert [s.num_rows for s in _slices(table, ["d", "s"])] == [1, 1, 1, 2]


def test_a_key_that_is_null_everywhere_splits_nothing() -> None:
    table = pa.table({"d": pa.array([None, None, None], pa.null()), "s": [1, 1, 2]})
    assert [s.num_rows for s in _slices(table, ["d", "s"])] == [2, 1]


def test_no_rows_no_group_and_no_keys_one_group() -> None:
    assert groups(pa.table({"d": pa.array([], pa.string())}), ["d"]) == []
    assert [s.num_rows for s in _slices(pa.table({"d": ["a", "b"]}), [])] == [2]
