"""Stream declarations: the shipped one loads and drives the definitions; every way a
declaration can be wrong fails when the definitions load, with one line naming the file, the
field and the fix.

Each case writes a defs folder (a package with one ``<stream>/defs.yaml`` per stream) under a
temporary folder and loads it the way ``eos_assets.definitions`` loads ``eos_assets/streams``.
"""

import json
from typing import Any

import dagster as dg
import pytest
import yaml

from eos_assets import examples
from eos_assets.declaration import (
    DeclarationError,
    StreamModel,
    check,
    check_kpis,
    seconds,
    unmatched_pattern,
)
from eos_assets.definitions import build_shared
from eos_assets.defs.gold import window_config
from eos_assets.defs.stream import Stream
from eos_assets.lib.errors import ConfigError
from eos_assets.resources import build_resources
from eos_assets.settings import Settings, read_limits
from eos_assets_tests.support.declared import Loader, orders


def refused(load: Loader, declarations: dict[str, dict | str]) -> DeclarationError:
    with pytest.raises(DeclarationError) as caught:
        load(declarations)
    message = str(caught.value)
    assert "\n" not in message, message
    return caught.value


def test_the_shipped_declaration_loads_the_orders_pipeline() -> None:
    from eos_assets.definitions import defs, streams

    assert [s.name for s in streams] == ["orders"]
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "orders/bronze/raw_events",
        "orders/silver/events",
        "orders/gold/window_aggregates",
        "orders/serving/kpis",
    } <= keys
    assert defs.resolve_job_def("ingest_and_refresh") is not None
    assert defs.resolve_sensor_def("orders_ingest_on_kafka_lag") is not None


def test_the_declared_topics_are_read_unless_eos_topics_names_others() -> None:
    stream = StreamModel.model_validate({**orders()["attributes"], "topics": ["orders_eu"]})
    declared = build_resources(Settings.from_env({}))["kafka"]
    assert declared.topics_for(stream.topics or []) == ["orders_eu"]
    override = build_resources(Settings.from_env({"EOS_TOPICS": "a,b"}))["kafka"]
    assert override.topics_for(stream.topics or []) == ["a", "b"]


def test_a_copy_of_the_shipped_declaration_loads(load: Loader) -> None:
    defs, streams = load({"orders": orders()})
    assert [s.name for s in streams] == ["orders"]
    assert streams[0].windows.measures["amount_sum"].of == "amount"
    keys = {k.to_user_string() for a in defs.assets or () for k in getattr(a, "keys", ())}
    assert {"orders/bronze/raw_events", "orders/gold/kpi_daily"} <= keys


def test_an_unknown_type(load: Loader) -> None:
    document = {**orders(), "type": "eos_assets.components.EventStreem"}
    error = refused(load, {"orders": document})
    assert error.source.endswith("orders/defs.yaml") and error.field == "type"
    assert "EventStreem" in error.problem and "eos_assets.components.EventStream" in error.fix


def test_a_missing_id_field(load: Loader) -> None:
    document = orders()
    del document["attributes"]["event_id"]
    error = refused(load, {"orders": document})
    assert (error.field, error.problem) == ("event_id", "field required")


def test_a_missing_time_field(load: Loader) -> None:
    document = orders()
    document["attributes"]["event_time"] = {"format": "epoch_millis"}
    error = refused(load, {"orders": document})
    assert (error.field, error.problem) == ("event_time.field", "field required")


