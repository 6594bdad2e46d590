"""``eos-assets broker up --nodes 3 --secure`` without a cluster: what it prints, the users it
keeps, and the refusal of ``--secure`` on one node (the secured cluster itself is tested in
``faults/test_cluster_security.py``)."""

import shlex
import stat
from pathlib import Path

import pytest

from eos_assets.cli import main
from eos_assets.devkit import cluster_security
from eos_assets.settings import Settings


def test_the_exports_point_the_product_at_the_secured_listener_as_its_user(
    tmp_path: Path,
) -> None:
    users = cluster_security.local_users(tmp_path)
    assert set(users) == {cluster_security.ADMIN, cluster_security.PRODUCT}
    assert stat.S_IMODE((tmp_path / "users.json").stat().st_mode) == 0o600
    assert cluster_security.local_users(tmp_path) == users  # made once
    password = users[cluster_security.PRODUCT]
    lines = cluster_security.exports("127.0.0.1:1,127.0.0.1:2", "/ca dir/ca.pem", password)
    env = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in lines)
    settings = Settings.from_env(env)
    assert settings.kafka_bootstrap == "127.0.0.1:1,127.0.0.1:2"
    want = cluster_security.client_config(cluster_security.PRODUCT, password, "/ca dir/ca.pem")
    assert dict(settings.kafka_client) == want
    assert [line for line in lines if password in line] == [
        f"export EOS_KAFKA_SASL_PASSWORD={password}"
    ]


def test_secure_needs_the_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "up", "--secure"]) == 2
    assert capsys.readouterr().err == (
        "eos-assets: --secure needs a cluster: `eos-assets broker up --nodes 3 --secure`\n"
    )
