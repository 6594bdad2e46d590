"""The bulk path: parse the slots of many Kafka values with ``pyarrow.json``.

Values that ``schema_screen`` lets through are joined, a chunk of about ``CHUNK_BYTES`` at a
time, and parsed in one call each. A call costs at least 0.1 ms and a failing call as much as
parsing up to the failure, so a chunk that fails is recovered without one call per bad line:
at its first failure, lines that look likely to fail (one regex pass) are set aside; later
failures split at the failing row; lines that parsed before a failure are parsed again together
in one call; a chunk without a failing row, or with more rows than lines, is halved. Whatever is
set aside, screened out, or in a piece too small to be worth a call takes the careful path,
which is the reference, so results do not depend on the path a record took.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import functools
import re
from collections.abc import Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from eos_assets.lib.contract.schema_careful import extract_careful
from eos_assets.lib.contract.schema_fields import layout
from eos_assets.lib.contract.schema_screen import bulk_candidates, likely_to_fail, suspect_lines
from eos_assets.lib.contract.stream_shape import Contract

CHUNK_BYTES = 4 << 20  # large enough to amortise a call, small enough to retry cheaply
MIN_BULK = 8  # fewer lines than this cost less on the careful path than in one more call
_NEIGHBOURHOOD = 32  # lines set aside at once when failures come too close together
_FAILED_ROW = re.compile(r"\bin row (\d+)")


@functools.lru_cache(maxsize=64)
def _parse_options(contract: Contract) -> pj.ParseOptions:
    """Read each slot's JSON key with its type: any other kind makes pyarrow.json raise."""
    slots = layout(contract).slots
    schema = pa.schema([(s.key, s.arrow) for s in slots])
    return pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")


def extract_fields(
    contract: Contract, values: Sequence[bytes | None], value_array: pa.Array | pa.ChunkedArray
) -> tuple[pa.Table, np.ndarray]:
    """Parse every value into a row of the contract's fields table (``schema_fields``).

    Args:
        contract: the stream's contract: which JSON keys to read, of which kinds.
        values: the raw Kafka values.
        value_array: the same values as an Arrow binary array.

    Returns:
        The rows in the order of ``values``, and the sorted indices that took the careful path.
    """
    values = values if isinstance(values, list) else list(values)
    lengths = pc.binary_length(value_array).fill_null(0).to_numpy(zero_copy_only=False)
    candidates = bulk_candidates(values, value_array, lengths)
    everyone = bool(candidates.all())
    tables: list[pa.Table] = []
    positions: list[np.ndarray] = []
    careful = [np.flatnonzero(~candidates)]
    for chunk in _chunks(np.flatnonzero(candidates), lengths):
        lines = values[chunk[0] : chunk[-1] + 1] if everyone else [values[i] for i in chunk]
        done, rejected = _parse_chunk(
            contract, cast("list[bytes]", lines)
        )  # candidates are not None
        careful.append(chunk[rejected])
        for picked, table in done:
            tables.append(table)
            positions.append(chunk[picked])
    careful_idx = np.sort(np.concatenate(careful)).astype(np.int64)
    if len(careful_idx):
        tables.append(extract_careful(contract, [values[i] for i in careful_idx]))
        positions.append(careful_idx)
    if not tables:
        return layout(contract).schema.empty_table(), careful_idx
    order = np.concatenate(positions)
    fields = pa.concat_tables([_as_fields(contract, t) for t in tables])
    if len(order) > 1 and not (np.diff(order) > 0).all():
        fields = fields.take(np.argsort(order, kind="stable"))
    return fields, careful_idx


def _chunks(indices: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    if not len(indices):
        return []
    chunk_of = (np.cumsum(lengths[indices] + 1) - 1) // CHUNK_BYTES
    return np.split(indices, np.flatnonzero(np.diff(chunk_of)) + 1)


def _parse_chunk(
    contract: Contract, lines: list[bytes]
) -> tuple[list[tuple[np.ndarray, pa.Table]], np.ndarray]:
    """Parse one chunk; return [(line positions, table)] and the positions left to be careful."""
    data = b"\n".join(lines)
    keep, rejected = np.arange(len(lines)), []
    suspect = suspect_lines(contract, data, lines)
    if suspect is not None:
        keep, rejected = np.flatnonzero(~suspect), [np.flatnonzero(suspect)]
        data = b"\n".join([lines[i] for i in keep])
    done: list[tuple[np.ndarray, pa.Table]] = []
    work, parsed_once, screened = [keep], [], False
    budget = len(keep) // _NEIGHBOURHOOD + 1  # failing calls allowed for close failures
    while work or parsed_once:
        if not work:
            # Lines that parsed before a failure: one call for all of them rather than one each.
            work, parsed_once = [np.concatenate(parsed_once)], []
        item = work.pop()
        if len(item) < MIN_BULK:
            rejected.append(item)
            continue
        chosen = data if item is keep else _join(lines, item)
        table, row = _try_read(_parse_options(contract), chosen, len(item))
        if table is not None and table.num_rows == len(item):
            done.append((item, table))
            continue
        if not screened:  # the chunk has bad lines: set the likely ones aside in one pass
            screened, likely = True, likely_to_fail(contract, lines, item)
            if row is not None:
                # Unless a flagged line explains the failure (a line with two documents before
                # it shifts the row numbers), the named line is the culprit.
                likely[row] |= not likely[: row + 1].any()
                parsed_once.append(item[:row][~likely[:row]])
            rejected.append(item[likely])
            work.append(item[row or 0 :][~likely[row or 0 :]])
            continue
        if row is not None:
            parsed_once.append(item[:row])
        if row is None:  # no failing row named, or a line with several documents
            work += np.array_split(item, 2)
        elif row >= _NEIGHBOURHOOD or budget > 0:
            budget -= row < _NEIGHBOURHOOD
            rejected.append(item[row : row + 1])
            work.append(item[row + 1 :])
        else:  # failures keep coming close together: be careful with the next lines at once
            rejected.append(item[row : row + _NEIGHBOURHOOD])
            work.append(item[row + _NEIGHBOURHOOD :])
    return done, np.concatenate(rejected) if rejected else keep[:0]


def _join(lines: list[bytes], item: np.ndarray) -> bytes:
    if item[-1] - item[0] + 1 == len(item):  # contiguous: slice rather than gather
        return b"\n".join(lines[item[0] : item[-1] + 1])
    return b"\n".join([lines[i] for i in item])


def _try_read(
    parse: pj.ParseOptions, data: bytes, lines: int
) -> tuple[pa.Table | None, int | None]:
    """Parse ``data``; return (table, None), or (None, the failing line when it is named)."""
    # One block per call, so a failing row number counts from the first line of ``data``.
    options = pj.ReadOptions(use_threads=False, block_size=len(data) + 1)
    try:
        return pj.read_json(pa.BufferReader(data), read_options=options, parse_options=parse), None
    except pa.ArrowException as exc:
        match = _FAILED_ROW.search(str(exc))
        row = int(match.group(1)) if match else None
        return None, row if row is not None and row < lines else None


def _as_fields(contract: Contract, table: pa.Table) -> pa.Table:
    """Give a table the columns of the fields table: a bulk one is named by JSON keys and has
    no JSON error and no wrong kinds."""
    schema = layout(contract).schema
    if table.schema.equals(schema):
        return table
    n = table.num_rows
    read = dict(zip(table.column_names, table.columns, strict=True))
    columns = {s.column: read[s.key] for s in layout(contract).slots if s.key in read}
    return pa.table(
        [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema],
        schema=schema,
    )
