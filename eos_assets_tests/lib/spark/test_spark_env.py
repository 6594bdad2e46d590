"""Every Spark session of the product has Delta: its jars, installed at install time, and its
two settings; a missing install fails in one line."""

import os
import re
from importlib.metadata import version
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from eos_assets.lib.errors import ConfigError
from eos_assets.lib.spark import jars
from eos_assets.lib.spark.spark_env import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    SNAPSHOT_PARTITIONS,
    local_slots,
    spark_config,
)

# "delta-spark_4.2_2.13-4.4.0.jar" -> "delta-spark_4.2_2.13"; "zstd-jni-1.5.7-7.jar" -> "zstd-jni"
_VERSION = re.compile(r"-\d[\w.]*(-\d+)?\.jar$")


def _artifacts(folder: Path) -> set[str]:
    return {_VERSION.sub("", p.name) for p in folder.glob("*.jar")}


def test_the_delta_jars_match_pyspark_and_the_python_package_and_add_nothing_pyspark_ships() -> (
    None
):
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    delta = jars.jar_dir("delta")
    # The Python package and the jar are one version (its 4.4.1 has no jar on Maven Central).
    assert (delta / f"delta-spark_{spark_minor}_2.13-{version('delta-spark')}.jar").is_file()
    assert (delta / f"delta-storage-{version('delta-spark')}.jar").is_file()
    # Spark, Scala, Hadoop, Parquet, Jackson, ... come from pyspark only: one version each.
    shipped = _artifacts(Path(pyspark.__file__).parent / "jars")
    assert not _artifacts(delta) & shipped


def test_every_session_config_has_delta_jars_for_the_executors_and_its_two_settings() -> None:
    config = spark_config("spark://127.0.0.1:7077")
    listed = config["spark.jars"].split(",")
    assert sorted(listed) == sorted(str(p) for p in jars.jar_dir("delta").glob("*.jar"))
    assert config["spark.sql.extensions"] == DELTA_EXTENSION
    assert config["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG


def test_the_session_serves_the_delta_jars_to_executors_and_runs_delta_sql(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The jars the driver's file server hands to every executor that starts (spark.jars).
    jvm_context = spark.sparkContext._jsc.sc()  # pyright: ignore[reportOptionalCall, reportOptionalMemberAccess]
    served = {Path(uri).name for uri in jvm_context.listJars().mkString(",").split(",")}
    assert {p.name for p in jars.jar_dir("delta").glob("*.jar")} <= served
    path = tmp_path / "t"
    spark.range(5).write.format("delta").save(str(path))
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT 7L AS id) s ON t.id = s.id "
              "WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
    assert spark.read.format("delta").load(str(path)).count() == 6


def test_missing_delta_jars_fail_in_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "delta").mkdir()  # an install that stopped before Maven copied anything
    monkeypatch.setenv("EOS_JARS_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as missing:
        spark_config("local[2]")
    message = str(missing.value)
    assert "\n" not in message
    assert "the delta jars are missing" in message and "`eos-assets jars`" in message


def test_a_local_master_gives_its_task_slots() -> None:
    assert [local_slots(m) for m in ("local", "local[2]", "local[3, 4]", " local[8] ")] == [
        1,
        2,
        3,
        8,
    ]
    assert local_slots("local[*]") == len(os.sched_getaffinity(0))
    assert local_slots("spark://host:7077") is None and local_slots("yarn") is None


def test_a_local_session_rebuilds_a_delta_snapshot_in_one_task_per_slot() -> None:
    assert spark_config("local[2]")[SNAPSHOT_PARTITIONS] == "2"
    assert SNAPSHOT_PARTITIONS not in spark_config("spark://host:7077")
