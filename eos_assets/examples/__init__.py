"""Declared streams shipped as examples, not loaded by default: one ``<stream>/defs.yaml`` each.

Copy a folder under ``eos_assets/streams/`` (or point a defs folder at it) to load it.
"""

from pathlib import Path

FOLDER = Path(__file__).parent


def declaration(stream: str) -> Path:
    """The declaration file of an example stream."""
    return FOLDER / stream / "defs.yaml"


def shipped(stream: str) -> Path:
    """The declaration file of a shipped stream (``eos_assets/streams``) or, failing that, of
    an example."""
    from eos_assets import streams

    found = streams.declaration(stream)
    return found if found.exists() else declaration(stream)
