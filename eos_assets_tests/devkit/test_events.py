"""The order generator's integer clock gives the text a datetime clock would for every instant;
its event ids are the text of version-4 UUIDs, and a valid record's value is the JSON of the
fields the manifest names it by."""

import json
import random
import uuid
from datetime import UTC, datetime, timedelta

from eos_assets.devkit.events import (
    _CENTS,
    CURRENCIES,
    Mix,
    _Orders,
    format_event_time,
    plan_transactions,
    uuid4_text,
)


def test_a_stamp_is_the_contracts_text_of_its_instant() -> None:
    orders = _Orders(random.Random(1), datetime(2026, 11, 21, 23, 59, 59, 999_500, tzinfo=UTC))
    rng = random.Random(2)
    start = orders.us
    for us in [*sorted(start + rng.randrange(-(10**9), 10**10) for _ in range(5000)), start]:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
        assert orders.stamp(us) == format_event_time(moment)
    assert orders.now == datetime(2026, 11, 21, 23, 59, 59, 999_500, tzinfo=UTC)


def test_an_event_id_is_the_text_of_the_version_4_uuid_of_its_bits() -> None:
    rng = random.Random(4)
    edges = [0, (1 << 128) - 1, 0xF << 76, 0xC << 60]
    for bits in [rng.getrandbits(128) for _ in range(20_000)] + edges:
        assert uuid4_text(bits) == str(uuid.UUID(int=bits, version=4)), hex(bits)


def test_a_valid_records_value_is_the_json_of_its_order_and_event() -> None:
    start = datetime(2026, 11, 21, 23, 59, 58, tzinfo=UTC)
    mix = Mix(duplicate_ratio=0.05, late_ratio=0.05, late_by=timedelta(minutes=30))
    records = [r for plan in plan_transactions(5, start, 20_000, 1000, mix) for r in plan.records]
    times = []
    for record in records:
        payload = json.loads(record.value or b"")
        assert payload["event_id"] == record.event_id == str(uuid.UUID(record.event_id))
        assert uuid.UUID(record.event_id).version == 4
        assert (payload["event_type"], payload["order_id"]) == (record.event_type, record.key)
        assert payload["customer_id"].startswith("c-") and payload["currency"] in CURRENCIES
        assert (
            5.0 <= payload["amount"] <= 500.0 and round(payload["amount"], 2) == payload["amount"]
        )
        moment = datetime.fromisoformat(payload["event_time"])
        assert format_event_time(moment) == payload["event_time"]
        times.append(moment + (mix.late_by if record.kind == "late" else timedelta()))
    assert {r.kind for r in records} == {"valid", "duplicate", "late"}
    valid_times = [t for t, r in zip(times, records, strict=True) if r.kind != "duplicate"]
    assert valid_times == sorted(valid_times) and valid_times[0] >= start


def test_an_amounts_text_is_the_repr_of_its_float() -> None:
    for total in range(500, 50_001):  # every amount an order can have, in cents
        whole, cents = divmod(total, 100)
        assert f"{whole}{_CENTS[cents]}" == repr(total / 100), total
