"""A stream nobody shipped: declared in a YAML written here, loaded with the definitions, and
materialized end to end on the real broker, Spark, Delta and DuckDB by the same code that runs
the shipped streams.

Sensor readings: the id is ``reading_id``, the time ``at`` in epoch seconds (with fractions),
no amounts, a boolean and a double; windows per device with count, sum, min and max; the state
of each device; a KPI over the windows.
"""

import math
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from deltalake import DeltaTable

from eos_assets.lib.kafka.kafka_admin import ensure_topic
from eos_assets.run_stream import summary_line
from eos_assets_tests.support.declared import Loader, produce_json, run_stream

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z, epoch seconds
WINDOW_S = 300


def declaration(topic: str) -> dict:
    return {
        "type": "eos_assets.components.EventStream",
        "attributes": {
            "name": "readings",
            "topics": [topic],
            "event_id": {"field": "reading_id"},
            "event_time": {"field": "at", "format": "epoch_seconds"},
            "payload": {
                "device": {"type": "string", "required": True},
                "celsius": {"type": "double", "required": True},
                "ok": {"type": "boolean"},
            },
            "entity": {
                "key": "device",
                "fields": {
                    "celsius": {"fold": "latest"},
                    "readings": {"fold": "count"},
                    "hottest": {"fold": "max", "of": "celsius"},
                    "last_seen": {"fold": "last_time"},
                },
            },
            "windows": {
                "dimensions": ["device"],
                "measures": {
                    "readings": {"agg": "count"},
                    "total": {"agg": "sum", "of": "celsius"},
                    "low": {"agg": "min", "of": "celsius"},
                    "high": {"agg": "max", "of": "celsius"},
                },
            },
            "kpis": {
                "by_device": {
                    "sql": "SELECT device, sum(readings) AS readings, max(high) AS hottest "
                    "FROM window_aggregates GROUP BY ALL"
                },
                "devices": {"sql": "SELECT count(*) AS devices FROM entity_state"},
            },
            "serve": ["by_device", "devices"],
        },
    }


def readings() -> tuple[list[object], list[dict]]:
    """What is produced (with one duplicate and two malformed records) and the valid events."""
    valid = [
        {
            "reading_id": f"r-{i}",
            "at": START + i * 37.5,
            "device": f"d{i % 3}",
            "celsius": 20.0 + (i * 7 % 11) / 2,
            "ok": i % 4 != 0,
        }
        for i in range(40)
    ]
    sent: list[object] = [*valid, valid[5], {"reading_id": "bad-1", "at": "yesterday"}]
    sent.append(b"{not json")
    return sent, valid


def test_a_stream_declared_in_a_test_is_materialized_end_to_end(
    load: Loader, kafka_bootstrap: str, make_topic, spark, lake_root: str, tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    _, models = load({"readings": declaration(topic)})
    (model,) = models
    sent, valid = readings()
    produce_json(kafka_bootstrap, topic, sent, partitions=2)
    warehouse = tmp_path / f"serving-{uuid.uuid4().hex[:6]}.duckdb"

    parts, result = run_stream(model, kafka_bootstrap, lake_root, warehouse)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    # 2 malformed of 43 records is above the 1% the malformed-rate check allows: it warns.
    assert checks.pop("malformed_rate_below_threshold") is False
    assert checks and all(checks.values()), checks

    def table(key) -> list[dict]:
        return DeltaTable(f"{lake_root}/{'/'.join(key.path)}").to_pyarrow_table().to_pylist()

    stream = parts.stream
    bronze = table(stream.raw_events)
    assert len(bronze) == len(sent)
    assert sum(r["error"] is not None for r in bronze) == 2  # kept, with the reason
    events = table(stream.events)
    assert sorted(r["event_id"] for r in events) == sorted(v["reading_id"] for v in valid)

    want: dict[tuple, dict] = defaultdict(lambda: {"readings": 0, "total": 0.0, "temps": []})
    for v in valid:
        start = datetime.fromtimestamp(v["at"] // WINDOW_S * WINDOW_S, UTC)
        w = want[(start, v["device"])]
        w["readings"] += 1
        w["total"] += v["celsius"]
        w["temps"].append(v["celsius"])
    got = {(r["window_start"], r["device"]): r for r in table(stream.window_aggregates)}
    assert got.keys() == want.keys()
    for key, w in want.items():
        row = got[key]
        assert row["readings"] == w["readings"]
        assert math.isclose(row["total"], w["total"])
        assert (row["low"], row["high"]) == (min(w["temps"]), max(w["temps"]))

    state = {r["device"]: r for r in table(stream.entity_state)}
    for device in ("d0", "d1", "d2"):
        mine = [v for v in valid if v["device"] == device]
        last = max(mine, key=lambda v: v["at"])
        assert state[device]["celsius"] == last["celsius"]
        assert state[device]["readings"] == len(mine)
        assert state[device]["hottest"] == max(v["celsius"] for v in mine)

    with duckdb.connect(str(warehouse), read_only=True) as con:
        served = dict(con.execute("SELECT device, readings FROM readings.by_device").fetchall())
        (devices,) = con.execute("SELECT devices FROM readings.devices").fetchone() or (None,)
    assert served == {d: sum(v["device"] == d for v in valid) for d in ("d0", "d1", "d2")}
    assert devices == 3

    # `eos-assets run` prints a count for every table, these two included.
    mats = [
        e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    ]
    lines = {
        m.asset_key.path[-1]: summary_line(m.asset_key, {k: v.value for k, v in m.metadata.items()})
        for m in mats
    }
    assert lines["entity_state"].endswith(f"silver/entity_state: entities_touched {len(state)}")
    assert lines["late_events"].endswith("gold/late_events: late_events 0"), lines


def test_a_topic_pattern_reads_every_matching_topic_and_new_ones_at_the_next_run(
    load: Loader, kafka_bootstrap: str, spark, lake_root: str, tmp_path: Path
) -> None:
    prefix = f"sensors-{uuid.uuid4().hex[:6]}"
    document = declaration("unused")
    del document["attributes"]["topics"]
    document["attributes"]["topic_pattern"] = rf"{prefix}\.site-[a-z]+"
    _, (model,) = load({"readings": document})
    _, valid = readings()
    first, second, later = (f"{prefix}.site-{s}" for s in ("north", "south", "west"))
    for topic in (first, second, f"{prefix}.other"):  # the last one does not match
        ensure_topic(kafka_bootstrap, topic, 1)
    produce_json(kafka_bootstrap, first, valid[:20], partitions=1)
    produce_json(kafka_bootstrap, second, valid[20:], partitions=1)
    produce_json(kafka_bootstrap, f"{prefix}.other", valid, partitions=1)
    warehouse = tmp_path / "serving.duckdb"

    parts, result = run_stream(model, kafka_bootstrap, lake_root, warehouse)
    assert result.success
    uri = f"{lake_root}/{'/'.join(parts.stream.raw_events.path)}"
    bronze = DeltaTable(uri).to_pyarrow_table(columns=["topic"]).column("topic").to_pylist()
    assert sorted(set(bronze)) == [first, second] and len(bronze) == len(valid)

    ensure_topic(kafka_bootstrap, later, 1)  # created after the first run: read by the next
    produce_json(kafka_bootstrap, later, [{**valid[0], "reading_id": "r-late"}], partitions=1)
    _, again = run_stream(model, kafka_bootstrap, lake_root, warehouse)
    assert again.success
    bronze = DeltaTable(uri).to_pyarrow_table(columns=["topic"]).column("topic").to_pylist()
    assert bronze.count(later) == 1 and len(bronze) == len(valid) + 1