def test_an_unknown_field_type(load: Loader) -> None:
    document = orders()
    document["attributes"]["payload"]["amount"]["type"] = "decimal"
    error = refused(load, {"orders": document})
    assert error.field == "payload.amount.type" and "'double'" in error.problem


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"format": "protobuf"}, "format", "'json'"),
        ({"payload.amount.path": "total.value"}, "payload.amount.path", "reads a field of an avro"),
        ({"format": "avro", "payload.amount.path": "total..value"}, "payload.amount.path",
         "'total..value' is not field names joined by dots"),
        ({"format": "avro", "payload.schema_id": {"type": "long"}}, "payload.schema_id",
         "is a column every avro stream has"),
    ],
)  # fmt: skip
def test_a_wrong_value_format_is_one_line(
    load: Loader, change: dict[str, object], field: str, problem: str
) -> None:
    document = orders()
    attributes = document["attributes"]
    for path, value in change.items():
        *parents, name = path.split(".")
        target = attributes
        for parent in parents:
            target = target[parent]
        target[name] = value
    error = refused(load, {"orders": document})
    assert error.field == field and problem in error.problem, error


def test_a_misspelt_attribute(load: Loader) -> None:
    document = orders()
    document["attributes"]["windwos"] = document["attributes"].pop("windows")
    error = refused(load, {"orders": document})
    assert error.field in ("windows", "windwos"), error


def test_yaml_that_does_not_parse(load: Loader) -> None:
    error = refused(load, {"orders": "type: [unclosed\n"})
    assert error.field.startswith("line ") and error.problem == "not valid YAML"


def test_kpi_sql_that_does_not_parse(load: Loader) -> None:
    document = orders()
    document["attributes"]["kpis"]["revenue_by_hour"]["sql"] = "SELECT FROM WHERE"
    error = refused(load, {"orders": document})
    assert error.field == "kpis.revenue_by_hour.sql" and "Parser Error" in error.problem


def test_kpi_sql_that_names_a_missing_column(load: Loader) -> None:
    document = orders()
    document["attributes"]["kpis"]["orders_by_status"]["sql"] = (
        "SELECT status, sum(paid) AS paid FROM entity_state GROUP BY status"
    )
    error = refused(load, {"orders": document})
    assert error.field == "kpis.orders_by_status.sql" and '"paid"' in error.problem


def test_two_streams_writing_one_table(load: Loader) -> None:
    second = orders()
    second["attributes"]["topics"] = ["orders_copy"]
    error = refused(load, {"a_orders": orders(), "b_orders": second})
    assert error.field == "name" and "a_orders/defs.yaml" in error.problem


def test_two_streams_reading_one_topic() -> None:
    from eos_assets.declaration import check_together

    first = StreamModel.model_validate(orders()["attributes"])
    second = StreamModel.model_validate({**orders()["attributes"], "name": "orders_again"})
    with pytest.raises(DeclarationError) as caught:
        check_together([(first, "a.yaml"), (second, "b.yaml")])
    assert caught.value.field == "topics" and "a.yaml" in caught.value.problem


def test_the_kpi_tables_and_alerts_come_from_the_declaration_alone(load: Loader) -> None:
    document = orders()
    attributes = document["attributes"]
    for name in ("kpi_window", "kpi_daily"):
        del attributes["kpis"][name]
    attributes["serve"] = ["revenue_by_hour", "orders_by_status"]
    del attributes["alerts"]
    attributes["kpis"]["paid_per_hour"] = {
        "time": "1h",
        "measures": {"paid": {"agg": "sum", "of": "amount", "when": {"event_type": "order_paid"}}},
    }
    defs, _ = load({"orders": document})
    keys = {k.to_user_string() for a in defs.assets or [] for k in a.keys}  # type: ignore[union-attr]
    assert {"orders/gold/paid_per_hour", "orders/gold/revenue_by_hour"} <= keys
    assert "orders/serving/sql_kpis" in keys
    assert not {"orders/gold/kpi_daily", "orders/serving/kpis", "orders/outbound/kpi_alerts"} & keys


