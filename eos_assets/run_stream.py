"""`eos-assets run --stream <name>`: one declared stream's graph, by name, through Dagster.

It runs the stream's job ``<stream>__ingest_and_refresh`` (its ingest, then silver, gold,
serving and outbound in the same run) on the Dagster instance of ``DAGSTER_HOME`` (a temporary
one when it is unset), so the run shows up in ``make ui``, and prints one line per asset it
materialized. The definitions are those of the Dagster project in the current folder (its
``pyproject.toml``: ``[tool.dg.project]`` or ``[tool.dagster]``), this package's own without one.
"""

import importlib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from eos_assets.instance import ensure_instance_config
from eos_assets.lib.errors import ConfigError, EosError

# The counts each summary line shows, from the asset's materialization metadata.
_COUNTS = ("records", "malformed", "rows_inserted", "windows_recomputed", "rows")
_SHOWN = {"late_events": ("late_events",), "entity_state": ("entities_touched",)}


def run_stream(name: str) -> str:
    """Run the job of the declared stream ``name`` and return its summary, one line per asset.

    Raises:
        ConfigError: no stream of that name is declared.
        EosError: the run failed (its first failure's line).
    """
    from eos_assets.components import EventStream

    defs = project_definitions(Path.cwd())
    tree = defs.component_tree
    streams = [] if tree is None else tree.get_all_components(of_type=EventStream)
    declared = sorted(model.name for model in streams)
    if name not in declared:
        raise ConfigError(
            f"no stream {name!r} is declared: name one of {', '.join(declared) or '(none)'} "
            f"or declare it: `dg scaffold defs eos_assets.components.EventStream {name}`"
        )
    ensure_instance_config()
    job = defs.resolve_job_def(f"{name}__ingest_and_refresh")
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    home = os.environ.get("DAGSTER_HOME")
    instance = dg.DagsterInstance.get() if home else dg.DagsterInstance.ephemeral()
    result = job.execute_in_process(run_config=quiet, instance=instance, raise_on_error=False)
    if not result.success:
        failure = next((e for e in result.all_events if e.is_failure), None)
        message = failure_line(failure) if failure is not None else "see the run in `make ui`"
        raise EosError(f"the run {result.run_id} of stream {name} failed: {message}")
    materialized = result.get_asset_materialization_events()
    lines = [f"stream {name}: run {result.run_id} succeeded, {len(materialized)} assets"]
    for event in materialized:
        mat = event.step_materialization_data.materialization
        meta = {k: v.value for k, v in mat.metadata.items()}
        lines.append(summary_line(mat.asset_key, meta))
    if not materialized:
        lines.append("  nothing materialized: its topics do not exist yet (see the run's log)")
    return "\n".join(lines)


def definitions_module(root: Path) -> str:
    """The definitions module of the Dagster project at ``root``, as ``dg`` and ``dagster``
    find it in its ``pyproject.toml``; ``eos_assets.definitions`` without one."""
    pyproject = root / "pyproject.toml"
    tool = tomllib.loads(pyproject.read_text()).get("tool", {}) if pyproject.is_file() else {}
    project = tool.get("dg", {}).get("project", {})
    if "code_location_target_module" in project:
        return project["code_location_target_module"]
    if "root_module" in project:
        return f"{project['root_module']}.definitions"
    return tool.get("dagster", {}).get("module_name", "eos_assets.definitions")


def project_definitions(root: Path) -> dg.Definitions:
    """The definitions of the Dagster project at ``root``: its module's ``defs`` (a
    ``Definitions``, or the function ``@dg.definitions`` makes).

    Raises:
        ConfigError: the module cannot be imported, does not load or has no ``defs`` (one
            line).
        EosError: a declaration or a setting is wrong (its one line).
    """
    name = definitions_module(root)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"the project's definitions {name} cannot be imported ({exc}): install the project "
            "into this environment (`pip install -e .`)"
        ) from None
    defs = getattr(module, "defs", None)
    if callable(defs) and not isinstance(defs, dg.Definitions):
        from eos_assets.components.event_stream import product_error

        try:
            defs = defs()
        except Exception as exc:  # the component loader wraps a declaration's one line
            error = product_error(exc)
            if isinstance(error, EosError):
                raise error from None
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"{name} does not load: {first} (`dg check defs` reports why)"
            ) from None
    if not isinstance(defs, dg.Definitions):
        raise ConfigError(f"{name} has no Definitions named defs: define it as `dg` expects")
    return defs


def failure_line(event: dg.DagsterEvent) -> str:
    """The product's line of a failure event: a step's ``dg.Failure`` description, else the
    error's message, else Dagster's own (``Execution of step ... failed.``)."""
    if event.is_step_failure:
        data = event.step_failure_data
        if data.user_failure_data is not None and data.user_failure_data.description:
            return data.user_failure_data.description
        error = data.error
        while error is not None and error.cause is not None:  # the user code's own error
            error = error.cause
        if error is not None:
            return error.message.strip()
    return event.message or "see the run in `make ui`"


def summary_line(key: dg.AssetKey, meta: Mapping[str, object]) -> str:
    """The summary line of one materialized asset: its key and the counts it reports."""
    shown = ", ".join(f"{k} {meta[k]}" for k in _SHOWN.get(key.path[-1], _COUNTS) if k in meta)
    return f"  {key.to_user_string()}" + (f": {shown}" if shown else "")
