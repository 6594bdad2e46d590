"""The demo producer against the real broker: its manifest is the truth a reader must see."""

import base64
import itertools
import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from eos_assets.devkit import producer
from eos_assets.devkit.deliveries import Deliveries, ReportsUnclear
from eos_assets.devkit.events import CODES, EVENT_TYPES
from eos_assets.devkit.producer import (
    ProduceOptions,
    ProduceSummary,
    produce,
    read_manifest,
    summary_path,
)
from eos_assets.lib.contract.contract import Malformed
from eos_assets.lib.errors import BrokerError, ConfigError

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
LATE_BY = timedelta(minutes=30)
Line = dict[str, Any]


def run(bootstrap: str, folder: Path, **options: Any) -> tuple[ProduceSummary, list[Line]]:
    """Produce with ``options`` and return the summary and the manifest lines."""
    manifest = folder / f"{options['topic']}.jsonl"
    summary = produce(bootstrap, ProduceOptions(start_time=START, **options), manifest)
    return summary, read_manifest(manifest)


def value(line: Line) -> bytes | None:
    return None if line["value_b64"] is None else base64.b64decode(line["value_b64"])


def classify(raw: bytes | None) -> str | None:
    """The contract's malformed rules, written independently of the producer."""
    if raw is None:
        return Malformed.NULL_VALUE
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Malformed.INVALID_UTF8
    try:
        event = json.loads(text)
    except ValueError:
        return Malformed.INVALID_JSON
    if not isinstance(event, dict):
        return Malformed.NOT_AN_OBJECT
    if not event.get("event_id"):
        return Malformed.MISSING_EVENT_ID
    try:
        datetime.fromisoformat(event["event_time"])
    except (KeyError, TypeError, ValueError):
        return Malformed.INVALID_EVENT_TIME
    if event.get("event_type") not in EVENT_TYPES:
        return "unknown_event_type"
    amount = event.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return "invalid_amount"
    return None


@pytest.fixture(scope="module")
def mixed(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ProduceSummary, list[Line]]:
    """One run with every kind of record and aborted transactions, shared by several tests."""
    topic = f"mixed-{uuid.uuid4().hex[:8]}"
    return run(
        kafka_bootstrap,
        tmp_path_factory.mktemp("manifests"),
        topic=topic,
        count=800,
        partitions=3,
        seed=11,
        transaction_size=50,
        abort_ratio=0.3,
        duplicate_ratio=0.05,
        late_ratio=0.05,
        late_by=LATE_BY,
        malformed_ratio=0.1,
    )


def test_manifest_matches_what_a_read_committed_consumer_reads(
    mixed: tuple[ProduceSummary, list[Line]], read_committed: Callable[..., list]
) -> None:
    summary, lines = mixed
    assert summary.transactions_aborted >= 2 and summary.transactions_committed >= 2
    read = {(p, o): (k, v) for p, o, k, v in read_committed(summary.topic)}
    committed = {
        (line["partition"], line["offset"]): (line["key"].encode(), value(line))
        for line in lines
        if line["status"] == "committed"
    }
    aborted = {(line["partition"], line["offset"]) for line in lines if line["status"] == "aborted"}
    assert read == committed
    assert aborted and aborted.isdisjoint(read)
    assert (summary.records, summary.committed, summary.aborted) == (
        800,
        len(committed),
        len(aborted),
    )
    kinds = Counter((line["status"], line["kind"]) for line in lines)
    assert {(s, k): n for s, by_kind in summary.counts.items() for k, n in by_kind.items()} == kinds
    assert summary.committed_by_partition == Counter(p for p, _ in committed)
    on_disk = json.loads(summary_path(Path(summary.manifest)).read_text())
    assert on_disk == json.loads(json.dumps(asdict(summary)))


