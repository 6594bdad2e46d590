"""``EventStream``: the Dagster component a stream is declared with (``<stream>/defs.yaml``).

Loading a declaration checks it whole (``check``, the KPI SQL against the tables it names, and
that no two streams share a name or a topic) and fails with one line naming the file, the field
and the fix. ``builtin.py`` says what a stream gets (DESIGN.md, "Declared streams").

Each stream brings the resources its assets use (configured from the ``EOS_*`` settings, and
its own Kafka, lake or warehouse where it declares them, under its own keys) and the in-process
executor, the same objects for every stream configured alike (``shared.py``): a stream
scaffolded into any Dagster project loads and runs there. What spans streams (the jobs over
every stream, the maintenance schedule, the automation sensor) a project adds with
``with_cross_stream`` in its ``definitions.py``.
"""

import warnings
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg

from eos_assets.components import builtin
from eos_assets.components.scaffold import EventStreamScaffolder
from eos_assets.components.shared import build_shared, rebound, stream_runtime
from eos_assets.declaration import (
    DECLARATION,
    TYPE,
    DeclarationError,
    StreamModel,
    check,
    check_kpis,
    check_placement,
    check_together,
    describe,
    precheck,
)
from eos_assets.lib.errors import ConfigError, EosError
from eos_assets.settings import Settings

# What Dagster's component loader warns about on every load (the loader, the code references
# it adds to each asset, the scaffolders it looks up, the owners of sensors, the checks of a
# repository) is Dagster's own use of its beta and preview parts, which no declaration can
# change: those warnings, and only those (by category and by the module that issues them), are
# left out wherever this component is imported: the definitions, `dagster`, `dg`, the code
# servers.
_LOADER_MODULES = (
    r"dagster\.(components|_core\.definitions\."
    r"(module_loaders|sensor_definition|repository_definition))\b"
)
for _category in (dg.BetaWarning, dg.PreviewWarning):
    warnings.filterwarnings("ignore", category=_category, module=_LOADER_MODULES)


# The declarations of the definitions being loaded, by file: what check_together compares.
# By project root: a process that loads several projects compares each project's streams only.
_LOADED: dict[Path, dict[str, StreamModel]] = {}


@dg.scaffold_with(EventStreamScaffolder)
class EventStream(dg.Component, StreamModel):
    """An event stream from Kafka topics into Delta tables and DuckDB KPIs, exactly once.

    Declares the topics, the start position of partitions never read, the event id and
    event-time fields, the payload schema (fields not named stay in the raw value), the entity
    state and how each field folds, the event-time windows (size, grace, dimensions, measures),
    the KPIs (measures per period and fields, kept batch by batch, or SQL over
    ``window_aggregates`` and ``entity_state``), those served in DuckDB, the alert rules over
    them, the thresholds of the lag sensor and the checks, and the mode.
    """

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        source = describe(context.path / DECLARATION, context.project_root)
        check(self, source)
        check_kpis(self, source)
        loaded = _LOADED.setdefault(Path(context.project_root).resolve(), {})
        loaded[source] = self
        check_together([(model, src) for src, model in loaded.items()])
        settings = Settings.from_env()
        check_placement(self, source, settings.lake_root)
        return dg.Definitions.merge(builtin.definitions(self), stream_runtime(self, settings))


def with_cross_stream(
    defs: dg.Definitions, resources: Mapping[str, Any] | None = None
) -> dg.Definitions:
    """``defs`` (a project's loaded defs folder) with what spans its declared streams: the jobs
    over every stream, the maintenance schedule and the automation sensor.

    In a project's ``definitions.py``, ``return with_cross_stream(loaded)`` where ``loaded`` is
    ``dg.load_from_defs_folder(path_within_project=Path(__file__).parent)``.

    Args:
        defs: the definitions of the project's defs folder.
        resources: resources of the project's own in place of those the streams bring, by
            key (``kafka``, ``pyspark``, ``lake``, ``warehouse``, ``alerts``; a stream's own,
            ``kafka__<stream>`` ..., by its key).

    Raises:
        ConfigError: ``defs`` were not loaded from a defs folder, or declare no stream.
    """
    tree = defs.component_tree
    models = [] if tree is None else tree.get_all_components(of_type=EventStream)
    if not models:
        raise ConfigError(
            "with_cross_stream found no EventStream: pass it the Definitions of "
            "dg.load_from_defs_folder(...), after `dg scaffold defs eos_assets.components."
            "EventStream <stream>`"
        )
    merged = dg.Definitions.merge(defs, build_shared(models, Settings.from_env()))
    if not resources:
        return merged
    return rebound(merged, {**(merged.resources or {}), **resources}, dg.in_process_executor)


def load_streams(
    defs_root: ModuleType, project_root: Path
) -> tuple[dg.Definitions, list[StreamModel]]:
    """Load every declaration under the module ``defs_root``: their definitions, without the
    resources and executor the components bring (the caller binds its own), and models.

    Each ``defs.yaml`` is read and checked here first, so that a wrong type, an unknown or
    missing field or a value of the wrong kind is one line naming the file and the field,
    rather than the component loader's report.

    Raises:
        DeclarationError: a declaration is wrong (one line: file, field, fix).
    """
    folder = Path(str(defs_root.__file__)).parent
    files = sorted(folder.rglob(DECLARATION))
    if not files:
        raise DeclarationError(
            describe(folder, project_root),
            "(folder)",
            "no stream is declared",
            f"add a <stream>/{DECLARATION} of type {TYPE}",
        )
    for path in files:
        precheck(path, describe(path, project_root))
    _LOADED.pop(project_root.resolve(), None)
    tree = dg.ComponentTree.from_module(defs_module=defs_root, project_root=project_root)
    try:
        defs = tree.build_defs()
    except Exception as exc:  # the component loader wraps what build_defs raised
        raise product_error(exc) from None
    return rebound(defs, None, None), list(tree.get_all_components(of_type=EventStream))


def product_error(exc: Exception) -> Exception:
    """The error of the product (a DeclarationError, a ConfigError of a setting) that a
    component raised, out of the loader's wrapping."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, EosError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return exc
