"""``eos-assets jars``: which poms, the jars root outside the installed package, a folder
fetched again only when its pom changed, and one line when Maven is missing."""

import hashlib
from pathlib import Path

import pytest

from eos_assets.devkit import maven
from eos_assets.lib.errors import ConfigError
from eos_assets.settings import read_jars_root


def test_optional_jars_only_when_asked_and_every_pom_ships_with_the_package() -> None:
    assert maven.wanted(s3=False, peers=False) == ["kafka", "delta"]
    assert set(maven.wanted(s3=True, peers=False)) == {"kafka", "delta", "s3", "s3proxy"}
    with_registry = ["kafka", "delta", "registry", "avro"]
    assert maven.wanted(s3=False, peers=False, registry=True) == with_registry
    for name in maven.wanted(s3=True, peers=True, registry=True):
        assert (maven.POMS / name / "pom.xml").is_file(), name


def test_the_jars_root_is_eos_jars_dir_else_outside_the_installed_package(tmp_path: Path) -> None:
    assert read_jars_root({"EOS_JARS_DIR": str(tmp_path)}) == tmp_path.resolve()
    root = read_jars_root({"XDG_CACHE_HOME": str(tmp_path)})
    checkout = Path(maven.__file__).resolve().parents[2]
    assert root in (checkout / ".jars", tmp_path / "eos_assets" / "jars")
    assert "site-packages" not in root.parts


def test_fresh_folders_need_no_maven_and_a_changed_pom_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    for name in ("kafka", "delta"):
        pom = (maven.POMS / name / "pom.xml").read_bytes()
        (tmp_path / name).mkdir()
        (tmp_path / name / ".installed").write_text(hashlib.sha256(pom).hexdigest())
    assert maven.fetch(["kafka", "delta"], tmp_path) == []
    (tmp_path / "delta" / ".installed").write_text("a digest of another pom")
    with pytest.raises(ConfigError) as missing:
        maven.fetch(["kafka", "delta"], tmp_path)
    assert str(missing.value).startswith("Maven is missing: install it")
    assert "\n" not in str(missing.value)
