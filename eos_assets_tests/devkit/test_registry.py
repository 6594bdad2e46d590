"""``eos-assets registry up|down|status``: the real Apicurio Registry, listening on 127.0.0.1
only, its schemas kept across ``down``/``up`` and its compatibility BACKWARD; one line when its
Java or its distribution is missing."""

import contextlib
import ipaddress
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eos_assets import cli
from eos_assets.devkit import registry
from eos_assets.lib.errors import ConfigError, JavaMissingError
from eos_assets.lib.spark import java

ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
# A required field added without a default: records written with v1 cannot be read with it.
ORDER_BREAKING = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "sku", "type": "string"}]}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "sku", "type": ["null", "string"], "default": None}],
}


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The state folder of ``eos-assets``; its registry is stopped after the test."""
    monkeypatch.setenv("EOS_STATE_DIR", str(tmp_path / "state"))
    yield tmp_path / "state"
    registry.down(tmp_path / "state")


def register(url: str, subject: str, schema: dict[str, object]) -> int:
    """Register ``schema`` under ``subject`` through the Confluent API; its id."""
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=json.dumps({"schema": json.dumps(schema)}).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["id"]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def listening(pid: int) -> set[tuple[str, int]]:
    """The local (address, port) of every TCP socket of process ``pid`` that listens; an IPv4
    address mapped into IPv6 (``::ffff:127.0.0.1``) as its IPv4 form."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # closed since the listing
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            host, port = fields[1].split(":")
            # The kernel writes each 32-bit word of the address in host (little-endian) order.
            packed = b"".join(bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, len(host), 8))
            address = ipaddress.ip_address(packed)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                address = address.ipv4_mapped
            found.add((str(address), int(port, 16)))
    return found


def test_up_listens_on_127_0_0_1_only_keeps_its_schemas_and_refuses_a_breaking_one(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["registry", "up"]) == 0
    url = capsys.readouterr().out.strip()
    info = registry.registry_status(state_dir)
    assert info is not None and info.url == url and url.endswith("/apis/ccompat/v7")
    port = int(url.split(":")[2].split("/")[0])
    loopback = {("127.0.0.1", port), ("127.0.0.1", info.management_port)}
    assert listening(info.pid) == loopback  # both ports, neither on another interface

    first = register(url, "orders-value", ORDER_V1)
    assert get(f"{url}/config") == {"compatibilityLevel": "BACKWARD"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        register(url, "orders-value", ORDER_BREAKING)
    assert refused.value.code == 409
    second = register(url, "orders-value", ORDER_V2)
    assert second != first

    assert cli.main(["registry", "down"]) == 0 and cli.main(["registry", "status"]) == 1
    assert cli.main(["registry", "up"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == url  # the same port, the same schemas
    assert get(f"{url}/subjects/orders-value/versions") == [1, 2]
    assert json.loads(get(f"{url}/schemas/ids/{first}")["schema"]) == ORDER_V1
    assert cli.main(["registry", "status"]) == 0


def test_no_java_21_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java_17 = java.require_java()
    assert (java.java_version(java_17) or 0) < registry.JAVA, "this test needs a Java 17 first"
    monkeypatch.setenv("JAVA_HOME", str(Path(java_17).parents[1]))
    monkeypatch.setattr(java, "JVM_ROOT", tmp_path)  # no other runtime installed
    with pytest.raises(JavaMissingError) as missing:
        registry.start_registry(tmp_path / "registry")
    message = str(missing.value)
    assert "\n" not in message
    assert message.startswith("the schema registry needs Java 21 or newer; found Java 17")
    assert message.endswith("install one and set JAVA_HOME")


def test_a_registry_never_installed_is_one_line_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EOS_JARS_DIR", str(tmp_path))
    with pytest.raises(ConfigError) as missing:
        registry.start_registry(tmp_path / "registry")
    assert str(missing.value).startswith(f"the registry jars are missing in {tmp_path}/registry")
    assert "`eos-assets jars --registry`" in str(missing.value)
