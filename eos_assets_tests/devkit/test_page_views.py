"""The page-view example: its declaration, its demo events, the producer sending them, and the
oracle that says what its tables must hold."""

import dataclasses
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from eos_assets.cli import build_parser, main
from eos_assets.declaration import FieldType, StreamModel, check_kpis, read_declaration
from eos_assets.devkit import page_views
from eos_assets.devkit.events import Mix, Record
from eos_assets.devkit.producer import ProduceOptions, produce, read_manifest
from eos_assets.examples import declaration
from eos_assets.lib.errors import ConfigError
from eos_assets_tests.support import page_views_oracle as oracle

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
MIX = Mix(duplicate_ratio=0.07, malformed_ratio=0.03)
KINDS_PARSED = ("valid", "late", "duplicate")
_PYTHON_TYPES: dict[FieldType, type] = {FieldType.STRING: str, FieldType.LONG: int}


@pytest.fixture(scope="module")
def model() -> StreamModel:
    return read_declaration(declaration("page_views"))


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return page_views.generate(7, START, 5000, MIX, transaction_size=250)


def events_of(records: list[Record], kinds: tuple[str, ...] = ("valid",)) -> list[dict]:
    return [json.loads(r.value or b"") for r in records if r.kind in kinds]


def test_the_declaration_reads_and_its_kpis_bind(model: StreamModel) -> None:
    check_kpis(model, "page_views")
    assert (model.name, model.topics, model.event_id.field, model.event_time.field) == (
        "page_views",
        ["page_views"],
        "view_id",
        "ts",
    )
    assert model.entity is not None and model.entity.key == "session_id"
    assert model.serve == ["views_by_hour", "sessions", "views_by_page_hour"]


def test_the_same_seed_gives_the_same_records_and_another_seed_other_ids() -> None:
    one = page_views.generate(3, START, 600, MIX, transaction_size=50)
    assert one == page_views.generate(3, START, 600, MIX, transaction_size=50)
    other = page_views.generate(4, START, 600, MIX, transaction_size=50)
    assert one != other
    ids = {r.event_id for r in one} - {None}
    assert ids and ids.isdisjoint({r.event_id for r in other})


def test_duplicates_and_malformed_records_come_in_their_shares(records: list[Record]) -> None:
    kinds = Counter(r.kind for r in records)
    assert 0.05 <= kinds["duplicate"] / len(records) <= 0.09
    assert 0.015 <= kinds["malformed"] / len(records) <= 0.045
    assert kinds["valid"] + kinds["duplicate"] + kinds["malformed"] == len(records)
    assert {r.malformed for r in records} - {None} == set(page_views.CODES)
    for record in records:
        assert oracle.defect(record.value) == record.malformed, record


def test_duplicates_repeat_a_record_of_an_earlier_transaction(records: list[Record]) -> None:
    first: dict[str, int] = {}
    for index, record in enumerate(records):
        if record.kind == "valid":
            assert record.event_id not in first
            first[str(record.event_id)] = index
        elif record.kind == "duplicate":
            original = records[first[str(record.event_id)]]
            assert (original.key, original.value) == (record.key, record.value)
            assert first[str(record.event_id)] // 250 < index // 250  # an earlier transaction


def test_every_parsed_record_has_the_declared_fields_and_an_integral_ts(
    records: list[Record], model: StreamModel
) -> None:
    declared = {"view_id", "ts", "schema_version", *model.payload}
    for record in records:
        if record.kind not in KINDS_PARSED:
            continue
        event = json.loads(record.value or b"")
        assert set(event) <= declared
        assert isinstance(event["view_id"], str) and event["view_id"] == record.event_id
        assert type(event["ts"]) is int
        assert event["session_id"] == record.key
        for name, spec in model.payload.items():
            if spec.required:
                assert name in event, (name, event)
            if name in event:
                assert type(event[name]) is _PYTHON_TYPES[spec.type], (name, event)


