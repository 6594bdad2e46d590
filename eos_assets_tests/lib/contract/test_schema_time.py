"""Event times in each declared format parsed to UTC microseconds, and what each rejects."""

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest

from eos_assets.lib.contract.schema_time import (
    UTC_MICROS,
    epoch_problem,
    parse_epoch_times,
    parse_event_times,
)
from eos_assets.lib.contract.stream_shape import EPOCH_MILLIS, EPOCH_SECONDS

NOON = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def iso(*texts: str | None) -> list[datetime | None]:
    parsed, ok = parse_event_times(pa.array(texts, pa.string()))
    assert parsed.type == UTC_MICROS
    assert ok.tolist() == [v is not None for v in parsed.to_pylist()]
    return parsed.to_pylist()


def test_iso8601_in_every_zone_form_and_case() -> None:
    texts = [
        "2026-11-21T12:00:00Z",
        "2026-11-21t12:00:00z",
        "2026-11-21T13:30:00+01:30",
        "2026-11-21T13:30:00+0130",
        "2026-11-21T07:00:00-05",
    ]
    assert iso(*texts) == [NOON] * 5


def test_iso8601_fractions_are_truncated_to_microseconds() -> None:
    assert iso("2026-11-21T12:00:00.5Z", "2026-11-21T12:00:00.1234567891234Z") == [
        NOON.replace(microsecond=500_000),
        NOON.replace(microsecond=123_456),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-21",  # no time
        "2026-11-21T12:00Z",  # no seconds
        "2026-11-21T12:00:00",  # no zone
        "2026-11-21 12:00:00Z",  # a space for the T
        "2026-11-21T12:00:60Z",  # leap second
        "2025-02-29T12:00:00Z",  # not a leap year
        "2026-11-21T12:00:00.Z",  # a dot without digits
        "2026-11-21T12:00:00.12345678901x3Z",  # a long fraction with a letter in it
        "2026-11-21T12:00:00+24:00",  # no such offset
        "0001-01-01T00:30:00+01:00",  # before year 0001 in UTC
        "0000-06-01T00:00:00Z",
    ],
)
def test_iso8601_rejects(text: str) -> None:
    assert iso(text) == [None]


def test_iso8601_nulls_slices_and_chunks() -> None:
    chunked = pa.chunked_array([["x", "2026-11-21T12:00:00Z"], [None, "2026-11-21T12:00:01Z"]])
    parsed, ok = parse_event_times(chunked)
    assert parsed.to_pylist() == [None, NOON, None, NOON.replace(second=1)]
    assert ok.tolist() == [False, True, False, True]
    sliced = pa.array(["junk", "2026-11-21T12:00:00Z"]).slice(1)  # an offset into the buffers
    assert parse_event_times(sliced)[0].to_pylist() == [NOON]
    empty, none_ok = parse_event_times(pa.chunked_array([], pa.string()))
    assert (len(empty), len(none_ok)) == (0, 0)


def epochs(numbers: list[float | None], time_format: str) -> list[datetime | None]:
    parsed, ok = parse_epoch_times(pa.array(numbers, pa.float64()), time_format)
    assert ok.dtype == np.bool_
    return parsed.to_pylist()


def test_epoch_millis_must_be_integral() -> None:
    millis = NOON.timestamp() * 1000
    assert epochs([millis, millis + 1.5, None, float("nan")], EPOCH_MILLIS) == [
        NOON,
        None,
        None,
        None,
    ]
    assert epochs([-62135596800000.0, -62135596800001.0], EPOCH_MILLIS) == [
        datetime(1, 1, 1, tzinfo=UTC),
        None,
    ]


def test_epoch_seconds_keep_microseconds_and_stay_in_years_0001_to_9999() -> None:
    seconds = NOON.timestamp()
    assert epochs([seconds + 0.25, seconds + 1e-7, 253402300800.0, 1e300], EPOCH_SECONDS) == [
        NOON.replace(microsecond=250_000),
        NOON,  # rounded to the microsecond
        None,  # 10000-01-01
        None,
    ]


def test_epoch_problems_say_why() -> None:
    assert epoch_problem(1.5, EPOCH_MILLIS) == "1.5 is not an integral number of epoch milliseconds"
    assert epoch_problem(1e20, EPOCH_MILLIS) == (
        "1e+20 is not a time in years 0001-9999 in epoch milliseconds"
    )
    assert epoch_problem(-1e15, EPOCH_SECONDS) == (
        "-1000000000000000 is not a time in years 0001-9999 in epoch seconds"
    )
    assert epoch_problem(float("inf"), EPOCH_SECONDS) == "is not a finite float64 number"
