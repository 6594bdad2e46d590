"""The Java check that the broker and Spark share: missing, too old, or good enough."""

from pathlib import Path

import pytest

from eos_assets.lib.errors import JavaMissingError
from eos_assets.lib.spark.java import java_version, require_java


def fake_java(home: Path, banner: str) -> Path:
    """A ``bin/java`` under ``home`` that prints ``banner`` as ``java -version`` does."""
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(0o755)
    return java


@pytest.mark.parametrize(
    ("banner", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "25" 2025-09-16', 25),
        ('java version "1.8.0_402"', 8),
        ('openjdk version "11.0.22" 2024-01-16', 11),
    ],
)
def test_major_version_is_read_from_the_banner(tmp_path: Path, banner: str, major: int) -> None:
    assert java_version(str(fake_java(tmp_path, banner))) == major


def test_an_old_java_is_refused_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = fake_java(tmp_path, 'openjdk version "11.0.22" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaMissingError) as caught:
        require_java("the embedded Kafka broker")
    assert str(caught.value) == (
        f"{java} is Java 11 and the embedded Kafka broker needs Java 17 or newer: install a "
        "Java 17 runtime (Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
    )


def test_java_17_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert require_java() == str(java)
