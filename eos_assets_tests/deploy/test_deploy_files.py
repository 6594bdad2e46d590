"""What can be checked of the container setup without Docker: the compose file, the Dockerfile
and the instance file agree with each other, with the Makefile and with the settings contract."""

from pathlib import Path

import yaml

from eos_assets_tests.deploy import compose_files as cf
from eos_assets_tests.deploy.compose_files import DEPLOY, REPO

# Settings whose local default (embedded broker, ./.eos paths, local[*]) is wrong in a
# deployment: every container that runs project code sets them.
REQUIRED = {
    "EOS_KAFKA_BOOTSTRAP",
    "EOS_TOPICS",
    "EOS_LAKE_ROOT",
    "EOS_WAREHOUSE",
    "EOS_STATE_DIR",
    "EOS_SPARK_MASTER",
}
PROJECT_IMAGE = "eos-assets:latest"


def _services() -> dict[str, dict]:
    return cf.compose()["services"]


def _runs_project_code(service: dict) -> bool:
    words = cf.command(service)
    return "eos_assets.definitions" in words or words[:1] == ["eos-assets"]


def _instance_env_names() -> set[str]:
    """The variables deploy/dagster.yaml reads through ``env:`` entries."""
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if set(node) == {"env"}:
                names.add(str(node["env"]))
            for value in node.values():
                walk(value)

    walk(yaml.safe_load((DEPLOY / "dagster.yaml").read_text()))
    return names


def test_the_required_settings_are_settings_of_the_contract() -> None:
    contract = cf.settings_read_by(cf.PACKAGE / "settings.py")
    assert not REQUIRED - contract, sorted(REQUIRED - contract)


def test_every_eos_variable_of_every_service_is_a_known_setting() -> None:
    known = cf.known_settings()
    services = _services()
    assert {"kafka", "postgres", "code", "webserver", "daemon", "spark-master", "spark-worker"} <= (
        services.keys()
    )
    unknown = {
        (name, key)
        for name, service in services.items()
        for key in cf.env(service)
        if key.startswith("EOS_") and key not in known
    }
    assert not unknown, f"not read by the product (typo or removed setting?): {sorted(unknown)}"


def test_services_that_run_project_code_have_the_settings_and_the_shared_lake() -> None:
    services = _services()
    runners = {n: s for n, s in services.items() if _runs_project_code(s)}
    assert {"code", "producer"} <= runners.keys()
    lake = cf.env(services["code"])["EOS_LAKE_ROOT"]
    for name, service in [*runners.items(), ("spark-worker", services["spark-worker"])]:
        assert service["image"] == PROJECT_IMAGE, name
        missing = REQUIRED - cf.env(service).keys() if name in runners else set()
        assert not missing, f"{name} lacks {sorted(missing)}"
        if name in runners:
            assert cf.env(service)["EOS_LAKE_ROOT"] == lake, name
        # The lake root is on the one shared volume, at the same path everywhere.
        shared = [t for t, s in cf.mounts(service).items() if s == "data" and lake.startswith(t)]
        assert shared, f"{name} does not mount the lake volume above {lake}"


