"""Vectorised parsing of event times into UTC microseconds, in each declared time format.

``iso8601`` (also every payload ``timestamp`` field) accepts
``YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM|±HH)``, with ``T`` and ``Z`` in either case
(RFC 3339 allows lower case). Seconds are required, so a date-only or minute-only value is
rejected; the fraction may have any number of digits and is truncated to microseconds; leap
seconds (``:60``) are rejected; the UTC result must lie in years 0001-9999, the range of Delta
and Spark timestamps. Anything else is invalid.

``epoch_millis`` accepts a JSON number of integral value (``1763719200000``, also written
``1.7637192e12``); ``epoch_seconds`` any JSON number, rounded to the microsecond (float64 holds
every microsecond within about 285 years of 1970, and coarser steps beyond). Both are read as
float64, which holds every millisecond of years 0001-9999 exactly, and must fall in that range.

The parse reads the raw bytes of the Arrow string array with numpy: a few milliseconds per
100k rows, and one code path for every record whichever way its JSON was parsed.
"""

import numpy as np
import pyarrow as pa

from eos_assets.lib.contract.stream_shape import EPOCH_MILLIS, EPOCH_SECONDS

UTC_MICROS = pa.timestamp("us", tz="UTC")

_PREFIX = 19  # len("YYYY-MM-DDTHH:MM:SS")
_DIGITS = (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18)
_SEPARATORS = ((4, b"-"), (7, b"-"), (10, b"Tt"), (13, b":"), (16, b":"))
# (length, distance of the hours from the end, distance of the minutes, has a colon); the sign
# sits at a different distance from the end in each form, so at most one form can match.
_ZONE_FORMS = ((6, 5, 2, True), (5, 4, 2, False), (3, 2, 0, False))
_FAST_DIGITS = 9  # fraction digits checked vectorised; longer fractions are checked per row
_MIN_MICROS = -62135596800 * 10**6  # 0001-01-01T00:00:00Z
_MAX_MICROS = 253402300800 * 10**6 - 1  # 9999-12-31T23:59:59.999999Z
_DAYS_IN_MONTH = np.array([0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_MICROS_PER = {EPOCH_MILLIS: 1000, EPOCH_SECONDS: 10**6}
_UNITS = {EPOCH_MILLIS: "epoch milliseconds", EPOCH_SECONDS: "epoch seconds"}
ISO_PROBLEM = "is not an ISO-8601 date-time with seconds and a zone"


def parse_event_times(times: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """Parse ISO-8601 date-times into ``timestamp[us, tz=UTC]``.

    Args:
        times: strings; nulls are allowed.

    Returns:
        The timestamps (null where invalid or null) and a boolean mask of the valid rows.
    """
    if isinstance(times, pa.ChunkedArray):
        times = times.combine_chunks() if times.num_chunks else pa.array([], pa.string())
    n = len(times)
    if n == 0:
        return pa.array([], UTC_MICROS), np.zeros(0, dtype=bool)
    offsets = np.frombuffer(times.buffers()[1], dtype=np.int32)[times.offset : times.offset + n + 1]
    buffer = times.buffers()[2]
    raw = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    # Padding keeps every fixed-position read in bounds; rows already invalid read junk harmlessly.
    data = np.concatenate([raw, np.zeros(_PREFIX + 8, dtype=np.uint8)])
    start, end = offsets[:-1].astype(np.int64), offsets[1:].astype(np.int64)
    ok = times.is_valid().to_numpy(zero_copy_only=False) & (end - start > _PREFIX)
    start, end = np.where(ok, start, 0), np.where(ok, end, _PREFIX + 1)

    for k in _DIGITS:
        ok &= _is_digit(data, start + k)
    for k, chars in _SEPARATORS:
        ok &= _is_one_of(data, start + k, chars)
    year = _number(data, start, 4)
    month, day, hour, minute, second = (_number(data, start + k, 2) for k in (5, 8, 11, 14, 17))

    zone_length, offset_minutes = _zone(data, start, end)
    micros = _fraction(data, start + _PREFIX, end - zone_length)
    ok &= (zone_length > 0) & (micros >= 0)

    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_ok = (month >= 1) & (month <= 12)
    month_days = _DAYS_IN_MONTH[np.where(month_ok, month, 0)] - ((month == 2) & ~leap)
    ok &= (year >= 1) & month_ok & (day >= 1) & (day <= month_days)
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)

    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    value = (seconds - offset_minutes * 60) * 10**6 + micros
    ok &= (value >= _MIN_MICROS) & (value <= _MAX_MICROS)
    return pa.array(np.where(ok, value, 0), pa.int64(), mask=~ok).cast(UTC_MICROS), ok


def _is_digit(data: np.ndarray, pos: np.ndarray) -> np.ndarray:
    return (data[pos] >= ord("0")) & (data[pos] <= ord("9"))


def _is_one_of(data: np.ndarray, pos: np.ndarray, chars: bytes) -> np.ndarray:
    found = data[pos]
    return np.logical_or.reduce([found == char for char in chars])


def _number(data: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The decimal number written with ``width`` digits at ``pos`` (digits checked elsewhere)."""
    value = np.zeros(len(pos), dtype=np.int64)
    for k in range(width):
        value = value * 10 + data[pos + k].astype(np.int64) - ord("0")
    return value


def _zone(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (zone length, UTC offset in minutes) per row; a zone length of 0 means invalid."""
    length = np.where((end - start > _PREFIX) & _is_one_of(data, end - 1, b"Zz"), 1, 0)
    offset = np.zeros(len(start), dtype=np.int64)
    for size, hours_at, minutes_at, colon in _ZONE_FORMS:
        fits = (end - start >= _PREFIX + size) & _is_one_of(data, end - size, b"+-")
        fits &= _is_digit(data, end - hours_at) & _is_digit(data, end - hours_at + 1)
        hours = _number(data, end - hours_at, 2)
        minutes = np.zeros_like(hours)
        if minutes_at:
            fits &= _is_digit(data, end - minutes_at) & _is_digit(data, end - minutes_at + 1)
            minutes = _number(data, end - minutes_at, 2)
        if colon:
            fits &= _is_one_of(data, end - 3, b":")
        fits &= (hours <= 23) & (minutes <= 59)
        sign = np.where(data[end - size] == ord("-"), -1, 1)
        offset = np.where(fits, sign * (hours * 60 + minutes), offset)
        length = np.where(fits, size, length)
    return length, offset


def _fraction(data: np.ndarray, first: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Microseconds of an optional ``.digits`` in ``[first, stop)``; -1 where malformed."""
    present = stop > first
    if not present.any():
        return np.zeros(len(first), dtype=np.int64)
    count = np.where(present, stop - first - 1, 0)  # digits after the dot
    valid = ~present | ((data[first] == ord(".")) & (count >= 1))
    micros = np.zeros(len(first), dtype=np.int64)
    for k in range(min(int(count.max()), _FAST_DIGITS)):
        has_digit = count > k
        valid &= ~has_digit | _is_digit(data, first + 1 + k)
        if k < 6:  # digits past microseconds are checked, then truncated
            micros += np.where(has_digit, data[first + 1 + k].astype(np.int64) - ord("0"), 0) * (
                10 ** (5 - k)
            )
    for i in np.flatnonzero(valid & (count > _FAST_DIGITS)):  # rare: check the rest one by one
        valid[i] = bytes(data[first[i] + 1 + _FAST_DIGITS : stop[i]]).isdigit()
    return np.where(valid, micros, -1)


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    y = year - (month <= 2)
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def parse_epoch_times(
    numbers: pa.Array | pa.ChunkedArray, time_format: str
) -> tuple[pa.Array, np.ndarray]:
    """Parse float64 epoch times (``epoch_millis`` or ``epoch_seconds``) into UTC microseconds.

    Returns:
        The timestamps (null where invalid or null) and a boolean mask of the valid rows.
    """
    per = _MICROS_PER[time_format]
    x = np.asarray(numbers.to_numpy(zero_copy_only=False), dtype=np.float64)  # nulls: NaN
    # Far out of range (years 0001-9999 are within 3e17 us): ruled out before any int64 overflow.
    ok = np.isfinite(x) & (np.abs(x) < 1e18 / per)
    safe = np.where(ok, x, 0.0)
    if time_format == EPOCH_MILLIS:
        ok &= np.floor(safe) == safe
        value = safe.astype(np.int64) * per
    else:
        value = np.rint(safe * per).astype(np.int64)
    ok &= (value >= _MIN_MICROS) & (value <= _MAX_MICROS)
    return pa.array(np.where(ok, value, 0), pa.int64(), mask=~ok).cast(UTC_MICROS), ok


def epoch_problem(number: float, time_format: str) -> str:
    """Why the epoch time ``number`` is invalid, after its field name (``1.5 is not ...``)."""
    unit = _UNITS[time_format]
    if not np.isfinite(number):
        return "is not a finite float64 number"
    text = str(int(number)) if number.is_integer() and abs(number) < 1e16 else repr(number)
    if time_format == EPOCH_MILLIS and not number.is_integer():
        return f"{text} is not an integral number of {unit}"
    return f"{text} is not a time in years 0001-9999 in {unit}"