def test_duplicates_repeat_an_event_committed_in_an_earlier_transaction(
    mixed: tuple[ProduceSummary, list[Line]],
) -> None:
    _, lines = mixed
    first: dict[str, Line] = {}
    for line in lines:
        if line["status"] == "committed" and line["kind"] in ("valid", "late"):
            assert line["event_id"] not in first  # originals are unique
            first[line["event_id"]] = line
    duplicates = [line for line in lines if line["kind"] == "duplicate"]
    assert len(duplicates) >= 10
    for dup in duplicates:
        original = first[dup["event_id"]]
        assert original["txn"] < dup["txn"]
        assert (original["key"], original["value_b64"]) == (dup["key"], dup["value_b64"])
    # Aborted events are never committed later: a reader that sees one has read uncommitted.
    aborted_ids = {
        line["event_id"] for line in lines if line["status"] == "aborted" and line["event_id"]
    }
    aborted_originals = aborted_ids - {d["event_id"] for d in duplicates}
    assert aborted_originals and aborted_originals.isdisjoint(first)


def test_malformed_records_carry_their_code_and_valid_ones_none(
    mixed: tuple[ProduceSummary, list[Line]],
) -> None:
    summary, lines = mixed
    for line in lines:
        assert classify(value(line)) == line["malformed"], line
        assert (line["kind"] == "malformed") == (line["malformed"] is not None)
    committed_codes = Counter(
        line["malformed"] for line in lines if line["status"] == "committed" and line["malformed"]
    )
    assert set(committed_codes) == {str(code) for code in CODES}
    assert summary.committed_malformed == committed_codes


def test_events_follow_an_order_lifecycle_and_late_ones_lag_by_late_by(
    mixed: tuple[ProduceSummary, list[Line]],
) -> None:
    _, lines = mixed
    history: dict[str, list[str]] = {}
    clock = START
    late_seen = 0
    for line in lines:
        if line["kind"] not in ("valid", "late"):
            continue
        event = json.loads(value(line) or b"")
        assert event["order_id"] == line["key"] and event["schema_version"] == 1
        assert event["amount"] > 0 and event["currency"] in ("EUR", "USD", "GBP", "CHF")
        at = datetime.fromisoformat(event["event_time"])
        if line["kind"] == "valid":
            assert at >= clock  # event time only moves forward
            clock = at
        else:
            late_seen += 1
            assert LATE_BY - timedelta(seconds=60) <= clock - at <= LATE_BY
        if line["status"] == "committed":
            history.setdefault(event["order_id"], []).append(event["event_type"])
    assert late_seen >= 10
    allowed = {
        ("order_created",),
        ("order_created", "order_paid"),
        ("order_created", "order_cancelled"),
        ("order_created", "order_paid", "order_refunded"),
    }
    # An order created before this run's window may be seen mid-life; none starts oddly inside.
    started_here = [steps for steps in history.values() if steps[0] == "order_created"]
    assert len(started_here) == len(history)
    assert {tuple(steps) for steps in started_here} <= allowed
    assert {tuple(steps) for steps in started_here} == allowed  # every path occurs


