"""The order generator's integer clock gives the times a datetime clock would: the same
microseconds for every gap and the same text for every instant; its event ids are the text of
version-4 UUIDs."""

import random
import uuid
from datetime import UTC, datetime, timedelta

from eos_assets.devkit.events import _Orders, format_event_time, micros, uuid4_text


def test_a_gap_in_microseconds_is_the_one_timedelta_rounds_to() -> None:
    rng = random.Random(3)
    gaps = [rng.expovariate(10.0) for _ in range(20_000)]
    gaps += [rng.uniform(0, 5e4) for _ in range(2000)]
    # Half a microsecond left over (exactly, but for the last two): timedelta rounds to even.
    halves = [5e-7, 1.5e-6, 2.5e-6, 3.5e-6, 0.2500005, 2.0000025, 7.0000035]
    for seconds in gaps + halves + [0.0, 1.0, 86_399.999_999_5]:
        assert micros(seconds) == timedelta(seconds=seconds) // timedelta(microseconds=1), seconds


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
