"""``eos-assets jars``: the Java parts from Maven Central, fetched with Maven into the jars
folder (``EOS_JARS_DIR``, a checkout's ``.jars``, else the user's cache: ``settings``).

One folder per pom of ``eos_assets/maven/`` (shipped with the package): ``kafka`` (the
embedded broker and Kafka's tools) and ``delta`` (Delta for Spark) always; ``s3`` (Spark's
s3a, about 690 MB) and ``s3proxy`` (the local S3 server) for a lake on S3; ``spark-kafka`` and
``kafka-streams`` for the bench's peers; ``registry`` (Apicurio Registry's distribution, unpacked
into ``registry/app``) for the local schema registry, with ``avro`` (Apache Avro's Java library
and Kafka's Java client, for the tests' producer that is not ours). A folder is fetched again
only when its pom changed.
"""

import hashlib
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from eos_assets.lib.errors import ConfigError, EosError

POMS = Path(__file__).resolve().parents[1] / "maven"
BASE = ("kafka", "delta")
S3 = ("s3", "s3proxy")
PEERS = ("spark-kafka", "kafka-streams")
REGISTRY = ("registry", "avro")
# The folder a fetched distribution (a .tar.gz) is unpacked into, inside its pom's folder.
UNPACKED = "app"


def wanted(s3: bool, peers: bool, registry: bool = False) -> list[str]:
    """The poms to fetch: the base ones, with those of a lake on S3, of the bench's peers and
    of the schema registry when asked."""
    return [
        *BASE, *(S3 if s3 else ()), *(PEERS if peers else ()), *(REGISTRY if registry else ()),
    ]  # fmt: skip


def fetch(names: Sequence[str], root: Path) -> list[str]:
    """Fetch the jars of each pom in ``names`` into ``root/<name>``; return those fetched now.

    Raises:
        ConfigError: Maven is missing (one line with the fix).
        EosError: Maven could not fetch a pom's jars (one line).
    """
    stale = {}
    for name in names:
        pom = POMS / name / "pom.xml"
        digest = hashlib.sha256(pom.read_bytes()).hexdigest()
        if not _fresh(root / name / ".installed", pom, digest):
            stale[name] = digest
    mvn = shutil.which("mvn")
    if stale and mvn is None:
        raise ConfigError(
            "Maven is missing: install it (Debian: `sudo apt-get install -y maven`), with a "
            "Java 17 or newer, then run `eos-assets jars` again"
        )
    for name, digest in stale.items():
        pom, folder = POMS / name / "pom.xml", root / name
        shutil.rmtree(folder, ignore_errors=True)
        command = [
            str(mvn), "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={folder}",
        ]  # fmt: skip
        # Quiet when it works; its own last error line when it does not.
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors = [line for line in done.stdout.splitlines() if "ERROR" in line]
            cause = errors[0].strip() if errors else f"exit status {done.returncode}"
            raise EosError(
                f"Maven could not fetch the jars of {pom} ({cause}): check that Maven Central "
                "is reachable (or Maven's proxy settings), then run `eos-assets jars` again"
            )
        for archive in folder.glob("*.tar.gz"):
            with tarfile.open(archive) as packed:
                packed.extractall(folder / UNPACKED, filter="data")
            archive.unlink()
        (folder / ".installed").write_text(digest)
    return list(stale)


def _fresh(stamp: Path, pom: Path, digest: str) -> bool:
    """Whether the folder of ``stamp`` holds the jars of ``pom`` as it is now: the stamp holds
    the pom's digest, or it is the empty stamp of `make` (before this command) and newer."""
    if not stamp.is_file():
        return False
    text = stamp.read_text()
    return text == digest or (not text and stamp.stat().st_mtime >= pom.stat().st_mtime)
