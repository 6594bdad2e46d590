"""Where the Java parts installed from Maven Central live: one folder per pom under the jars
root (``settings.read_jars_root``: ``EOS_JARS_DIR``, a checkout's ``.jars`` or the user's cache).

``eos-assets jars`` (``make install`` runs it) fills ``<root>/<name>`` from
``eos_assets/maven/<name>/pom.xml``; nothing is downloaded at run time.
"""

from pathlib import Path

from eos_assets.lib.errors import ConfigError
from eos_assets.settings import read_jars_root

# The option of `eos-assets jars` that fetches a pom's jars, when they are not fetched always.
_OPTION = {
    "s3": " --s3",
    "s3proxy": " --s3",
    "spark-kafka": " --peers",
    "kafka-streams": " --peers",
    "registry": " --registry",
    "avro": " --registry",
}


def jar_dir(name: str) -> Path:
    """Return the folder of the jars of pom ``name`` (``kafka``, ``spark``, ...).

    Raises:
        ConfigError: the folder holds no jar: they were never installed (one line with the fix).
    """
    folder = read_jars_root() / name
    if not any(folder.glob("*.jar")):
        raise _missing(name, folder)
    return folder


def distribution(name: str, marker: str) -> Path:
    """Return the folder of pom ``name``'s unpacked distribution: the one holding ``marker``.

    Raises:
        ConfigError: it was never installed (one line with the fix).
    """
    folder = read_jars_root() / name
    found = sorted(folder.glob(f"*/**/{marker}"))
    if not found:
        raise _missing(name, folder)
    return found[0].parent


def _missing(name: str, folder: Path) -> ConfigError:
    return ConfigError(
        f"the {name} jars are missing in {folder}: run `eos-assets jars{_OPTION.get(name, '')}`"
        " (it fetches them there with Maven), or set EOS_JARS_DIR to where they are"
    )


def classpath(name: str) -> str:
    """Return a Java class path of every jar of pom ``name``."""
    return str(jar_dir(name) / "*")


def jar_files(name: str) -> list[Path]:
    """Return every jar of pom ``name``, sorted by name (a list for ``spark.jars``)."""
    return sorted(jar_dir(name).glob("*.jar"))
