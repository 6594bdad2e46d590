"""Where the jars are found: ``EOS_JARS_DIR``, and one line with the fix when they are missing."""

from pathlib import Path

import pytest

from eos_assets.lib.errors import ConfigError
from eos_assets.lib.spark.jars import classpath, jar_dir, jar_files


def test_the_jars_of_a_pom_under_eos_jars_dir(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "kafka"
    folder.mkdir()
    for name in ("kafka-clients.jar", "a-first.jar", "notes.txt"):
        (folder / name).write_text("")
    monkeypatch.setenv("EOS_JARS_DIR", str(tmp_path))
    assert jar_dir("kafka") == folder.resolve()
    assert classpath("kafka") == f"{folder.resolve()}/*"
    assert jar_files("kafka") == [
        folder.resolve() / "a-first.jar",
        folder.resolve() / "kafka-clients.jar",
    ]


@pytest.mark.parametrize("made", [True, False], ids=["empty folder", "no folder"])
def test_missing_jars_are_one_line_with_the_fix(tmp_path: Path, monkeypatch, made: bool) -> None:
    if made:
        (tmp_path / "spark").mkdir()
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "kafka.jar").write_text("")  # another pom's jars do not count
    monkeypatch.setenv("EOS_JARS_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        jar_files("spark")
    assert str(raised.value) == (
        f"the spark jars are missing in {tmp_path.resolve() / 'spark'}: run `eos-assets jars` "
        "(it fetches them there with Maven), or set EOS_JARS_DIR to where they are"
    )