def test_same_seed_gives_the_same_records(
    kafka_bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    options = {"count": 240, "seed": 5, "transaction_size": 40, "abort_ratio": 0.3}
    options |= {"duplicate_ratio": 0.1, "malformed_ratio": 0.1, "late_ratio": 0.1}
    first, one = run(kafka_bootstrap, tmp_path, topic=make_topic(partitions=3), **options)
    _, two = run(kafka_bootstrap, tmp_path, topic=make_topic(partitions=3), **options)
    _, other = run(
        kafka_bootstrap, tmp_path, topic=make_topic(partitions=3), **options | {"seed": 6}
    )
    fields = ("status", "partition", "offset", "txn", "key", "value_b64", "kind", "malformed")
    assert [[line[f] for f in fields] for line in one] == [
        [line[f] for f in fields] for line in two
    ]
    assert first.transactions_aborted >= 1
    assert {line["event_id"] for line in one} & {line["event_id"] for line in other} <= {None}


def test_one_transactional_id_across_aborts_and_mid_partition_readers_see_all(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    read_committed: Callable[..., list],
    tmp_path: Path,
) -> None:
    options = {"count": 480, "seed": 3, "transaction_size": 40, "abort_ratio": 0.4}
    topic = make_topic(partitions=2)
    summary, lines = run(kafka_bootstrap, tmp_path, topic=topic, **options)
    txns = [
        (status, list(group))
        for (_, status), group in itertools.groupby(
            lines, key=lambda line: (line["txn"], line["status"])
        )
    ]
    assert len(txns) == 12
    assert {line["transactional_id"] for line in lines} == {f"eos-producer-{topic}"}
    assert summary.transactional_id == f"eos-producer-{topic}"

    checked = 0
    for (prev_status, prev), (status, after) in itertools.pairwise(txns):
        if prev_status != "aborted" or status != "committed":
            continue
        for partition in (0, 1):
            expected = {line["offset"] for line in after if line["partition"] == partition}
            first = min(expected)
            # The fetch starts after the aborted transaction's records and its marker, under
            # the same producer id: every later committed record must still be returned.
            assert any(line["partition"] == partition for line in prev) and first > 0
            got = {o for p, o, _, _ in read_committed(summary.topic, {partition: first})}
            assert expected <= got
            checked += 1
    assert checked >= 4


def test_a_rejected_delivery_raises_one_line_and_writes_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"tiny-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, config={"max.message.bytes": "100"})])[topic].result()
    with pytest.raises(BrokerError, match="Message size too large") as caught:
        run(kafka_bootstrap, tmp_path, topic=topic, count=20, seed=1)
    message = str(caught.value)
    del caught  # its traceback holds the failed producer: let it go while the broker runs
    assert "\n" not in message
    assert read_manifest(tmp_path / f"{topic}.jsonl") == []


class _FirstAttemptUnclear(Deliveries):
    """Reports of transaction 1 that cannot be told apart on its first attempt, as when a
    retry is reported delivered without an offset (a batch the new leader already held)."""

    def offsets(self) -> list[tuple[int, int]]:
        if self.plan.index == 1 and not getattr(self, "refused", False):
            self.refused = True
            raise ReportsUnclear(self.topic, self.plan.index, "a report without an offset")
        return super().offsets()


def test_reports_that_cannot_be_told_apart_abort_the_transaction_and_send_it_again(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
    read_committed: Callable[..., list],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producer, "Deliveries", _FirstAttemptUnclear)
    topic = make_topic(partitions=2)
    summary, lines = run(
        kafka_bootstrap, tmp_path, topic=topic, count=90, seed=3, transaction_size=30
    )
    assert summary.transactions_sent_again == 1
    assert {(p, o) for p, o, _, _ in read_committed(topic)} == {
        (line["partition"], line["offset"]) for line in lines
    }
    # Between transaction 0's records and those of transaction 1's second attempt, each
    # partition holds transaction 0's commit marker, the first attempt's records there and
    # their abort marker: 30 records and 2 markers per partition in all.
    gap = 0
    for partition in (0, 1):
        last = max(ln["offset"] for ln in lines if ln["txn"] == 0 and ln["partition"] == partition)
        first = min(ln["offset"] for ln in lines if ln["txn"] == 1 and ln["partition"] == partition)
        gap += first - last - 1
    assert gap == 30 + 2 * 2


def test_rate_paces_the_run(kafka_bootstrap: str, make_topic: Callable[..., str], tmp_path: Path):
    summary, _ = run(kafka_bootstrap, tmp_path, topic=make_topic(), count=40, rate=100, seed=1)
    assert summary.seconds >= 0.39  # 40 records at 100/s cannot finish sooner


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"abort_ratio": 1.5}, "abort_ratio must be between 0 and 1"),
        ({"late_ratio": 0.6, "malformed_ratio": 0.6}, "add up to more than 1"),
        ({"transaction_size": 0}, "transaction size >= 1"),
    ],
)
def test_invalid_options_are_refused_before_any_network(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        produce("127.0.0.1:1", ProduceOptions(**options), Path("unused.jsonl"))


def test_a_random_partitioner_is_refused_before_any_network() -> None:
    # Records are told apart by key in their delivery reports: a key must stay on one partition.
    with pytest.raises(ConfigError, match="partitioner that sends each key to one partition"):
        produce("127.0.0.1:1", ProduceOptions(), Path("unused.jsonl"), {"partitioner": "random"})
