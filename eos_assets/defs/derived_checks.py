"""Asset checks of a stream's silver events and windows: DuckDB over the Delta tables.

``event_id_unique`` is blocking: gold never computes from a silver table with a duplicated
event. The window reconciliation fails with severity ERROR but blocks nothing downstream.

Both are incremental (``defs/check_state``). ``event_id_unique`` reads the ids of the rows
added since the snapshot its latest passing evaluation proved and probes the proven ids with
them (no hash table of every id). The window reconciliation starts from the snapshots its latest
passing evaluation proved (gold's, and silver's at the version gold had consumed) and compares
only the windows that became final since and those whose gold or silver rows changed since
(gold's merges rewrite whole files: the rows of its removed files that come back unchanged in
its added ones are no change).
Each checks the whole table when there is nothing to start from, when a proven snapshot is gone
or is not the one proven, when silver lost a file, when the watermark went back or the window
size changed, and when run with ``full``.
"""

from collections.abc import Callable, Mapping, Sequence

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from eos_assets.defs.automation import check_with_asset
from eos_assets.defs.check_state import CheckConfig, last_checked, last_passed
from eos_assets.defs.checks import report_result
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.stream import Stream
from eos_assets.lib.checks.increment import (
    Checked,
    read_files,
    rows_changed,
    since,
    table_schema,
)
from eos_assets.lib.checks.reconcile import (
    Report,
    changed_windows,
    new_event_ids_unique,
    reconcile_windows,
    silver_columns,
    unique_event_ids,
)
from eos_assets.lib.delta import delta_io
from eos_assets.lib.derived import windows
from eos_assets.lib.derived.windows import at
from eos_assets.resources.lake import LakeResource

EVENT_ID_UNIQUE = "event_id_unique"
WINDOWS_RECONCILE = "final_windows_match_silver"
MAX_INTERVALS = 64  # window ranges named in one read predicate; beyond, one bounding range


def missing(what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, description=f"{what}: materialize it first")


def _table_check(
    stream: Stream,
    key: dg.AssetKey,
    name: str,
    description: str,
    evaluate: Callable[
        [DeltaTable, dg.AssetCheckExecutionContext, CheckConfig, LakeResource], dg.AssetCheckResult
    ],
    *,
    blocking: bool = False,
    op_tags: Mapping[str, str] | None = None,
) -> dg.AssetChecksDefinition:
    """A check of the Delta table of ``key`` that runs with its asset: ``evaluate`` gets the
    table's latest snapshot; a missing table is the failed result that says to materialize it
    first."""

    @check_with_asset(key, name, description, blocking=blocking, op_tags=op_tags)
    @stream.keyed
    def check(
        context: dg.AssetCheckExecutionContext, config: CheckConfig, lake: LakeResource
    ) -> dg.AssetCheckResult:
        uri = lake.table_uri(*key.path)
        try:
            dt = delta_io.load(uri, lake.storage_options)
        except TableNotFoundError:
            return missing(f"no Delta table at {uri}")
        return evaluate(dt, context, config, lake)

    return check


def derived_checks(stream: Stream) -> list[dg.AssetChecksDefinition]:
    """The checks of the stream's silver events and windows."""

    def event_id_unique(
        dt: DeltaTable,
        context: dg.AssetCheckExecutionContext,
        config: CheckConfig,
        lake: LakeResource,
    ) -> dg.AssetCheckResult:
        """Prove silver's insert-if-absent kept one row per event_id."""
        report = unique_ids(dt, last_checked(context, config), dict(lake.storage_options or {}))
        report.counts.update(Checked.of(dt).metadata())
        return report_result(report)

    def final_windows_match_silver(
        dt: DeltaTable,
        context: dg.AssetCheckExecutionContext,
        config: CheckConfig,
        lake: LakeResource,
    ) -> dg.AssetCheckResult:
        """Reconcile window aggregates with silver/events for final windows."""
        return windows_result(stream, dt, lake, last_passed(context, config))

    return [
        _table_check(
            stream,
            stream.events,
            EVENT_ID_UNIQUE,
            "Every event_id is present once in silver/events (and never null).",
            event_id_unique,
            blocking=True,
        ),
        _table_check(
            stream,
            stream.window_aggregates,
            WINDOWS_RECONCILE,
            "Final windows (end at or before the watermark) have the totals of the silver rows "
            "of the same window, silver read at the version the windows consumed.",
            final_windows_match_silver,
            op_tags=AFTER_SERVING,
        ),
    ]


SILVER = "silver_"  # prefix of the proven silver snapshot's metadata keys


def windows_result(
    stream: Stream, dt: DeltaTable, lake: LakeResource, previous: Mapping[str, object] | None
) -> dg.AssetCheckResult:
    """``final_windows_match_silver`` of the windows snapshot ``dt``, from the metadata of the
    latest passing evaluation (``previous``; None: every final window)."""
    state = delta_io.positions(dt, [windows.APP, windows.WATERMARK_APP])
    size_s = dt.transaction_version(windows.SIZE_APP)
    consumed = state[windows.APP]
    if consumed is None or size_s is None:
        uri = lake.table_uri(*stream.window_aggregates.path)
        return missing(f"{uri} has consumed no silver version yet")
    silver_uri = lake.table_uri(*stream.events.path)
    options = dict(lake.storage_options or {})
    silver = DeltaTable(silver_uri, version=consumed, storage_options=options)
    report = reconcile(stream, dt, silver, size_s, state[windows.WATERMARK_APP], previous, options)
    report.counts["silver_version"] = consumed
    report.counts.update(Checked.of(dt).metadata())
    report.counts.update(Checked.of(silver).metadata(SILVER))
    return report_result(report)


