"""Reading the deployment files for the tests: the settings the code knows, the compose
services, the Dockerfile's instructions and the Makefile's install command."""

import ast
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

import eos_assets

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PACKAGE = Path(eos_assets.__file__).parent
_SETTING = re.compile(r"^EOS_[A-Z0-9_]*[A-Z0-9]$")


def settings_read_by(path: Path) -> set[str]:
    """Every ``EOS_*`` name that appears as a string constant in the Python file ``path``."""
    tree = ast.parse(path.read_text())
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _SETTING.match(node.value)
    }


def known_settings() -> set[str]:
    """Every ``EOS_*`` variable the product reads: named in its code, settings.py first."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        names |= settings_read_by(path)
    return names


def compose() -> dict[str, Any]:
    """deploy/docker-compose.yaml, parsed (YAML anchors and merge keys resolved)."""
    return yaml.safe_load((DEPLOY / "docker-compose.yaml").read_text())


def env(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as strings (mapping or ``KEY=VALUE`` list)."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {str(k): str(v) for k, v in raw.items()}


def command(service: dict[str, Any]) -> list[str]:
    """A service's command as a list of words."""
    raw = service.get("command") or []
    return shlex.split(raw) if isinstance(raw, str) else [str(word) for word in raw]


def option(words: list[str], name: str) -> str:
    """The value after ``name`` in a command line."""
    assert name in words, f"{name} missing in {words}"
    return words[words.index(name) + 1]


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """Container path -> source (named volume or path relative to deploy/) of each mount."""
    out = {}
    for item in service.get("volumes") or []:
        source, target = item.split(":")[:2]
        out[target] = source
    return out


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            steps.append((instruction.upper(), " ".join(rest.split())))
    return steps


def pip_installs(text: str) -> list[list[str]]:
    """The words after ``pip install`` of every command in ``text`` (up to ``&&`` or the end)."""
    found = []
    for match in re.finditer(r"pip install (.+?)(?:&&|$)", text, re.MULTILINE):
        found.append(shlex.split(match.group(1)))
    return found


def makefile_install() -> list[str]:
    """The one ``pip install`` of the Makefile's install target."""
    recipe = (REPO / "Makefile").read_text().split("$(STAMP): pyproject.toml constraints.txt")[1]
    recipe = recipe.split("\n\n")[0]
    installs = pip_installs(recipe)
    assert len(installs) == 1, installs
    return installs[0]
