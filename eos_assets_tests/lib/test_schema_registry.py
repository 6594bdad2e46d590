"""The writer schemas of registry-framed values, from the session's real registry: a topic's
subject fetched once on the driver, any other id fetched once per process, 404 as "no such
schema", and one line naming the URL for anything else."""

import base64
import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from eos_assets.lib import schema_registry
from eos_assets.lib.contract.avro_careful import AvroInvalid, Reader, decode
from eos_assets.lib.errors import RegistryError, raised_in
from eos_assets.lib.ports import free_port
from eos_assets.lib.schema_registry import RegistryConfig, prefetch
from eos_assets_tests.support.registry import register

V1 = {"type": "record", "name": "Click", "fields": [{"name": "id", "type": "string"}]}
V2 = {
    **V1,
    "fields": [*V1["fields"], {"name": "page", "type": ["null", "string"], "default": None}],
}
OTHER = {"type": "record", "name": "Other", "fields": [{"name": "n", "type": "long"}]}


@pytest.fixture
def url(schema_registry: str) -> str:
    return schema_registry


def read(reader: Reader | None, payload: bytes) -> object:
    assert reader is not None, "the registry has the schema"
    return decode(reader, payload)


@dataclass
class Proxy:
    """A proxy in front of the registry that wants basic auth and records the paths asked."""

    url: str
    paths: list[str]


@pytest.fixture
def proxy(url: str) -> Iterator[Proxy]:
    paths: list[str] = []
    token = "Basic " + base64.b64encode(b"reader:s3cret").decode()

    class Forward(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != token:
                self.send_response(401)
                self.end_headers()
                return
            paths.append(self.path)
            try:
                with urllib.request.urlopen(url + self.path, timeout=10) as answer:
                    status, body = answer.status, answer.read()
            except urllib.error.HTTPError as failed:
                status, body = failed.code, failed.read()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Proxy(f"http://127.0.0.1:{server.server_address[1]}", paths)
    finally:
        server.shutdown()
        server.server_close()


def test_the_subjects_of_a_read_are_fetched_once_and_other_ids_once_per_process(
    url: str, proxy: Proxy
) -> None:
    first, second = register(url, "clicks-value", V1), register(url, "clicks-value", V2)
    other = register(url, "elsewhere-value", OTHER)
    config = RegistryConfig(proxy.url, "reader", "s3cret")
    book = prefetch(config, ["clicks", "never-registered"])
    assert [i for i, _ in book.schemas] == sorted([first, second])
    asked = len(proxy.paths)
    assert asked == 4  # two subjects' version lists, then the two versions of one of them

    readers = book.readers([first, second, other, 999_999])
    assert read(readers[first], b"\x02a") == {"id": "a"}
    assert read(readers[second], b"\x02a\x02\x02p") == {"id": "a", "page": "p"}
    assert read(readers[other], b"\x04") == {"n": 2}
    assert readers[999_999] is None
    assert proxy.paths[asked:] == [f"/schemas/ids/{other}", "/schemas/ids/999999"]
    book.readers([other, 999_999])  # known to this process now: the registry is not asked
    assert len(proxy.paths) == asked + 2
    assert book.unknown(999_999) == f"the registry at {proxy.url} has no schema 999999"


def test_a_schema_of_another_type_reads_as_a_reason(url: str) -> None:
    proto = 'syntax = "proto3"; message Click { string id = 1; }'
    schema_id = register(url, "proto-clicks-value", proto, "PROTOBUF")
    book = prefetch(RegistryConfig(url), ["proto-clicks"])
    with pytest.raises(AvroInvalid) as other:
        read(book.readers([schema_id])[schema_id], b"\x02a")
    assert other.value.detail == "the schema is PROTOBUF, not AVRO"


def test_a_registry_that_refuses_or_is_gone_is_one_line_naming_it(proxy: Proxy) -> None:
    with pytest.raises(RegistryError) as refused:
        prefetch(RegistryConfig(proxy.url, "reader", "wrong"), ["clicks"])
    assert str(refused.value) == (
        f"the schema registry at {proxy.url} refused the credentials (401): check "
        "EOS_SCHEMA_REGISTRY_USERNAME and EOS_SCHEMA_REGISTRY_PASSWORD"
    )
    gone = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    with pytest.raises(RegistryError) as down:
        prefetch(RegistryConfig(gone), ["clicks"])
    message = str(down.value)
    assert message.startswith(f"the schema registry at {gone} did not answer (")
    assert message.endswith("start it (eos-assets registry up) or fix EOS_SCHEMA_REGISTRY_URL; "
                            "nothing was committed")  # fmt: skip
    assert "\n" not in message
    # Raised in a Spark task, it reaches the driver as the same one line.
    rebuilt = raised_in(f"Traceback ...\neos_assets.lib.errors.RegistryError: {message}\n")
    assert isinstance(rebuilt, RegistryError) and str(rebuilt) == message


def test_the_password_is_not_in_the_config_repr() -> None:
    assert "s3cret" not in repr(RegistryConfig("http://r", "reader", "s3cret"))
    assert schema_registry.TIMEOUT_S <= 10
