"""The one entry point: the declared streams (``eos_assets/streams/``, one ``EventStream``
component each) with their assets, checks and lag sensors; the jobs, schedules and automation
sensor over all of them; and the resources.

A failure the user can fix while they load (a wrong declaration, a wrong setting) stops them
as a ``LoadError``: the UI's error of the code location is its one line, without a stack trace.
"""

from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterUserCodeProcessError
from dagster_shared.error import SerializableErrorInfo

from eos_assets.lib.errors import EosError


class LoadError(EosError, DagsterUserCodeProcessError):
    """A failure the user can fix, raised while the definitions load; its cause is the original.

    Dagster shows the error a ``DagsterUserCodeProcessError`` carries in place of the exception
    and its stack, and lets it through its boundary around user code unwrapped: the carried
    error is the one line, with no stack and no cause. That class is not exported by dagster,
    but no exported one keeps the stack trace out of the UI
    (``eos_assets_tests/ui/test_load_errors.py`` fails if that changes).
    """

    def __init__(self, message: str, kind: str) -> None:
        shown = SerializableErrorInfo(message=message, stack=[], cls_name=kind)
        DagsterUserCodeProcessError.__init__(self, message, user_code_process_error_infos=[shown])
        self.kind = kind


# A command line that imports this module (`dagster`, `dg`) prints the traceback of what it
# raises: raised ``from None``, that traceback is the importer's frames and this module's one
# line, ended by the product's line, with neither the stack nor the line of its cause.
# Importing the assets reads the shipped declaration already.
try:
    import eos_assets.streams
    from eos_assets.components.event_stream import load_streams
    from eos_assets.components.shared import build_shared
    from eos_assets.declaration import StreamModel
    from eos_assets.settings import Settings
except EosError as exc:
    raise LoadError(str(exc), type(exc).__name__) from None


def _definitions() -> tuple[dg.Definitions, list[StreamModel]]:
    declared, streams = load_streams(eos_assets.streams, Path(__file__).parent.parent)
    return dg.Definitions.merge(declared, build_shared(streams, Settings.from_env())), streams


try:
    defs, streams = _definitions()
except EosError as exc:
    raise LoadError(str(exc), type(exc).__name__) from None
