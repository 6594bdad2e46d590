"""The Delta helpers on real delta-rs tables, without Spark: create, commit files with ``txn``
actions, read slices, upsert."""

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake.transaction import AddAction

from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.delta_stats import file_stats
from eos_assets.lib.delta.txn_ids import upstream_app
from eos_assets.lib.errors import EosError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.string())])
APP = upstream_app("test/upstream")
OTHER = upstream_app("test/other")


def _write_file(uri: str, day: str, rows: pa.Table) -> AddAction:
    """A Parquet file of one ``day`` partition written inside the table folder, as an action."""
    stored = rows.select(delta_io.data_schema(SCHEMA, ["day"]).names)
    path = f"day={day}/part-{uuid.uuid4().hex}.parquet"
    Path(uri, f"day={day}").mkdir(parents=True, exist_ok=True)
    pq.write_table(stored, f"{uri}/{path}")
    return delta_io.add_action(
        path, Path(uri, path).stat().st_size, file_stats(stored), {"day": day}
    )


def test_ensure_table_creates_once_with_partitions_and_properties(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    created = delta_io.ensure_table(
        uri, SCHEMA, partition_by=["day"], configuration=delta_io.merged_table_config()
    )
    assert created.version() == 0 and created.metadata().partition_columns == ["day"]
    assert created.metadata().configuration == {"delta.targetFileSize": "1048576"}
    again = delta_io.ensure_table(uri, SCHEMA)
    assert again.version() == 0 and again.metadata().partition_columns == ["day"]
    assert delta_io.exists(uri) and not delta_io.exists(str(tmp_path / "other"))


def test_ensure_table_on_an_unwritable_location_says_so_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EosError) as raised:
        delta_io.ensure_table(str(blocker / "t"), SCHEMA)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("cannot create the Delta table at ")
    assert message.endswith("make EOS_LAKE_ROOT a writable location")


def test_commit_files_records_positions_and_partition_values(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    dt = delta_io.ensure_table(uri, SCHEMA, partition_by=["day"])
    assert delta_io.positions(dt, [APP]) == {APP: None}
    rows = pa.table({"id": [1, 2], "name": ["a", "b"], "day": ["d1", "d1"]}, SCHEMA)
    actions = [_write_file(uri, "d1", rows)]
    delta_io.commit_files(dt, actions, SCHEMA, {APP: 7}, {"eos.run_id": "r1"}, partition_by=["day"])
    latest = delta_io.load(uri)
    assert delta_io.positions(latest, [APP, OTHER]) == {APP: 7, OTHER: None}
    assert delta_io.find_commit(uri, "eos.run_id", "r1") == 1
    assert delta_io.read_rows(latest, SCHEMA).sort_by("id").equals(rows)
    assert delta_io.read_arrow(uri, columns=["id"]).column("id").to_pylist() == [1, 2]


def test_a_commit_from_a_stale_snapshot_fails_and_changes_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    delta_io.ensure_table(uri, SCHEMA)
    mine, theirs = delta_io.load(uri), delta_io.load(uri)
    delta_io.commit_files(theirs, [], SCHEMA, {APP: 1}, {"eos.run_id": "theirs"})
    with pytest.raises(delta_io.CommitFailedError):
        delta_io.commit_files(mine, [], SCHEMA, {APP: 1}, {"eos.run_id": "mine"})
    assert delta_io.load(uri).version() == 1
    with pytest.raises(EosError):
        delta_io.find_commit(uri, "eos.run_id", "mine")


def test_metadata_keeps_json_values_unless_text_values(tmp_path: Path) -> None:
    """Bronze reads its ranges back as lists; derived tables record their metadata as text."""
    uri = str(tmp_path / "t")
    metadata = {"eos.run_id": "r", "eos.ranges": [{"partition": 0, "end": 3}], "eos.n": 2}
    delta_io.commit_files(delta_io.ensure_table(uri, SCHEMA), [], SCHEMA, {APP: 1}, metadata)
    delta_io.commit_files(delta_io.load(uri), [], SCHEMA, {APP: 2}, metadata, text_values=True)
    text, json_values = delta_io.load(uri).history(2)
    assert json_values["eos.ranges"] == [{"partition": 0, "end": 3}] and json_values["eos.n"] == 2
    assert text["eos.ranges"] == '[{"partition": 0, "end": 3}]' and text["eos.n"] == "2"
    assert text["eos.run_id"] == json_values["eos.run_id"] == "r"


def test_read_rows_prunes_files_by_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    dt = delta_io.ensure_table(uri, SCHEMA, partition_by=["day"])
    one = pa.table({"id": [1], "name": ["a"], "day": ["d1"]}, SCHEMA)
    two = pa.table({"id": [2], "name": ["b"], "day": ["d2"]}, SCHEMA)
    actions = [_write_file(uri, "d1", one), _write_file(uri, "d2", two)]
    delta_io.commit_files(dt, actions, SCHEMA, {APP: 1}, {}, partition_by=["day"])
    latest = delta_io.load(uri)
    assert [f.partition_values for f in delta_io.data_files(latest)] != []
    assert delta_io.read_rows(latest, SCHEMA, "day = 'd2'").equals(two)
    assert delta_io.read_rows(latest, SCHEMA, "day = 'd3'", ["id"]).num_rows == 0


def test_upsert_replaces_by_key_and_an_empty_batch_still_records_the_position(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    delta_io.ensure_table(uri, SCHEMA, configuration=delta_io.merged_table_config())
    first = pa.table({"id": [1, 2], "name": ["a", "b"], "day": ["d1", "d1"]}, SCHEMA)
    delta_io.upsert(delta_io.load(uri), first, ["id"], "id", {APP: 1}, {"eos.v": [1]})
    second = pa.table({"id": [2, 3], "name": ["B", "c"], "day": ["d1", "d2"]}, SCHEMA)
    delta_io.upsert(delta_io.load(uri), second, ["id"], "id", {APP: 2}, {"eos.v": [2]})
    rows = delta_io.read_arrow(uri).sort_by("id").to_pylist()
    assert [(r["id"], r["name"]) for r in rows] == [(1, "a"), (2, "B"), (3, "c")]
    metrics = delta_io.upsert(delta_io.load(uri), SCHEMA.empty_table(), ["id"], "id", {APP: 3}, {})
    latest = delta_io.load(uri)
    assert metrics == {"num_source_rows": 0} and delta_io.positions(latest, [APP]) == {APP: 3}
    assert latest.history(2)[1]["eos.v"] == "[2]"
    assert delta_io.read_arrow(uri).num_rows == 3
