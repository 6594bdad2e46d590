"""Write a DataFrame as Parquet files of a Delta table from Spark tasks (not committed).

Each task receives Arrow batches (``mapInArrow``), writes one file per group of rows (one
partition value and one time bucket, so file statistics stay tight) inside the table folder
and returns the file's path, size and Delta statistics. The driver turns them into add actions
and commits them with delta-rs, as Delta's own Spark writer does; a file whose commit never
happens is an orphan that no reader sees (vacuum removes it). Runs on executors: the task
function takes and returns only plain, picklable values.
"""

# pyright: reportAttributeAccessIssue=false
# (pyarrow.compute creates its kernels at import time, so pyright cannot see them.)

import functools
import itertools
import uuid
from collections.abc import Iterator
from datetime import date, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyspark.sql import DataFrame

from eos_assets.lib import store_errors
from eos_assets.lib.delta.delta_io import add_action, as_uri, data_schema
from eos_assets.lib.delta.delta_stats import file_stats

_FILE_SCHEMA = "path string, size long, stats string, part string, records long"


def write_files(
    frame: DataFrame,
    table_uri: str,
    schema: pa.Schema,
    partition_by: str | None,
    split_by: str | None = None,
    sort_by: str | None = None,
    one_task: bool = False,
) -> list[AddAction]:
    """Write ``frame`` as Parquet files inside the table folder from Spark tasks.

    Rows are grouped so that each file holds one value of ``partition_by`` and of ``split_by``
    (a coarse time bucket keeping file statistics tight), sorted by ``sort_by``. Nothing is
    visible until the returned add actions are committed; an uncommitted file is an orphan
    that no reader sees (vacuum removes it). With ``one_task`` (few rows) one task writes
    every group, and the rows cross no shuffle.
    """
    keys = [c for c in (partition_by, split_by) if c is not None]
    if one_task:
        frame = frame.coalesce(1)
    elif keys:
        # Hash partitioning puts each group in one task, which writes one file per group.
        frame = frame.repartition(*keys)
    task = functools.partial(
        _write_task,
        table_uri=table_uri,
        schema=schema,
        partition_by=partition_by,
        keys=keys,
        sort_by=sort_by,
    )
    written = frame.mapInArrow(task, _FILE_SCHEMA).collect()
    return [
        add_action(
            row["path"],
            row["size"],
            row["stats"],
            {partition_by: row["part"]} if partition_by is not None else None,
        )
        for row in written
    ]


def _write_task(
    batches: Iterator[pa.RecordBatch],
    table_uri: str,
    schema: pa.Schema,
    partition_by: str | None,
    keys: list[str],
    sort_by: str | None,
) -> Iterator[pa.RecordBatch]:
    """One Spark task: write its rows as one file per group; yield what it wrote."""
    received = list(batches)
    if not received:
        return
    data = pa.Table.from_batches(received)
    if data.num_rows == 0:
        return
    stored = data_schema(schema, [partition_by] if partition_by else [])
    fs, root = pafs.FileSystem.from_uri(as_uri(table_uri))
    root = root.rstrip("/")
    # Sorted by the group keys (nulls last), each group is one slice of the task's rows.
    order = [*keys, *([sort_by] if sort_by else [])]
    if order:
        data = data.sort_by([(c, "ascending") for c in order])
    for rows in _slices(data, keys):
        group = {k: rows.column(k)[0].as_py() for k in keys}
        table = rows.select(stored.names).cast(stored)
        part = _partition_text(group[partition_by]) if partition_by else None
        folder = f"{partition_by}={part}/" if partition_by else ""
        path = f"{folder}part-{uuid.uuid4().hex}.snappy.parquet"
        with store_errors.task_errors(table_uri):
            fs.create_dir(f"{root}/{folder}".rstrip("/"), recursive=True)
            pq.write_table(table, f"{root}/{path}", filesystem=fs, compression="snappy")
            size = fs.get_file_info(f"{root}/{path}").size or 0
        yield pa.record_batch(
            {
                "path": pa.array([path]),
                "size": pa.array([size], pa.int64()),
                "stats": pa.array([file_stats(table)]),
                "part": pa.array([part], pa.string()),
                "records": pa.array([table.num_rows], pa.int64()),
            }
        )


def _slices(data: pa.Table, keys: list[str]) -> Iterator[pa.Table]:
    """The runs of equal ``keys`` values of ``data`` (sorted by them), in order."""
    if not keys or data.num_rows < 2:
        if data.num_rows:
            yield data
        return
    changed = pa.repeat(False, data.num_rows - 1)
    for key in keys:
        column = data.column(key).combine_chunks()
        if pa.types.is_null(column.type):
            continue  # every value null: one group as far as this key goes
        previous, current = column.slice(0, len(column) - 1), column.slice(1)
        # Two nulls are the same group; a null and a value are not.
        same = pc.or_kleene(
            pc.equal(previous, current),
            pc.and_(pc.is_null(previous), pc.is_null(current)),
        )
        differs = pc.invert(pc.fill_null(same, False))
        changed = pc.or_(changed, differs)
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), data.num_rows]
    for begin, end in itertools.pairwise(starts):
        yield data.slice(begin, end - begin)


def _partition_text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)
