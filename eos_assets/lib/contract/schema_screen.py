"""Which Kafka values ``pyarrow.json`` may see, so that it reads them as the careful path does.

``pyarrow.json`` is fast but not a drop-in for the careful path; measured with pyarrow 26:
- a type surprise (``"size": "12.5"``, ``"event_id": 7``), a long written ``2.0`` or past
  int64, or a number beyond float64 raises for the whole block (naming the failing ``row``, bar
  the long's errors); nothing is coerced silently;
- it accepts ``NaN``, ``Inf``, ``Infinity`` anywhere, duplicated keys that are not in the
  schema, a leading UTF-8 BOM and any nesting depth, which the careful path rejects;
- it reads several JSON documents from one line (``{}{}``), joins lines when a document spans
  them (``{"a":`` + ``1}``), skips blank lines, and **crashes the interpreter** (SIGSEGV) when
  the first document of a block is ``null``.

So only values that start with ``{``, end with ``}``, are valid UTF-8 and contain none of
``\\n``, ``\\r``, ``NaN``, ``Inf`` (nor, when long, more than ``MAX_DEPTH`` brackets) go
through it. Such a line yields at least one row or an error and never runs into the next one
(after a ``}``, JSON cannot go on with ``{``), so a row count equal to the line count proves
that rows and records line up.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import functools
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos_assets.lib.contract.schema_careful import MAX_DEPTH
from eos_assets.lib.contract.schema_fields import layout
from eos_assets.lib.contract.stream_shape import Contract

_SUSPECT = (b"\n", b"\r", b"NaN", b"Inf")
# What may follow the key of a slot of each JSON kind without making pyarrow.json raise (null
# included); a long must also be written as an integer of at most 19 digits.
_FITS = {"string": '"n', "number": "-0-9n", "boolean": "tfn"}
# A number with a 3-digit exponent, a surrogate escape, two documents on one line.
_ANY_CONTRACT = r"[:,\[]\s*-?[0-9.]+[eE]\+?[0-9]{3}|\\u[dD][89a-fA-F]|\}\s*\{"


@functools.lru_cache(maxsize=64)
def likely_to_fail_pattern(contract: Contract) -> str:
    """The regex of a line likely to make pyarrow.json raise: a slot of the wrong kind, a long
    that is not a short integer, a number with a 3-digit exponent, a surrogate escape, two
    documents on one line (RE2 syntax, for ``pyarrow.compute``)."""
    slots = layout(contract).slots
    parts = []
    for kind, fits in _FITS.items():
        keys = [s.key for s in slots if s.kind == kind]
        if keys:
            parts.append(rf'"(?:{_alternatives(keys)})"\s*:\s*[^{fits}\s]')
    longs = [s.key for s in slots if s.long]
    if longs:
        parts.append(rf'"(?:{_alternatives(longs)})"\s*:\s*-?[0-9]+(?:[.eE]|[0-9]{{19}})')
    return "|".join([*parts, _ANY_CONTRACT])


@functools.lru_cache(maxsize=64)
def quoted_numbers(contract: Contract) -> tuple[bytes, ...]:
    """A string where compact JSON must have a number or boolean (``"size":"``)."""
    slots = layout(contract).slots
    return tuple(json_key(s.key) + b':"' for s in slots if s.kind != "string")


def json_key(key: str) -> bytes:
    """``key`` as compact JSON writes it (``"size"``)."""
    return json.dumps(key, ensure_ascii=False).encode()


def _alternatives(keys: list[str]) -> str:
    return "|".join(re.escape(k) for k in keys)


def bulk_candidates(
    values: list[bytes | None], value_array: pa.Array | pa.ChunkedArray, lengths: np.ndarray
) -> np.ndarray:
    """Mask the values that may go through ``pyarrow.json`` (braces, UTF-8, nesting depth)."""
    braces = pc.and_(pc.starts_with(value_array, "{"), pc.ends_with(value_array, "}"))
    mask = braces.fill_null(False).to_numpy(zero_copy_only=False).copy()
    try:
        value_array.cast(pa.string())
    except pa.ArrowInvalid:  # some value is not UTF-8: decode the ones with non-ASCII bytes
        for i in _non_ascii_rows(value_array):
            mask[i] &= _is_utf8(values[i])
    for i in np.flatnonzero(mask & (lengths > MAX_DEPTH)):  # only long values can nest deeply
        value = values[i] or b""
        mask[i] = value.count(b"{") + value.count(b"[") <= MAX_DEPTH
    return mask


def _non_ascii_rows(value_array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Indices of the values holding a byte >= 0x80: only those can be invalid UTF-8."""
    chunks = value_array.chunks if isinstance(value_array, pa.ChunkedArray) else [value_array]
    rows, base = [], 0
    for chunk in chunks:
        n = len(chunk)
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[
            chunk.offset : chunk.offset + n + 1
        ]
        data = chunk.buffers()[2]
        if data is not None and n:
            high = np.flatnonzero(np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] >= 0x80)
            rows.append(np.searchsorted(offsets, high + offsets[0], side="right") - 1 + base)
        base += n
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)


def _is_utf8(value: bytes | None) -> bool:
    try:
        (value or b"").decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _contains(data: bytes, pattern: bytes) -> bool:
    # Looking for the first byte is a memchr, ten times faster than a substring search.
    return pattern[:1] in data and pattern in data


def likely_to_fail(contract: Contract, lines: list[bytes], item: np.ndarray) -> np.ndarray:
    """Mask the lines that look as if they would make pyarrow.json raise (a guess, not a rule)."""
    subset = pa.array([lines[i] for i in item], pa.binary())
    likely = pc.match_substring_regex(subset, likely_to_fail_pattern(contract))
    return np.array(likely.to_numpy(zero_copy_only=False), dtype=bool)


def suspect_lines(contract: Contract, data: bytes, lines: list[bytes]) -> np.ndarray | None:
    """Mask the lines holding a newline, ``\\r``, ``NaN``, ``Inf`` or a string in a number or
    boolean slot (compact JSON: ``"size":"``); None when none does.

    A quoted number makes ``pyarrow.json`` raise for its whole chunk: setting such lines aside
    here spares the failing call and the retries after it.

    Args:
        contract: the stream's contract: which keys hold numbers and booleans.
        data: ``lines`` joined with newlines, searched first so that a clean chunk costs a few
            memchr passes rather than one check per line.
        lines: the values of one chunk.
    """
    newlines = np.count_nonzero(np.frombuffer(data, np.uint8) == ord("\n"))
    if newlines != len(lines) - 1 or any(_contains(data, p) for p in _SUSPECT[1:]):
        patterns = (*_SUSPECT, *quoted_numbers(contract))
        return np.array([any(_contains(line, p) for p in patterns) for line in lines], dtype=bool)
    hits = [at for p in quoted_numbers(contract) for at in _find_all(data, p)]
    if not hits:
        return None
    # No line holds a newline: line i starts where the lengths of the lines before it, each
    # with its separator, end.
    lengths = np.fromiter(map(len, lines), np.int64, len(lines))
    starts = np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])
    mask = np.zeros(len(lines), dtype=bool)
    mask[np.searchsorted(starts, hits, side="right") - 1] = True
    return mask


def _find_all(data: bytes, pattern: bytes) -> list[int]:
    found, at = [], data.find(pattern)
    while at >= 0:
        found.append(at)
        at = data.find(pattern, at + 1)
    return found
