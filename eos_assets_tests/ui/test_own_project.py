"""The product in a Dagster user's own project, as README "Use it in your own Dagster project"
says: a fresh ``create-dagster project``, the package built as a wheel and installed into that
project's own virtual environment (no checkout on its path), a stream scaffolded with ``dg
scaffold defs``, events produced to the broker, the stream's job launched with ``dg launch``,
and its served KPI read back from DuckDB.
"""

import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from eos_assets.devkit import broker
from eos_assets.settings import read_jars_root
from eos_assets_tests.support.declared import produce_json
from eos_assets_tests.support.project_copy import BIN, REPO

TYPE = "eos_assets.components.EventStream"
KINDS = ("view", "click", "buy")
# The project's definitions.py with the jobs, schedule and sensor over every stream (README).
DEFINITIONS = """\
from pathlib import Path

import dagster as dg

from eos_assets.components import with_cross_stream


@dg.definitions
def defs() -> dg.Definitions:
    return with_cross_stream(dg.load_from_defs_folder(path_within_project=Path(__file__).parent))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout + done.stderr


def _wheel(tmp: Path, env: dict[str, str]) -> Path:
    """The package built as a wheel from a copy of its sources (the checkout stays clean)."""
    source = tmp / "source"
    shutil.copytree(
        REPO / "eos_assets", source / "eos_assets", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [str(BIN / "pip"), "--disable-pip-version-check", "-q"]
    _run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(source)], tmp, env)
    (wheel,) = (tmp / "dist").glob("eos_assets-*.whl")
    return wheel


@pytest.mark.slow
def test_a_stream_scaffolded_into_a_create_dagster_project_runs_to_its_served_kpi(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
    for name in ("VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    env.update(NO_COLOR="1", COLUMNS="200")
    wheel = _wheel(tmp_path, env)
    _run([str(BIN / "create-dagster"), "project", "shop"], tmp_path, env)
    shop = tmp_path / "shop"
    _run([sys.executable, "-m", "venv", str(shop / ".venv")], shop, env)
    pip = [str(shop / ".venv" / "bin" / "pip"), "--disable-pip-version-check", "-q"]
    # Without byte-compiling every installed module (about 30 s): the commands compile what
    # they import.
    constraints = ["-c", str(REPO / "constraints.txt")]
    _run([*pip, "install", "--no-compile", *constraints, str(wheel), "-e", "."], shop, env)
    dg = str(shop / ".venv" / "bin" / "dg")
    stream = f"clicks_{uuid.uuid4().hex[:6]}"
    _run([dg, "scaffold", "defs", TYPE, stream], shop, env)
    assert (shop / "src" / "shop" / "defs" / stream / "defs.yaml").is_file()

    # The project's environment: the session's broker and the jars this checkout fetched;
    # the lake, the warehouse and the broker's state under the project (the defaults).
    env.update(EOS_KAFKA_BOOTSTRAP=kafka_bootstrap, EOS_JARS_DIR=str(read_jars_root()))
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    Path(env["DAGSTER_HOME"]).mkdir()
    # The stream alone loads: the component brings its resources.
    _run([dg, "check", "defs"], shop, env)
    (shop / "src" / "shop" / "definitions.py").write_text(DEFINITIONS)
    broker.ensure_topic(kafka_bootstrap, stream, 2, {})
    now = datetime.now(UTC).isoformat()
    events = [
        {"event_id": str(uuid.uuid4()), "event_time": now, "kind": KINDS[i % len(KINDS)]}
        for i in range(60)
    ]
    produce_json(kafka_bootstrap, stream, events, partitions=2)
    # The stream's job, from the definitions with the jobs over every stream.
    _run([dg, "launch", "--job", f"{stream}__ingest_and_refresh"], shop, env)

    with duckdb.connect(str(shop / ".eos" / "warehouse.duckdb"), read_only=True) as db:
        served = db.execute(
            f"SELECT kind, sum(events) FROM {stream}.events_per_hour GROUP BY kind"
        ).fetchall()
    assert dict(served) == Counter(e["kind"] for e in events)
