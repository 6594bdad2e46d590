"""A stream's own Kafka, lake and warehouse, declared in its ``defs.yaml``.

Streams that declare nothing share the resources of the environment; a stream that declares its
own binds them under its own keys (``kafka__<stream>`` ...), which its assets, checks, sensor
and jobs name, and streams that declare the same share one object. Two streams with different
brokers, lakes and serving databases load and run together in one Definitions: each writes its
own lake and DuckDB file and reads through its own Kafka resource (real broker, Spark, Delta,
DuckDB). A wrong setting is one line naming the file, the field and the fix.
"""

import importlib
import sys
import uuid
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from deltalake import DeltaTable

from eos_assets.components import with_cross_stream
from eos_assets.components.shared import build_shared
from eos_assets.declaration import DeclarationError, StreamModel, check_together
from eos_assets.defs import jobs
from eos_assets.settings import Settings
from eos_assets_tests.components.test_stream_jobs import declaration
from eos_assets_tests.components.test_third_stream import readings
from eos_assets_tests.support.declared import Loader, produce_json

SERVED = {
    "kpis": {"by_device": {"by": ["device"], "measures": {"readings": {"agg": "count"}}}},
    "serve": ["by_device"],
}


def declared(name: str, topic: str, **own: object) -> dict:
    """The readings stream ``name`` on ``topic``, with a served KPI and ``own`` attributes."""
    document = declaration(name, topic)
    document["attributes"].update(SERVED, **own)
    return document


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: dict[str, dict]):
    """The definitions of a project's defs folder declaring ``streams``, with what spans them
    (as its ``definitions.py`` builds them)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    package = f"own_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    for name, document in streams.items():
        (tmp_path / package / name).mkdir()
        (tmp_path / package / name / "defs.yaml").write_text(yaml.safe_dump(document))
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(package)
        tree = dg.ComponentTree.from_module(defs_module=module, project_root=tmp_path)
        return with_cross_stream(tree.build_defs())
    finally:
        sys.modules.pop(package, None)


def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bootstrap: str) -> None:
    monkeypatch.setenv("EOS_KAFKA_BOOTSTRAP", bootstrap)
    monkeypatch.setenv("EOS_LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.setenv("EOS_WAREHOUSE", str(tmp_path / "kpis.duckdb"))
    monkeypatch.delenv("EOS_TOPICS", raising=False)


def required(defs: dg.Definitions, stream: str) -> set[str]:
    return set(
        defs.resolve_assets_def(
            dg.AssetKey([stream, "bronze", "raw_events"])
        ).required_resource_keys
    )


def test_streams_that_agree_share_objects_and_a_stream_of_its_own_names_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment(monkeypatch, tmp_path, "127.0.0.1:9092")
    own_lake = str(tmp_path / "south-lake")
    defs = project(
        tmp_path,
        monkeypatch,
        {
            "north": declared("north", "readings"),
            "east": declared("east", "east"),
            # The same topic name on another cluster is another topic.
            "south": declared(
                "south",
                "readings",
                kafka={
                    "bootstrap_servers": "kafka-south:9092",
                    "security_protocol": "SASL_SSL",
                    "sasl_mechanism": "PLAIN",
                    "sasl_username": "south",
                    "sasl_password_env": "SOUTH_KAFKA_PASSWORD",
                },
                lake={"root": own_lake},
                warehouse={"path": str(tmp_path / "south_kpis.duckdb")},
                mode="continuous",
            ),
            "west": declared("west", "west", lake={"root": own_lake}),
            # Declaring the environment's own lake is agreeing with it.
            "home": declared("home", "home", lake={"root": str(tmp_path / "lake")}),
        },
    )
    dg.Definitions.validate_loadable(defs)
    resources = defs.resources or {}

    assert required(defs, "north") == required(defs, "east") == {
        "kafka", "lake", "pyspark", "io_manager"
    }  # fmt: skip
    assert required(defs, "south") == {"kafka__south", "lake__south", "pyspark", "io_manager"}
    assert required(defs, "west") == {"kafka", "lake__west", "pyspark", "io_manager"}
    south_kafka = resources["kafka__south"]
    assert south_kafka.bootstrap_servers == "kafka-south:9092"
    assert (south_kafka.security_protocol, south_kafka.sasl_username) == ("SASL_SSL", "south")
    assert resources["kafka"].bootstrap_servers == "127.0.0.1:9092"
    assert resources["lake__south"].root == own_lake
    assert resources["lake__south"] is resources["lake__west"]
    assert resources["lake__home"] is resources["lake"]
    assert resources["warehouse__south"].path == str(tmp_path / "south_kpis.duckdb")
    assert "warehouse__west" not in resources and "pyspark__south" not in resources

    sensor = defs.resolve_sensor_def("south_ingest_on_kafka_lag")
    assert set(sensor.required_resource_keys) == {"kafka__south", "lake__south", "pyspark"}
    serving = defs.resolve_assets_def(dg.AssetKey(["south", "serving", "kpis"]))
    assert {"lake__south", "warehouse__south"} <= set(serving.required_resource_keys)
    audit = dg.AssetCheckKey(dg.AssetKey(["south", "bronze", "raw_events"]), "matches_kafka_log")
    (checks,) = [c for c in defs.asset_checks or () if audit in c.check_keys]
    assert {"kafka__south", "lake__south"} <= set(checks.required_resource_keys)
    maintenance = defs.resolve_job_def(jobs.MAINTENANCE_JOB)
    assert maintenance.required_resource_keys >= {"lake", "lake__south", "lake__west", "lake__home"}

    # Nothing of south's names the shared Kafka, lake or warehouse: not an asset, a check, a
    # sensor, nor the op of its continuous run.
    shared = {"kafka", "lake", "warehouse"}
    south = [
        *(a for a in defs.assets or () if isinstance(a, dg.AssetsDefinition)
          and any(k.path[0] == "south" for k in a.keys)),
        *(c for c in defs.asset_checks or ()
          if any(k.asset_key.path[0] == "south" for k in c.check_keys)),
        *(s for s in defs.sensors or () if s.name.startswith("south_")),
        *defs.resolve_job_def("south_continuous_kpis").graph.node_defs,
    ]  # fmt: skip
    assert len(south) > 10
    for definition in south:
        assert not shared & set(definition.required_resource_keys), definition


def test_the_package_definitions_bind_each_streams_own_resources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: Loader
) -> None:
    environment(monkeypatch, tmp_path, "127.0.0.1:9092")
    declared_defs, models = load(
        {
            "north": declared("north", "north"),
            "south": declared("south", "south", lake={"root": str(tmp_path / "south")}),
        }
    )
    defs = dg.Definitions.merge(declared_defs, build_shared(models, Settings.from_env()))
    dg.Definitions.validate_loadable(defs)
    assert (defs.resources or {})["lake__south"].root == str(tmp_path / "south")


def test_one_topic_name_on_one_cluster_is_read_by_one_stream() -> None:
    kafka = {"kafka": {"bootstrap_servers": "b:9092"}}
    first = StreamModel.model_validate({**declaration("a", "t")["attributes"], **kafka})
    second = StreamModel.model_validate({**declaration("b", "t")["attributes"], **kafka})
    with pytest.raises(DeclarationError) as caught:
        check_together([(first, "a.yaml"), (second, "b.yaml")])
    assert caught.value.field == "topics"


@pytest.mark.parametrize(
    ("own", "field", "fix"),
    [
        ({"kafka": {}}, "kafka", "bootstrap_servers"),
        ({"kafka": {"bootstrap_servers": "a:1, b:2"}}, "kafka.bootstrap_servers", "without spaces"),
        ({"kafka": {"security_protocol": "TLS"}}, "kafka.security_protocol", "SASL_SSL"),
        ({"kafka": {"sasl_password": "hunter2"}}, "kafka.sasl_password", "sasl_password_env"),
        ({"kafka": {"sasl_password_env": "south-pw"}}, "kafka.sasl_password_env", "variable"),
        ({"lake": {}}, "lake.root", "README"),
        ({"lake": {"root": " "}}, "lake.root", "local path"),
        ({"lake": {"root": "s3://"}}, "lake.root", "s3://<bucket>"),
        ({"lake": {"root": "s3://bucket/south"}}, "lake.root", "EOS_LAKE_ROOT"),
        ({"warehouse": {"path": ""}}, "warehouse.path", "DuckDB"),
        ({"warehouse": {"path": "/srv/south.duckdb"}}, "warehouse.path", "south_kpis.duckdb"),
    ],
)
def test_a_wrong_setting_is_one_line(
    load: Loader, monkeypatch: pytest.MonkeyPatch, own: dict, field: str, fix: str
) -> None:
    monkeypatch.setenv("EOS_LAKE_ROOT", ".eos/lake")  # a local lake: a stream's on S3 is refused
    with pytest.raises(DeclarationError) as caught:
        load({"south": declared("south", "south", **own)})
    error = caught.value
    assert "\n" not in str(error) and f"/south/defs.yaml: {field}: " in str(error)
    assert error.field == field and fix in error.fix, error


def test_two_streams_with_their_own_broker_lake_and_warehouse_run_in_one_job(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kafka_bootstrap: str,
    make_topic,
    spark,
) -> None:
    environment(monkeypatch, tmp_path, kafka_bootstrap)
    # The same broker under another address: the resource south's assets get is its own.
    port = kafka_bootstrap.rsplit(":", 1)[1]
    south_bootstrap = f"localhost:{port}"
    north_topic, south_topic = make_topic(partitions=1), make_topic(partitions=1)
    south_lake, south_warehouse = tmp_path / "south-lake", tmp_path / "south_kpis.duckdb"
    defs = project(
        tmp_path,
        monkeypatch,
        {
            "north": declared("north", north_topic),
            "south": declared(
                "south",
                south_topic,
                kafka={"bootstrap_servers": south_bootstrap},
                lake={"root": str(south_lake)},
                warehouse={"path": str(south_warehouse)},
            ),
        },
    )
    assert (defs.resources or {})["kafka__south"].bootstrap_servers == south_bootstrap
    _, valid = readings()
    produce_json(kafka_bootstrap, north_topic, valid[:25], partitions=1)
    produce_json(kafka_bootstrap, south_topic, valid[25:], partitions=1)

    every = defs.resolve_job_def(jobs.STREAM_JOB)  # both streams, one run, one SparkSession
    result = every.execute_in_process(instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]

    def rows(root: Path, stream: str, *table: str) -> int:
        return DeltaTable(str(root / stream / "/".join(table))).to_pyarrow_table().num_rows

    lake = tmp_path / "lake"
    assert rows(lake, "north", "bronze", "raw_events") == 25
    assert rows(south_lake, "south", "bronze", "raw_events") == len(valid) - 25
    assert rows(south_lake, "south", "silver", "events") == len(valid) - 25
    assert not (lake / "south").exists() and not (south_lake / "north").exists()

    def served(path: Path) -> dict[str, int]:
        with duckdb.connect(str(path), read_only=True) as con:
            schemas = {
                s
                for (s,) in con.execute(
                    "SELECT schema_name FROM information_schema.schemata"
                ).fetchall()
            }
            return {
                s: (con.execute(f"SELECT sum(readings) FROM {s}.by_device").fetchone() or [0])[0]
                for s in ("north", "south")
                if s in schemas
            }

    assert served(tmp_path / "kpis.duckdb") == {"north": 25}
    assert served(south_warehouse) == {"south": len(valid) - 25}

    # South's lag sensor measures its topic on its broker against its lake's positions: caught
    # up (the shared lake holds no south table, so it would see the whole topic pending).
    sensor = defs.resolve_sensor_def("south_ingest_on_kafka_lag")
    resources = defs.resources or {}
    context = dg.build_sensor_context(
        instance=dg.DagsterInstance.ephemeral(),
        resources={key: resources[key] for key in sensor.required_resource_keys},
        repository_def=defs.get_repository_def(),
    )
    tick = sensor(context)
    assert isinstance(tick, dg.SensorResult) and not tick.run_requests
    (observation,) = tick.asset_events
    assert observation.metadata["lag_total"].value == 0
