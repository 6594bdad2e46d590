"""Where the Java parts installed from Maven Central live: one folder per pom under ``.jars``.

``make install`` fills ``.jars/<name>`` from ``deploy/maven/<name>/pom.xml``; nothing is
downloaded at run time. ``EOS_JARS_DIR`` points at another root (an image that installed them
elsewhere).
"""

import os
from pathlib import Path

from eos_assets.lib.errors import ConfigError

# eos_assets/lib/spark/jars.py -> the repository (or install) root that holds .jars.
_DEFAULT_ROOT = Path(__file__).resolve().parents[3] / ".jars"


def jars_root() -> Path:
    """Return the root folder of the installed jars (``EOS_JARS_DIR`` or ``<project>/.jars``)."""
    configured = os.environ.get("EOS_JARS_DIR")
    return Path(configured).resolve() if configured else _DEFAULT_ROOT


def jar_dir(name: str) -> Path:
    """Return the folder of the jars of pom ``name`` (``kafka``, ``spark``, ...).

    Raises:
        ConfigError: the folder holds no jar: they were never installed (one line with the fix).
    """
    folder = jars_root() / name
    if not any(folder.glob("*.jar")):
        raise ConfigError(
            f"the {name} jars are missing in {folder}: run `make install` "
            "(it fetches them with Maven), or set EOS_JARS_DIR to where they are"
        )
    return folder


def classpath(name: str) -> str:
    """Return a Java class path of every jar of pom ``name``."""
    return str(jar_dir(name) / "*")


def jar_files(name: str) -> list[Path]:
    """Return every jar of pom ``name``, sorted by name (a list for ``spark.jars``)."""
    return sorted(jar_dir(name).glob("*.jar"))