def test_sessions_view_pages_in_time_and_durations_are_the_gaps(records: list[Record]) -> None:
    by_session: dict[str, list[dict]] = defaultdict(list)
    for event in events_of(records):
        by_session[event["session_id"]].append(event)
    lengths = Counter()
    for views in by_session.values():
        views.sort(key=lambda e: e["ts"])
        lengths[len(views)] += 1
        assert len(views) <= page_views.MAX_PAGES
        for one, two in itertools.pairwise(views):
            assert two["ts"] > one["ts"] and two["page"] != one["page"]
            assert one["duration_ms"] == two["ts"] - one["ts"]
        users = [e.get("user_id") for e in views]
        assert len(set(users) - {None}) <= 1  # one visitor, who may sign in on the way
        signed_in = next((i for i, u in enumerate(users) if u is not None), len(users))
        assert None not in users[signed_in:]
    assert lengths[1] > 0 and max(lengths) >= 5  # bounces and long sessions
    durations = [e.get("duration_ms") for e in events_of(records)]
    assert None in durations and sum(d is None for d in durations) < len(durations) / 4


def test_views_come_out_of_order_by_at_most_disorder(records: list[Record]) -> None:
    bound = page_views.DISORDER // timedelta(milliseconds=1)
    clock = behind = 0
    for event in events_of(records):
        assert event["ts"] >= clock - bound
        behind += event["ts"] < clock
        clock = max(clock, event["ts"])
    assert behind >= 50
    in_order = page_views.generate(7, START, 1000, MIX, disorder=timedelta(0))
    times = [e["ts"] for e in events_of(in_order)]
    assert times == sorted(times)


def test_late_views_lag_the_clock_by_late_by() -> None:
    late_by = timedelta(minutes=30)
    mix = Mix(late_ratio=0.1, late_by=late_by)
    records = page_views.generate(5, START, 1000, mix, transaction_size=100)
    clock, seen = 0, 0
    for record in records:
        event = json.loads(record.value or b"")
        if record.kind == "late":
            seen += 1
            assert clock - event["ts"] <= late_by // timedelta(milliseconds=1)
            assert clock - event["ts"] >= (late_by - timedelta(seconds=60)) // timedelta(
                milliseconds=1
            )
        else:
            clock = max(clock, event["ts"])
    assert seen >= 50


def test_aborted_views_never_come_back_and_committed_sessions_stay_whole() -> None:
    mix = dataclasses.replace(MIX, abort_ratio=0.3)
    kept: list[Record] = []
    aborted: set[str | None] = set()
    for plan in page_views.plan_transactions(9, START, 3000, 100, mix):
        if plan.abort:
            aborted |= {r.event_id for r in plan.records if r.kind == "valid"}
        else:
            kept.extend(plan.records)
    assert len(kept) < 3000 and aborted
    assert aborted.isdisjoint({r.event_id for r in kept if r.kind == "valid"})
    by_session: dict[str, list[dict]] = defaultdict(list)
    for event in events_of(kept):
        by_session[event["session_id"]].append(event)
    for views in by_session.values():
        views.sort(key=lambda e: e["ts"])
        for one, two in itertools.pairwise(views):
            assert one["duration_ms"] == two["ts"] - one["ts"]


def test_produce_options_pick_the_stream_and_keep_topics_apart() -> None:
    with pytest.raises(ConfigError, match="unknown stream 'clicks'"):
        ProduceOptions(stream="clicks").validate()
    with pytest.raises(ConfigError, match="topic 'orders' is the orders stream's"):
        ProduceOptions(stream="page_views").validate()
    with pytest.raises(ConfigError, match="topic 'page_views' is the page_views stream's"):
        ProduceOptions(topic="page_views").validate()
    ProduceOptions(stream="page_views", topic="page_views").validate()
    args = build_parser().parse_args(["produce", "--stream", "page_views"])
    assert (args.stream, args.topic) == ("page_views", None)
    assert build_parser().parse_args(["produce"]).stream == "orders"


