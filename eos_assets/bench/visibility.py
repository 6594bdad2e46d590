"""When did each event's effect become visible in DuckDB?

A poller copies the DuckDB serving file once a second (a reader holding the file would make
the serving asset's write connection fail, so the bench never opens the live file) and
records, whenever ``eos_delta_versions`` changes, the wall time, the version DuckDB mirrors
of the watched KPI table (``Watched``: orders' ``kpi_window``, page_views' ``views_by_hour``)
and the event total of its rows. Afterwards each mirrored version is followed down the lineage
the tables record in their ``txn`` actions:
the KPI table -> the silver/events version it consumed -> the bronze version silver consumed ->
the Kafka position of every partition in that bronze version. An event (partition, offset) is
visible from the first observation whose position of its partition is past its offset; its
latency is that time minus its Kafka timestamp (set by the producer when it was sent).
"""

import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
from deltalake import DeltaTable

from eos_assets.lib.delta import delta_io
from eos_assets.lib.delta.txn_ids import FROM_BRONZE, FROM_SILVER, partition_app


@dataclass(frozen=True)
class Watched:
    """The served KPI table a freshness stream watches, and the events each row counts."""

    stream: str
    kpi: str
    events: str  # an SQL expression over a row: the events it counts

    @property
    def total_sql(self) -> str:
        """DuckDB's mirrored version of the table, and its event total."""
        name = f"{self.stream}.{self.kpi}"
        return (
            f"SELECT (SELECT delta_version FROM eos_delta_versions WHERE table_name = '{name}'), "
            f"(SELECT coalesce(sum({self.events}), 0) FROM {name})"
        )

    def path(self, lake_root: Path, layer: str, table: str) -> str:
        """Where one of the stream's tables lives."""
        return str(lake_root / self.stream / layer / table)


ORDERS = Watched(
    "orders", "kpi_window", "orders_created + orders_paid + orders_cancelled + orders_refunded"
)
PAGE_VIEWS = Watched("page_views", "views_by_hour", "views")
WATCHED = {w.stream: w for w in (ORDERS, PAGE_VIEWS)}


@dataclass(frozen=True)
class Observation:
    """DuckDB at one moment: the watched table's version it mirrors and its event total."""

    at: float
    version: int
    events: int


@dataclass
class Poller:
    """Polls a copy of the DuckDB file every ``interval`` seconds in a thread."""

    warehouse: Path
    watched: Watched = ORDERS
    interval: float = 0.25
    seen: list[Observation] = field(default_factory=list)
    polls: int = 0
    unreadable: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._scratch = Path(tempfile.mkdtemp(prefix="eos-bench-poll-"))
        self._stamp: tuple[float, int] | None = None

    def start(self) -> None:
        """Start polling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling and remove the copies."""
        self._stop.set()
        self._thread.join()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def latest(self) -> Observation | None:
        """The last change seen."""
        return self.seen[-1] if self.seen else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.time()
            self.poll(began)
            self._stop.wait(max(0.0, self.interval - (time.time() - began)))

    def poll(self, now: float) -> None:
        """Read the current state once (skipped when the file did not change)."""
        self.polls += 1
        try:
            info = self.warehouse.stat()
        except FileNotFoundError:
            return
        wal = self.warehouse.with_name(self.warehouse.name + ".wal")
        stamp = (info.st_mtime, info.st_size + (wal.stat().st_size if wal.exists() else 0))
        if stamp == self._stamp:
            return
        copy = self._scratch / "copy.duckdb"
        try:
            shutil.copyfile(self.warehouse, copy)
            if wal.exists():
                shutil.copyfile(wal, copy.with_name("copy.duckdb.wal"))
            with duckdb.connect(str(copy), read_only=True) as conn:
                row = conn.execute(self.watched.total_sql).fetchone()
        except (OSError, duckdb.Error):
            self.unreadable += 1  # caught mid-write: the next poll reads it
            return
        finally:
            for f in self._scratch.iterdir():
                f.unlink(missing_ok=True)
        self._stamp = stamp
        if row is None or row[0] is None:
            return
        last = self.latest()
        if last is None or last.version != row[0]:
            self.seen.append(Observation(now, int(row[0]), int(row[1])))


def positions_behind(
    lake_root: Path, kpi_version: int, topic: str, partitions: int, watched: Watched = ORDERS
) -> list[int]:
    """Next Kafka offset per partition reflected by the watched KPI table at ``kpi_version``."""
    kpi = DeltaTable(watched.path(lake_root, "gold", watched.kpi), version=kpi_version)
    s = kpi.transaction_version(FROM_SILVER)
    if s is None:
        return [0] * partitions
    events = DeltaTable(watched.path(lake_root, "silver", "events"), version=s)
    b = events.transaction_version(FROM_BRONZE)
    if b is None:
        return [0] * partitions
    bronze = DeltaTable(watched.path(lake_root, "bronze", "raw_events"), version=b)
    return [bronze.transaction_version(partition_app(topic, p)) or 0 for p in range(partitions)]


@dataclass
class Latencies:
    """Event-to-DuckDB latencies of every event in bronze, and the checks behind them."""

    seconds: np.ndarray
    never_visible: int
    total_mismatches: int
    observations: int


def latencies(
    seen: list[Observation],
    lake_root: Path,
    topic: str,
    partitions: int,
    watched: Watched = ORDERS,
) -> Latencies:
    """Latency of every bronze record (seconds), from the observations and the lineage."""
    bronze = delta_io.read_arrow(
        watched.path(lake_root, "bronze", "raw_events"),
        columns=["partition", "offset", "kafka_timestamp", "error"],
    )
    part = bronze.column("partition").to_numpy()
    offset = bronze.column("offset").to_numpy()
    sent = bronze.column("kafka_timestamp").cast("int64").to_numpy() / 1e6
    valid = bronze.column("error").is_null().to_numpy(zero_copy_only=False)
    marks = np.array(
        [positions_behind(lake_root, o.version, topic, partitions, watched) for o in seen]
    )
    times = np.array([o.at for o in seen])
    out = np.full(len(offset), np.nan)
    mismatches = 0
    for p in range(partitions):
        rows = part == p
        if not len(seen):
            break
        # Positions only grow with time, so the first observation past an offset is a search.
        first = np.searchsorted(marks[:, p], offset[rows], side="right")
        seen_at = np.where(first < len(seen), times[np.minimum(first, len(seen) - 1)], np.nan)
        out[rows] = seen_at - sent[rows]
    for i, o in enumerate(seen):
        counted = int(sum(np.count_nonzero(valid & (part == p) & (offset < marks[i, p]))
                          for p in range(partitions)))  # fmt: skip
        mismatches += counted != o.events
    never = int(np.count_nonzero(np.isnan(out)))
    return Latencies(out[~np.isnan(out)], never, mismatches, len(seen))
