"""The local Dagster instance's configuration file, written where it is missing.

Dagster warns on every instance it opens when ``$DAGSTER_HOME`` holds no ``dagster.yaml``
(``dagster/_core/instance/config.py``: "No dagster instance configuration file ... found").
``make demo`` and ``make ui`` copy ``deploy/dagster.local.yaml`` there; the ``eos-assets``
commands that open an instance write the same file first, so none of them warns.
"""

import os
import shutil
from pathlib import Path

LOCAL_CONFIG = Path(__file__).resolve().parent.parent / "deploy" / "dagster.local.yaml"


def ensure_instance_config() -> Path | None:
    """Write ``$DAGSTER_HOME/dagster.yaml`` (the local instance's) when it is missing.

    Returns:
        The file written, or None when ``DAGSTER_HOME`` is unset or already has one.
    """
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        return None
    target = Path(home) / "dagster.yaml"
    if target.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    if LOCAL_CONFIG.exists():
        shutil.copyfile(LOCAL_CONFIG, target)
    else:  # installed without the project's deploy/ folder: Dagster's defaults
        target.write_text("# Dagster's default local instance (written by eos-assets).\n")
    return target