def test_dagster_services_use_the_production_instance() -> None:
    services = _services()
    needed = _instance_env_names()
    assert needed >= {"DAGSTER_PG_HOST", "DAGSTER_PG_PASSWORD"}
    for name in ("code", "webserver", "daemon"):
        service = services[name]
        environment = cf.env(service)
        assert needed <= environment.keys(), f"{name} lacks {sorted(needed - environment.keys())}"
        home = environment["DAGSTER_HOME"]
        source = cf.mounts(service)[f"{home}/dagster.yaml"]
        assert (DEPLOY / source).resolve() == DEPLOY / "dagster.yaml", name
        assert environment["DAGSTER_PG_HOST"] in services, name
    instance = yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    assert "postgres" in instance["storage"]
    assert instance["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert instance["concurrency"]["pools"]["default_limit"] == 1
    assert instance["telemetry"] == {"enabled": False}
    local = yaml.safe_load((DEPLOY / "dagster.local.yaml").read_text())
    assert "storage" not in local  # make demo / make ui: SQLite under DAGSTER_HOME


def test_webserver_and_daemon_reach_the_code_server_through_the_workspace() -> None:
    services = _services()
    code = cf.command(services["code"])
    for name in ("webserver", "daemon"):
        path = cf.option(cf.command(services[name]), "-w")
        assert path.startswith("/opt/eos/"), path
        workspace = yaml.safe_load((REPO / path.removeprefix("/opt/eos/")).read_text())
        (entry,) = workspace["load_from"]
        server = entry["grpc_server"]
        assert server["host"] in services and services[server["host"]] is services["code"]
        assert str(server["port"]) == cf.option(code, "-p")
        assert server["location_name"] == cf.option(code, "--location-name")


def test_kafka_and_spark_addresses_match_their_services() -> None:
    services = _services()
    settings = cf.env(services["code"])
    kafka = cf.env(services["kafka"])
    assert f"PLAINTEXT://{settings['EOS_KAFKA_BOOTSTRAP']}" in kafka[
        "KAFKA_ADVERTISED_LISTENERS"
    ].split(",")
    assert kafka["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    # Transactions on one node: the transaction state log cannot have more replicas.
    assert kafka["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "1"
    assert kafka["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"
    master = cf.command(services["spark-master"])
    url = f"spark://{cf.option(master, '--host')}:{cf.option(master, '--port')}"
    assert settings["EOS_SPARK_MASTER"] == url
    assert cf.option(master, "--host") in services
    worker = cf.command(services["spark-worker"])
    assert worker[-1] == url
    for words in (master, worker):
        # The launcher inside the image's venv: the same layout as the Makefile's .venv.
        assert words[0].startswith("/opt/eos/.venv/")
        assert (REPO / words[0].removeprefix("/opt/eos/")).exists(), words[0]


def test_the_dockerfile_installs_like_the_makefile_as_a_non_root_user() -> None:
    steps = cf.dockerfile()
    assert steps[0][0] == "FROM" and steps[0][1].startswith("python:3.11-slim")
    runs = [args for instruction, args in steps if instruction == "RUN"]
    assert any("openjdk-17-jre-headless" in args for args in runs)
    # Delta's jars where jars.jar_dir("delta") looks for them (the image's .jars).
    assert any(
        "eos_assets/maven/delta/pom.xml" in args
        and "-DoutputDirectory=/opt/eos/.jars/delta" in args
        for args in runs
    )
    installs = [words for args in runs for words in cf.pip_installs(args)]
    assert installs and all(words == cf.makefile_install() for words in installs), installs
    users = [args for instruction, args in steps if instruction == "USER"]
    assert users and users[-1] not in ("root", "0")
    copies = [args.split() for instruction, args in steps if instruction == "COPY"]
    for *sources, _ in copies:
        for source in sources:
            assert (REPO / source).exists(), source
    # Layer caching: the pins are copied and installed before any source.
    order = [i for i, (instruction, _) in enumerate(steps) if instruction in ("COPY", "RUN")]
    first_pins = next(
        i for i in order if steps[i][0] == "COPY" and "constraints.txt" in steps[i][1]
    )
    first_install = next(i for i in order if "pip install" in steps[i][1])
    first_source = next(i for i in order if steps[i][0] == "COPY" and "eos_assets" in steps[i][1])
    assert first_pins < first_install < first_source


def test_the_compose_file_builds_the_dockerfile() -> None:
    for name, service in _services().items():
        if service.get("image") == PROJECT_IMAGE:
            build = service["build"]
            context = (DEPLOY / build["context"]).resolve()
            assert context == REPO and (context / build["dockerfile"]).exists(), name
    assert Path(DEPLOY / "Dockerfile.dockerignore").exists()