@pytest.mark.parametrize(
    ("kpi", "field", "problem"),
    [
        ({"time": "1h", "sql": "SELECT 1"}, "kpis.bad", "both sql and measures"),
        ({"time": "1h"}, "kpis.bad.measures", "no measure"),
        ({"time": "an hour", "measures": {"n": {"agg": "count"}}}, "kpis.bad.time", "period"),
        ({"measures": {"n": {"agg": "count"}}}, "kpis.bad", "neither time nor by"),
        ({"time": "day", "by": ["amount"], "measures": {"n": {"agg": "count"}}},
         "kpis.bad.by[0]", "is a double"),
        ({"time": "day", "measures": {"day": {"agg": "count"}}}, "kpis.bad.measures.day", "key"),
        ({"time": "day", "measures": {"n": {"agg": "sum"}}}, "kpis.bad.measures.n.of", "field"),
        ({"time": "day", "measures": {"n": {"agg": "sum", "of": "currency"}}},
         "kpis.bad.measures.n.of", "is a string"),
        ({"time": "day", "measures": {"n": {"agg": "count", "when": {"event_type": "paid"}}}},
         "kpis.bad.measures.n.when.event_type", "not one of its values"),
        ({"time": "day", "measures": {"r": {"formula": "n / 2"}, "n": {"agg": "count"}}},
         "kpis.bad.measures.r.formula", "not a measure declared before"),
        ({"time": "day", "measures": {"n": {"agg": "count", "formula": "2 * 3"}}},
         "kpis.bad.measures.n", "exactly one of agg and formula"),
    ],
)  # fmt: skip
def test_a_wrong_kpi_is_one_line(load: Loader, kpi: dict, field: str, problem: str) -> None:
    document = orders()
    document["attributes"]["kpis"]["bad"] = kpi
    error = refused(load, {"orders": document})
    assert error.field == field and problem in f"{error.problem} {error.fix}", error


@pytest.mark.parametrize(
    ("rule", "field", "problem"),
    [
        ({"kpi": "nope", "metric": "revenue", "below": 1}, "alerts.bad.kpi", "not a served KPI"),
        ({"kpi": "revenue_by_hour", "metric": "revenue", "below": 1}, "alerts.bad.kpi",
         "no time periods"),
        ({"kpi": "kpi_window", "metric": "profit", "below": 1}, "alerts.bad.metric",
         "not a measure"),
        ({"kpi": "kpi_window", "metric": "revenue"}, "alerts.bad", "one bound"),
        ({"kpi": "kpi_window", "metric": "revenue", "below": 1, "above": 2}, "alerts.bad",
         "one bound"),
    ],
)  # fmt: skip
def test_a_wrong_alert_rule_is_one_line(load: Loader, rule: dict, field: str, problem: str) -> None:
    document = orders()
    document["attributes"]["alerts"]["bad"] = rule
    error = refused(load, {"orders": document})
    assert error.field == field and problem in error.problem, error


def test_two_streams_load_side_by_side_with_their_own_names(load: Loader) -> None:
    views = yaml.safe_load(examples.declaration("page_views").read_text())
    defs, streams = load({"orders": orders(), "page_views": views})
    assert sorted(s.name for s in streams) == ["orders", "page_views"]
    keys = {k.to_user_string() for a in defs.assets or [] for k in a.keys}  # type: ignore[union-attr]
    for stream in ("orders", "page_views"):
        assert {f"{stream}/bronze/raw_events", f"{stream}/gold/window_aggregates"} <= keys
    groups = {spec.group_name for a in defs.assets or [] for spec in a.specs}  # type: ignore[union-attr]
    assert {"orders_bronze", "page_views_bronze", "page_views_serving"} <= groups
    # The lag sensors and the schedules of the checks that read Kafka launch the jobs over
    # every stream: they come with them.
    shared = build_shared(streams, Settings.from_env({}))
    sensors = {s.name for s in shared.sensors or []}
    assert {"orders_ingest_on_kafka_lag", "page_views_ingest_on_kafka_lag"} <= sensors
    listed = shared.schedules or []
    schedules = {s.name: s for s in listed if isinstance(s, dg.ScheduleDefinition)}
    freshness = schedules["page_views_check_bronze_freshness_every_15_min"]
    (request,) = freshness.evaluate_tick(dg.build_schedule_context()).run_requests or []
    assert request.asset_selection == [] and request.asset_check_keys == [
        dg.AssetCheckKey(
            dg.AssetKey(["page_views", "bronze", "raw_events"]), "fresh_within_max_age"
        )
    ]
    assert "orders_audit_bronze_against_kafka_daily" in schedules
    assert {j.name for j in shared.jobs or []} >= {"ingest_and_refresh", "materialize_all"}
    with pytest.raises(ConfigError, match="EOS_TOPICS names the topics of one stream"):
        build_shared(streams, Settings.from_env({"EOS_TOPICS": "x"}))


