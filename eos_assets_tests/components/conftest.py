"""Fixtures of the declared-stream tests."""

import importlib
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eos_assets.components.event_stream import load_streams
from eos_assets_tests.support.declared import Loader


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Loader:
    """Write declarations ``{folder: document or text}`` as a defs package and load them."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write_and_load(declarations: dict[str, dict | str]) -> tuple[dg.Definitions, list]:
        package = f"decl_{uuid.uuid4().hex[:8]}"
        root = tmp_path / package
        root.mkdir()
        (root / "__init__.py").write_text("")
        for folder, document in declarations.items():
            (root / folder).mkdir()
            text = (
                document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False)
            )
            (root / folder / "defs.yaml").write_text(text)
        importlib.invalidate_caches()
        module = importlib.import_module(package)
        try:
            return load_streams(module, tmp_path)
        finally:
            sys.modules.pop(package, None)

    return write_and_load
