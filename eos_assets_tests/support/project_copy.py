"""A fresh copy of the project (the package, ``pyproject.toml``, the local instance's config)
that the command lines (`dagster`, `dg`, `eos-assets`) run on, as a user's clone.

The copy is put first on ``PYTHONPATH``, so the commands of this virtual environment import
the copy's ``eos_assets``, not the installed one.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class ProjectCopy:
    """A copy of the project at ``root`` with a ``DAGSTER_HOME`` of its own."""

    root: Path

    @property
    def streams(self) -> Path:
        return self.root / "eos_assets" / "streams"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EOS_", "DAGSTER_"))}
        env.pop("VIRTUAL_ENV", None)
        env.update(
            DAGSTER_HOME=str(self.root / "dagster_home"),
            PYTHONPATH=str(self.root),
            EOS_STATE_DIR=str(self.root / ".eos"),
            NO_COLOR="1",
            COLUMNS="200",
        )
        return env

    def run(self, *command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run ``command`` (its first word a program of this virtual environment) in the copy."""
        argv = [str(BIN / command[0]), *command[1:]]
        return subprocess.run(
            argv, cwd=self.root, env=self.env(), capture_output=True, text=True, timeout=timeout
        )


def copy_project(root: Path) -> ProjectCopy:
    """Copy the project into ``root`` (created), without caches."""
    shutil.copytree(
        REPO / "eos_assets",
        root / "eos_assets",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "dagster.local.yaml", home / "dagster.yaml")
    return ProjectCopy(root)