def test_declared_thresholds_and_window_are_the_defaults_variables_and_config_override() -> None:
    attributes = orders()["attributes"]
    attributes["thresholds"] = {"malformed_max_rate": 0.05, "lag_max_age": "2m"}
    attributes["windows"] = {**attributes["windows"], "size": "90s", "grace": "1h"}
    stream = Stream.of(StreamModel.model_validate(attributes))
    assert read_limits({}, declared=stream.limits).malformed_max_rate == 0.05
    assert read_limits({}, declared=stream.limits).lag_max_age_s == 120
    assert read_limits({}, declared=stream.limits).lag_max_records == 10_000  # not declared
    overridden = read_limits({"EOS_MALFORMED_MAX_RATE": "0.2"}, declared=stream.limits)
    assert overridden.malformed_max_rate == 0.2
    fields = window_config(stream).model_fields
    assert (fields["window_minutes"].default, fields["grace_minutes"].default) == (1.5, 60.0)


def test_an_empty_streams_folder(load: Loader) -> None:
    with pytest.raises(DeclarationError) as caught:
        load({})
    assert "no stream is declared" in str(caught.value)


# The checks of a declaration on its own, for shapes the built-in pipeline does not run yet:
# a page-views stream (another id field, epoch-millis time, no amounts, entity = session).
PAGE_VIEWS = {
    "name": "page_views",
    "topics": ["page_views"],
    "event_id": {"field": "view_id"},
    "event_time": {"field": "ts", "format": "epoch_millis"},
    "payload": {
        "session_id": {"type": "string", "required": True},
        "page": {"type": "string"},
        "user_agent": {"type": "string"},
    },
    "entity": {
        "key": "session_id",
        "fields": {
            "pages": {"fold": "count"},
            "started": {"fold": "first_time"},
            "ended": {"fold": "last_time"},
            "last_page": {"fold": "latest", "of": "page"},
        },
    },
    "windows": {
        "size": "1m",
        "grace": "2m",
        "dimensions": ["page"],
        "measures": {
            "views": {"agg": "count"},
            "sessions": {"agg": "count_distinct", "of": "session_id"},
        },
    },
    "kpis": {
        "sessions": {
            "sql": "SELECT count(*) AS sessions, avg(pages) AS pages_per_session, "
            "avg(CASE WHEN pages = 1 THEN 1.0 ELSE 0.0 END) AS bounce_rate FROM entity_state"
        }
    },
    "serve": ["sessions"],
}


def judged(changes: dict) -> DeclarationError | None:
    """Check PAGE_VIEWS with ``changes`` applied at the top level; the error, if any."""
    model = StreamModel.model_validate({**PAGE_VIEWS, **changes})
    try:
        check(model, "page_views/defs.yaml")
        check_kpis(model, "page_views/defs.yaml")
    except DeclarationError as exc:
        return exc
    return None


