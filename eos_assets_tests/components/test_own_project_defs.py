"""Streams in a Dagster user's project: each ``EventStream`` brings the resources its assets use,
two streams share them, and ``with_cross_stream`` adds the jobs, schedule and sensor over every
stream, with a project's own resources in place of those brought when it names them.

The defs folder is loaded as ``dg.load_from_defs_folder`` loads a project's: the component tree
of a package, not ``eos_assets.definitions``.
"""

import importlib
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eos_assets.components import with_cross_stream
from eos_assets.lib.errors import ConfigError
from eos_assets.resources.warehouse import WarehouseResource
from eos_assets_tests.components.test_stream_jobs import declaration


def _project_defs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streams: list[str]):
    """The definitions of a defs folder declaring ``streams``, loaded as a project's."""
    monkeypatch.syspath_prepend(str(tmp_path))
    package = f"shop_defs_{uuid.uuid4().hex[:8]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    for name in streams:
        (tmp_path / package / name).mkdir()
        document = declaration(name, f"{name}-{uuid.uuid4().hex[:6]}")
        (tmp_path / package / name / "defs.yaml").write_text(yaml.safe_dump(document))
    importlib.invalidate_caches()
    try:
        module = importlib.import_module(package)
        return dg.ComponentTree.from_module(defs_module=module, project_root=tmp_path).build_defs()
    finally:
        sys.modules.pop(package, None)


def test_two_streams_bring_and_share_their_resources_and_the_in_process_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    defs = _project_defs(tmp_path, monkeypatch, ["clicks", "views"])
    assert defs.resources is not None
    assert {"kafka", "pyspark", "lake", "warehouse", "alerts"} <= set(defs.resources)
    assert defs.executor is dg.in_process_executor
    dg.Definitions.validate_loadable(defs)
    for name in ("clicks", "views"):
        assert defs.resolve_job_def(f"{name}__ingest_and_refresh") is not None


def test_with_cross_stream_adds_the_jobs_over_every_stream_and_replaces_named_resources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    defs = _project_defs(tmp_path, monkeypatch, ["clicks", "views"])
    mine = WarehouseResource(path=str(tmp_path / "mine.duckdb"))
    full = with_cross_stream(defs, resources={"warehouse": mine})
    dg.Definitions.validate_loadable(full)
    assert full.resources is not None and defs.resources is not None
    assert full.resources["warehouse"] is mine
    assert full.resources["kafka"] is defs.resources["kafka"]
    assert {"ingest_and_refresh", "maintain_delta_tables"} <= {
        job.name for job in full.resolve_all_job_defs()
    }
    assert full.resolve_sensor_def("follow_bronze_downstream") is not None
    assert full.resolve_schedule_def("maintain_delta_tables_daily") is not None


def test_with_cross_stream_without_streams_is_one_line_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="with_cross_stream found no EventStream"):
        with_cross_stream(dg.Definitions())