def unique_ids(
    dt: DeltaTable, checked: Checked | None, storage_options: Mapping[str, str]
) -> Report:
    """``event_id`` uniqueness in snapshot ``dt``: only the rows added since ``checked`` are
    looked at (against the proven ids) when no file was removed since."""
    schema = table_schema(dt)
    files = dt.file_uris()
    diff = since(dt.table_uri, dt, checked, storage_options)
    if diff is not None and not diff.removed:
        added = set(diff.added)
        report = new_event_ids_unique(
            read_files(diff.added, schema, ["event_id"]),
            read_files([f for f in files if f not in added], schema, ["event_id"]),
            diff.base,
        )
        if report.ok:
            return report
    # The whole table; read again to say where each duplicate came from.
    report = unique_event_ids(read_files(files, schema, ["event_id"]))
    if report.problem_count:
        located = [c for c in ("event_id", "topic", "partition", "offset") if c in schema.names]
        report = unique_event_ids(read_files(files, schema, located))
    return report


def reconcile(
    stream: Stream,
    gold: DeltaTable,
    silver: DeltaTable,
    size_s: int,
    watermark_us: int | None,
    previous: Mapping[str, object] | None,
    storage_options: Mapping[str, str],
) -> Report:
    """The window reconciliation of snapshots ``gold`` and ``silver`` (the version gold
    consumed): only the windows changed since ``previous`` (a passing evaluation's metadata),
    or every final window."""
    columns = silver_columns(stream.windows)
    numbers = _changed(gold, silver, size_s, watermark_us, previous, storage_options)
    if numbers is None:
        gold_rows = read_files(gold.file_uris(), table_schema(gold), table_schema(gold).names)
        silver_rows = read_files(silver.file_uris(), table_schema(silver), columns)
        report = reconcile_windows(stream.windows, gold_rows, silver_rows, size_s, watermark_us)
        report.counts["since_gold_version"] = None
        return report
    spans = _spans(numbers, size_s)
    gold_rows = read_files(
        _files(gold, "window_start", spans), table_schema(gold), table_schema(gold).names
    )
    silver_rows = read_files(_files(silver, "event_time", spans), table_schema(silver), columns)
    report = reconcile_windows(
        stream.windows, gold_rows, silver_rows, size_s, watermark_us, only=numbers
    )
    base = Checked.from_metadata(previous)
    report.counts["since_gold_version"] = base.version if base else None
    report.ok_text += (
        f" (the {len(numbers)} window(s) final and new or changed since gold version "
        f"{base.version if base else '?'}; the others were proven then)"
    )
    return report


def _changed(
    gold: DeltaTable,
    silver: DeltaTable,
    size_s: int,
    watermark_us: int | None,
    previous: Mapping[str, object] | None,
    storage_options: Mapping[str, str],
) -> list[int] | None:
    """The window numbers to compare after ``previous``, None for every final window."""
    if previous is None or watermark_us is None:
        return None
    before = previous.get("watermark_us")
    if not isinstance(before, int) or previous.get("window_size_s") != size_s:
        return None
    if before > watermark_us:
        return None
    gold_since = since(gold.table_uri, gold, Checked.from_metadata(previous), storage_options)
    silver_since = since(
        silver.table_uri, silver, Checked.from_metadata(previous, SILVER), storage_options
    )
    if gold_since is None or silver_since is None or silver_since.removed:
        return None
    schema = table_schema(gold)
    try:  # files removed from gold since may be gone (vacuum): then compare all
        added = read_files(gold_since.added, schema, schema.names)
        removed = read_files(gold_since.removed, schema, schema.names)
    except OSError:
        return None
    starts = rows_changed(added, removed)["window_start"]
    # A gold row counts as final by its own window_end, which a rewrite could have set off its
    # window: the rows that became final that way are compared too.
    bounds = read_files(gold.file_uris(), schema, ["window_start", "window_end"])
    ends = pc.cast(bounds["window_end"], pa.timestamp("us", tz="UTC")).cast(pa.int64())
    passed = pa.array([e is not None and before < e <= watermark_us for e in ends.to_pylist()])
    final_since = bounds.filter(passed)["window_start"]
    times = read_files(silver_since.added, table_schema(silver), ["event_time"])
    return changed_windows(size_s, before, watermark_us, starts, final_since, times["event_time"])


def _spans(numbers: Sequence[int], size_s: int) -> list[tuple[int, int]]:
    """The window numbers as ranges ``[start, end)`` of microseconds, at most MAX_INTERVALS."""
    size_us = size_s * 1_000_000
    spans: list[tuple[int, int]] = []
    for n in sorted(numbers):
        if spans and spans[-1][1] == n * size_us:
            spans[-1] = (spans[-1][0], (n + 1) * size_us)
        else:
            spans.append((n * size_us, (n + 1) * size_us))
    if len(spans) > MAX_INTERVALS:
        spans = [(spans[0][0], spans[-1][1])]
    return spans


def _files(dt: DeltaTable, column: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """The files of ``dt`` whose statistics let ``column`` fall in one of ``spans``."""
    if not spans:
        return []
    predicate = " OR ".join(
        f"({column} >= '{at(a).isoformat()}' AND {column} < '{at(b).isoformat()}')"
        for a, b in spans
    )
    return dt.file_uris(file_pruning_predicate=predicate)