def test_another_shape_is_a_valid_declaration() -> None:
    assert judged({}) is None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": "Page Views"}, "name"),
        ({"topics": None}, "topics"),
        ({"topic_pattern": "page_.*"}, "topics"),
        ({"topics": None, "topic_pattern": "page_(["}, "topic_pattern"),
        ({"start": "yesterday"}, "start"),
        ({"start": "2026-11-01T00:00:00"}, "start"),
        ({"event_id": {"field": "page"}}, "event_id.field"),
        ({"payload": {**PAGE_VIEWS["payload"], "offset": {"type": "long"}}}, "payload.offset"),
        (
            {"payload": {**PAGE_VIEWS["payload"], "n": {"type": "long", "values": ["1"]}}},
            "payload.n.values",
        ),
        ({"windows": {**PAGE_VIEWS["windows"], "size": "5 minutes"}}, "windows.size"),
        (
            {"windows": {**PAGE_VIEWS["windows"], "dimensions": ["referrer"]}},
            "windows.dimensions[0]",
        ),
        (
            {
                "payload": {**PAGE_VIEWS["payload"], "duration_ms": {"type": "long"}},
                "windows": {**PAGE_VIEWS["windows"], "dimensions": ["page", "duration_ms"]},
            },
            "windows.dimensions[1]",
        ),
        (
            {"windows": {**PAGE_VIEWS["windows"], "measures": {"v": {"agg": "sum", "of": "page"}}}},
            "windows.measures.v.of",
        ),
        (
            {
                "windows": {
                    **PAGE_VIEWS["windows"],
                    "measures": {"v": {"agg": "count", "of": "page"}},
                }
            },
            "windows.measures.v.of",
        ),
        ({"entity": {"key": "session", "fields": {"n": {"fold": "count"}}}}, "entity.key"),
        (
            {"entity": {"key": "session_id", "fields": {"p": {"fold": "sum", "of": "page"}}}},
            "entity.fields.p.of",
        ),
        ({"serve": ["bounces"]}, "serve[0]"),
        ({"kpis": {"s": {"sql": "SELECT nope FROM window_aggregates"}}, "serve": []}, "kpis.s.sql"),
    ],
)
def test_each_wrong_field_is_named(changes: dict, field: str) -> None:
    error = judged(changes)
    assert error is not None and error.field == field, error
    assert str(error).startswith(f"page_views/defs.yaml: {field}: ") and error.fix


def test_a_topic_pattern_that_matches_nothing_is_a_warning() -> None:
    model = StreamModel.model_validate({**PAGE_VIEWS, "topics": None, "topic_pattern": "views_.*"})
    assert judged({"topics": None, "topic_pattern": "views_.*"}) is None
    warning = unmatched_pattern(model, ["orders", "page_views"])
    assert warning is not None and "matches no topic" in warning
    assert unmatched_pattern(model, ["views_eu"]) is None


def test_durations() -> None:
    assert [seconds(t) for t in ("90s", "5m", "1h", "1d", "500ms")] == [90, 300, 3600, 86400, 0.5]
    with pytest.raises(ValueError):
        seconds("5 min")


def test_the_component_type_and_its_schema_are_registered_for_the_ui() -> None:
    from eos_assets.definitions import defs

    metadata: Any = defs.metadata["plugin_component_types_json"]
    registered = {t["name"]: t for library in metadata.value for t in library["componentTypes"]}
    stream = registered["eos_assets.components.EventStream"]
    schema = json.loads(stream["schema"])
    assert {"name", "topics", "event_id", "event_time", "payload", "windows", "kpis"} <= set(
        schema["properties"]
    )
    assert "exactly once" in stream["description"]


def test_every_stream_may_be_continuous_and_gets_its_loop_and_keeper(load: Loader) -> None:
    document = orders()
    document["attributes"]["mode"] = "continuous"
    views = yaml.safe_load(examples.declaration("page_views").read_text())
    views["attributes"]["mode"] = "continuous"
    defs, streams = load({"orders": document, "page_views": views})
    assert [s.mode for s in streams] == ["continuous", "continuous"]
    jobs = sorted(j.name for j in defs.jobs or [])  # type: ignore[union-attr]
    assert jobs == [
        "orders__ingest_and_refresh",
        "orders_continuous_kpis",
        "page_views__ingest_and_refresh",
        "page_views_continuous_kpis",
    ]
    assert {s.name for s in defs.sensors or []} == {
        "orders_keep_continuous_run",
        "page_views_keep_continuous_run",
    }