def test_page_views_through_the_broker_are_what_the_manifest_says(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    read_committed: Callable[..., list],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = make_topic(partitions=3)
    manifest = tmp_path / "aborts.jsonl"
    options = ProduceOptions(
        stream="page_views",
        topic=topic,
        count=600,
        seed=21,
        start_time=START,
        transaction_size=50,
        duplicate_ratio=0.07,
        malformed_ratio=0.03,
        abort_ratio=0.3,
    )
    summary = produce(kafka_bootstrap, options, manifest)
    lines = read_manifest(manifest)
    assert summary.transactions_aborted >= 2 and summary.transactions_committed >= 2
    read = {(p, o): (k, v) for p, o, k, v in read_committed(topic)}
    keys = {(line["partition"], line["offset"]): line["key"].encode() for line in lines}
    assert read == {
        (partition, offset): (keys[(partition, offset)], value)
        for (_, partition, offset), value in oracle.committed(lines)
    }
    assert {line["malformed"] for line in lines} - {None} == set(page_views.CODES)
    assert {line["event_type"] for line in lines} == {None}
    for key, value in read.values():
        if oracle.defect(value) is None:
            assert json.loads(value)["session_id"] == key.decode()

    # Without aborts `eos-assets produce --stream page_views` sends exactly the generated list.
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", kafka_bootstrap)
    topic = make_topic(partitions=3)
    manifest = tmp_path / "whole.jsonl"
    argv = ["produce", "--stream", "page_views", "--topic", topic, "--count", "600"]
    argv += ["--seed", "21", "--start-time", START.isoformat(), "--transaction-size", "50"]
    argv += ["--duplicate-ratio", "0.07", "--malformed-ratio", "0.03", "--manifest", str(manifest)]
    assert main(argv) == 0
    from_broker = oracle.expected(oracle.committed(read_manifest(manifest)))
    mix = Mix(duplicate_ratio=0.07, malformed_ratio=0.03)
    generated = page_views.generate(21, START, 600, mix, transaction_size=50)
    from_list = oracle.expected(oracle.sent(generated))
    assert len(from_list.views) > 500 and len(from_list.sessions) > 100
    assert from_broker.views.keys() == from_list.views.keys()
    assert from_broker.sessions == from_list.sessions
    assert from_broker.windows == from_list.windows
    assert from_broker.kpi_sessions == from_list.kpi_sessions


def view(view_id: str, session: str, page: str, ts: float, **fields: Any) -> bytes:
    event = {"view_id": view_id, "session_id": session, "page": page, "ts": ts} | fields
    return json.dumps(event).encode()


MINUTE = 60_000
T0 = 1_795_255_200_000  # 2026-11-21T10:00:00Z, a window and hour boundary
TINY: list[bytes | None] = [
    view("v1", "s1", "/", T0, referrer="https://t.co/", duration_ms=30_000),
    view("v2", "s1", "/cart", T0 + MINUTE // 2, user_id="u1", duration_ms=4 * MINUTE),
    view("v1", "s1", "/", T0, referrer="https://t.co/", duration_ms=30_000),  # again
    view("v3", "s1", "/", T0 + 5 * MINUTE, user_id="u1"),  # next window, no duration
    view("v4", "s2", "/", T0 + MINUTE),  # a bounce without a duration
    view("v5", "s3", "/", T0 + 61 * MINUTE, duration_ms=1_000),  # the next hour
    view("v6", "s4", "/", float(T0 + 2 * MINUTE), duration_ms=2.0),  # 2.0 is integral
    b'{"view_id":"v7","session_id":"s1","pa',
    view("", "s1", "/", T0),
    view("v8", "s1", "/", T0 + 1).replace(str(T0 + 1).encode(), b'"2026-11-21T10:00:00Z"'),
    json.dumps({"view_id": "v9", "session_id": "s1", "ts": T0}).encode(),
    view("v10", "s5", "/", T0 + 0.5),  # half a millisecond
    None,
]


def at(minutes: float) -> datetime:
    return datetime(2026, 11, 21, 10, 0, tzinfo=UTC) + timedelta(minutes=minutes)


def test_the_oracle_on_a_tiny_list() -> None:
    assert [oracle.defect(v) for v in TINY[7:]] == [
        "invalid_json",
        "missing_event_id",
        "invalid_event_time",
        "invalid_page",
        "invalid_event_time",
        "null_value",
    ]
    out = oracle.expected([((i,), v) for i, v in enumerate(TINY)])
    assert list(out.views) == ["v1", "v2", "v3", "v4", "v5", "v6"]
    assert out.views["v1"].position == (0,)  # the first delivery wins
    assert out.sessions == {
        "s1": {
            "user_id": "u1",
            "pages": 3,
            "first_view": at(0),
            "last_view": at(5),
            "time_on_site_ms": 30_000 + 4 * MINUTE,
            "last_event_id": "v3",
        },
        "s2": {
            "user_id": None,
            "pages": 1,
            "first_view": at(1),
            "last_view": at(1),
            "time_on_site_ms": None,
            "last_event_id": "v4",
        },
        "s3": {
            "user_id": None,
            "pages": 1,
            "first_view": at(61),
            "last_view": at(61),
            "time_on_site_ms": 1_000,
            "last_event_id": "v5",
        },
        "s4": {
            "user_id": None,
            "pages": 1,
            "first_view": at(2),
            "last_view": at(2),
            "time_on_site_ms": 2,
            "last_event_id": "v6",
        },
    }
    assert out.windows == {
        (at(0), "/"): {"window_end": at(5), "views": 3, "sessions": 3, "time_ms": 30_002},
        (at(0), "/cart"): {"window_end": at(5), "views": 1, "sessions": 1, "time_ms": 4 * MINUTE},
        (at(5), "/"): {"window_end": at(10), "views": 1, "sessions": 1, "time_ms": 0},
        (at(60), "/"): {"window_end": at(65), "views": 1, "sessions": 1, "time_ms": 1_000},
    }
    assert out.kpi_sessions == {"sessions": 4, "pages_per_session": 1.5, "bounce_rate": 0.75}
    assert out.kpi_views_by_page_hour == {
        (at(0), "/"): {"views": 4, "sessions": 4},  # s1 in two windows counts twice
        (at(0), "/cart"): {"views": 1, "sessions": 1},
        (at(60), "/"): {"views": 1, "sessions": 1},
    }


def fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [column[0] for column in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.mark.parametrize("count", [0, 1500])
def test_the_declared_kpi_sql_computes_what_the_oracle_says(
    model: StreamModel, records: list[Record], count: int
) -> None:
    out = oracle.expected(oracle.sent(records[:count]))
    entity = pa.Table.from_pylist(
        [{"session_id": k, **v} for k, v in out.sessions.items()],
        schema=pa.schema(
            [
                ("session_id", pa.string()),
                ("user_id", pa.string()),
                ("pages", pa.int64()),
                ("first_view", pa.timestamp("us", "UTC")),
                ("last_view", pa.timestamp("us", "UTC")),
                ("time_on_site_ms", pa.int64()),
            ]
        ),
    )
    windows = pa.Table.from_pylist(
        [{"window_start": s, "page": p, **v} for (s, p), v in out.windows.items()],
        schema=pa.schema(
            [
                ("window_start", pa.timestamp("us", "UTC")),
                ("page", pa.string()),
                ("window_end", pa.timestamp("us", "UTC")),
                ("views", pa.int64()),
                ("sessions", pa.int64()),
                ("time_ms", pa.int64()),
            ]
        ),
    )
    with duckdb.connect(":memory:") as con:
        con.execute("SET TimeZone = 'Asia/Kolkata'")  # hours must not follow the zone
        con.register("entity_state", entity)
        con.register("window_aggregates", windows)
        rows = fetch(con, model.kpis["sessions"].sql or "")
        assert len(rows) == 1
        got, want = rows[0], out.kpi_sessions
        assert got["sessions"] == want["sessions"]
        for name in ("pages_per_session", "bounce_rate"):
            assert got[name] == (None if want[name] is None else pytest.approx(want[name]))
        hours = fetch(con, model.kpis["views_by_page_hour"].sql or "")
    assert {
        (row["hour"].astimezone(UTC), row["page"]): {
            "views": row["views"],
            "sessions": row["sessions"],
        }
        for row in hours
    } == out.kpi_views_by_page_hour
    if count:
        assert len(out.kpi_views_by_page_hour) > 5
