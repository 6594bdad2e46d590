"""The defs folder of declared streams: one ``<stream>/defs.yaml`` of ``EventStream`` each."""

from pathlib import Path

FOLDER = Path(__file__).parent


def declaration(stream: str) -> Path:
    """The declaration file of a shipped stream."""
    return FOLDER / stream / "defs.yaml"
