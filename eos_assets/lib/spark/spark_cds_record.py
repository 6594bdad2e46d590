"""The process that writes the Spark class archive (``spark_cds.build`` runs it): Spark work
like the assets', in a driver JVM that writes the classes it loaded to a file as it exits."""

import argparse
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from eos_assets.lib.spark.spark_env import spark_config, use_this_python

# Seconds the JVM may take to write the archive as it exits.
EXIT_TIMEOUT_S = 600


def _record(target: Path) -> None:
    """Run Spark work like the assets' in a JVM that writes its classes to ``target`` on exit."""
    use_this_python()
    config = spark_config("local[2]", app_name="eos_cds", class_archive=False)
    config["spark.ui.enabled"] = "false"
    config["spark.driver.extraJavaOptions"] += f" -XX:ArchiveClassesAtExit={target}"
    builder = SparkSession.builder
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    proc = spark.sparkContext._gateway.proc  # pyright: ignore[reportOptionalMemberAccess]
    with tempfile.TemporaryDirectory() as scratch:
        rows = spark.range(20_000).select(
            (F.col("id") % 5_000).cast("string").alias("event_id"),
            F.col("id").alias("offset"),
            F.timestamp_micros(F.col("id") * 1_000_000).alias("event_time"),
            (F.col("id") % 97 * 1.5).alias("size"),
        )
        rows.write.parquet(f"{scratch}/rows")
        read = spark.read.parquet(f"{scratch}/rows")
        first = read.withColumn(
            "_rank", F.row_number().over(Window.partitionBy("event_id").orderBy("offset"))
        ).where("_rank = 1")
        fresh = first.join(read.limit(100).select("event_id"), "event_id", "left_anti")
        fresh.mapInArrow(lambda batches: batches, fresh.schema).count()
        fresh.groupBy(F.window("event_time", "5 minutes")).agg(
            F.sum("size"), F.count_distinct("event_id")
        ).collect()
        spark.sparkContext.parallelize(range(4), 4).map(lambda n: n * 2).collect()
        spark.createDataFrame([(1, "a")], "n long, s string").toArrow()
        read.write.format("delta").save(f"{scratch}/delta")
        spark.read.format("delta").load(f"{scratch}/delta").where("offset < 10").count()
        spark.sql(f"DESCRIBE HISTORY delta.`{scratch}/delta`").collect()
    spark.stop()
    # The JVM writes the archive as it exits, which it does when its stdin closes.
    assert proc is not None and proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=EXIT_TIMEOUT_S)


def main(argv: list[str] | None = None) -> None:
    """``python -m eos_assets.lib.spark.spark_cds_record TARGET``: the JVM writing an archive."""
    parser = argparse.ArgumentParser(prog="python -m eos_assets.lib.spark.spark_cds_record")
    parser.add_argument("target", type=Path)
    _record(parser.parse_args(argv).target)


if __name__ == "__main__":
    main()
