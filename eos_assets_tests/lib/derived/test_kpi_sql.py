"""A KPI's DuckDB SQL translated to Spark SQL when the declaration loads: the rewrites where
the engines differ, the keys and time keys that decide per-bucket upkeep, the constructs
refused with one line. (That Spark's results equal DuckDB's: ``test_declared_kpis.py``.)"""

import pytest

from eos_assets.lib.derived.kpi_sql import TimeKey, Untranslatable, translate

HOURLY = (
    "SELECT time_bucket(INTERVAL 1 hour, window_start) AS hour, page, sum(views) AS views "
    "FROM window_aggregates GROUP BY ALL"
)


def test_a_time_bucket_starts_on_duckdbs_origin_and_keys_the_kpi_by_time() -> None:
    kpi = translate("views_by_page_hour", HOURLY, ("hour", "page", "views"))
    bucket = (
        "TIMESTAMP_MICROS(UNIX_MICROS(window_start) - PMOD(UNIX_MICROS(window_start) - "
        "946857600000000, 3600000000))"
    )
    assert kpi.template.startswith(f"SELECT {bucket} AS hour, page")
    assert kpi.template.endswith("FROM {window_aggregates} GROUP BY ALL")
    assert kpi.sources == ("window_aggregates",)
    assert kpi.key == ("hour", "page")
    assert kpi.time == TimeKey("hour", bucket)
    assert kpi.spark_sql({"window_aggregates": "v1"}).endswith("FROM v1 GROUP BY ALL")


def test_a_division_gives_duckdbs_double_and_infinities() -> None:
    kpi = translate(
        "rate",
        "SELECT window_start, sum(a) / sum(b) AS r FROM window_aggregates GROUP BY window_start",
        ("window_start", "r"),
    )
    assert (
        "IF((SUM(b)) = 0, CAST((SUM(a)) AS DOUBLE) * CAST('Infinity' AS DOUBLE), "
        "CAST((SUM(a)) AS DOUBLE) / (SUM(b)))" in kpi.template
    )
    assert kpi.time == TimeKey("window_start", "window_start")


@pytest.mark.parametrize(
    ("sql", "columns", "key", "kept_per_bucket"),
    [
        ("SELECT count(*) AS n FROM entity_state", ("n",), (), False),
        ("SELECT s, count(*) AS n FROM entity_state GROUP BY ALL", ("s", "n"), ("s",), False),
        (
            "SELECT date_trunc('day', window_start) AS d, sum(x) AS x FROM window_aggregates "
            "GROUP BY 1",
            ("d", "x"),
            ("d",),
            True,
        ),
        (
            "SELECT window_start, sum(x) AS x FROM window_aggregates GROUP BY 1 HAVING sum(x) > 1",
            ("window_start", "x"),
            ("window_start",),
            False,
        ),
        (  # grouped by a column it does not output: its rows have no key
            "SELECT window_start, sum(x) AS x FROM window_aggregates GROUP BY window_start, p",
            ("window_start", "x"),
            (),
            False,
        ),
    ],
)
def test_only_a_select_of_the_windows_grouped_by_a_time_key_is_kept_per_bucket(
    sql: str, columns: tuple[str, ...], key: tuple[str, ...], kept_per_bucket: bool
) -> None:
    kpi = translate("k", sql, columns)
    assert kpi.key == key
    assert (kpi.time is not None) is kept_per_bucket


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        (
            "SELECT time_bucket(INTERVAL 1 month, window_start) AS m FROM window_aggregates",
            "(month has no fixed length) has no Spark translation: use date_trunc('month', ...)",
        ),
        (
            "SELECT time_bucket(INTERVAL 1 hour, window_start, TIMESTAMPTZ '2000-01-01') AS m "
            "FROM window_aggregates",
            "(an origin or time zone) has no Spark translation",
        ),
        (
            "SELECT levenshtein_ratio(page, 'x') AS m FROM window_aggregates",
            "the function levenshtein_ratio has no Spark translation",
        ),
    ],
)
def test_a_construct_spark_cannot_run_is_refused_in_one_line(sql: str, says: str) -> None:
    with pytest.raises(Untranslatable) as refused:
        translate("k", sql, ("m",))
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_an_edit_of_the_sql_changes_its_fingerprint() -> None:
    one = translate("k", HOURLY, ("hour", "page", "views"))
    other = translate("k", HOURLY.replace("sum(views)", "max(views)"), ("hour", "page", "views"))
    assert one.fingerprint != other.fingerprint
    assert one.fingerprint == translate("k", HOURLY + " ", ("hour", "page", "views")).fingerprint
