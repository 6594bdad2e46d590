"""The secured listener of the local cluster: SASL_SSL with SCRAM-SHA-512 and ACLs.

Each node gets a second listener, ``SASL_SSL``, next to its plaintext one. Clients of the
secured listener authenticate with SCRAM-SHA-512 users created when the storage is formatted
(``--add-scram``), verify the brokers' certificate against the cluster's CA (hostname
verification on: the certificate names 127.0.0.1 and localhost) and get only what the
StandardAuthorizer's ACLs grant. The plaintext listener, bound to 127.0.0.1, stays the
administrator's (the principal ``User:ANONYMOUS`` is a super user): the brokers and the
controllers talk over it, and ACLs are created through it.
"""

import contextlib
import json
import secrets
import shlex
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka.admin import (  # documented; the stub hides the ACL types
    AclBinding,  # pyright: ignore[reportPrivateImportUsage]
    AclOperation,  # pyright: ignore[reportPrivateImportUsage]
    AclPermissionType,  # pyright: ignore[reportPrivateImportUsage]
    AdminClient,
    ResourcePatternType,  # pyright: ignore[reportPrivateImportUsage]
    ResourceType,  # pyright: ignore[reportPrivateImportUsage]
)

from eos_assets.devkit.tls import BrokerTls
from eos_assets.devkit.tls import ensure_tls as ensure_tls
from eos_assets.lib.ports import free_port

MECHANISM = "SCRAM-SHA-512"
_PORT_FILE = "secure.port"


def secure_port(folder: Path, avoid: set[int]) -> int:
    """The node's SASL_SSL port: the previous one, or a new free one not in ``avoid``."""
    saved = folder / _PORT_FILE
    with contextlib.suppress(FileNotFoundError, ValueError):
        return int(saved.read_text())
    while (port := free_port()) in avoid:
        pass
    saved.write_text(str(port))
    return port


def listener_properties(port: int, secure: int, controller: int, tls: BrokerTls) -> dict[str, str]:
    """Server properties of a node with a plaintext and a SASL_SSL listener and ACLs."""
    return {
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure},"
            f"CONTROLLER://127.0.0.1:{controller}"
        ),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure}",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": tls.keystore,
        "ssl.keystore.password": tls.password,
        "ssl.key.password": tls.password,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_arguments(users: Mapping[str, str]) -> list[str]:
    """``kafka-storage format`` arguments that create ``users`` (name -> password)."""
    args: list[str] = []
    for name, password in users.items():
        args += ["--add-scram", f"{MECHANISM}=[name={name},password={password}]"]
    return args


def client_config(user: str, password: str, ca_pem: str) -> dict[str, str]:
    """librdkafka properties of a client of the secured listener (what ``EOS_KAFKA_*`` set)."""
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": MECHANISM,
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": ca_pem,
        "ssl.endpoint.identification.algorithm": "https",
    }


# ``eos-assets broker up --nodes 3 --secure``: an administrator (a super user) and the user the
# product runs as, with the ACLs of README's "A Kafka cluster" on every topic and
# transactional id (a local cluster; grant per topic on a shared one).
ADMIN, PRODUCT = "eos-admin", "eos-assets"
_USERS_FILE = "users.json"
_ACLS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("TOPIC", "*", ("READ", "DESCRIBE", "WRITE", "CREATE")),
    ("GROUP", "eos-assets", ("READ",)),
    ("TRANSACTIONAL_ID", "*", ("WRITE", "DESCRIBE")),
)


def local_users(folder: Path) -> dict[str, str]:
    """The users of the local secured cluster (name -> password): made once, kept readable
    only by their owner in ``folder/users.json``."""
    path = folder / _USERS_FILE
    with contextlib.suppress(FileNotFoundError, ValueError):
        return dict(json.loads(path.read_text()))
    users = {ADMIN: secrets.token_urlsafe(18), PRODUCT: secrets.token_urlsafe(18)}
    folder.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(json.dumps(users))
    return users


def has_users(folder: Path) -> bool:
    """Whether the cluster in ``folder`` was made with ``--secure``."""
    return (folder / _USERS_FILE).exists()


def super_users() -> dict[str, str]:
    """The server property that makes ``ADMIN`` a super user beside the plaintext listener's."""
    return {"super.users": f"User:ANONYMOUS;User:{ADMIN}"}


def grant(bootstrap: str, user: str, kind: str, name: str, *operations: str) -> None:
    """Allow ``user`` the ``operations`` on the resource ``kind`` (TOPIC, GROUP,
    TRANSACTIONAL_ID) named ``name`` (``*``: all of that kind), through the plaintext listener."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    acls = [
        AclBinding(
            ResourceType[kind], name, ResourcePatternType.LITERAL, f"User:{user}", "*",
            AclOperation[op], AclPermissionType.ALLOW,
        )
        for op in operations
    ]  # fmt: skip
    for future in admin.create_acls(acls).values():
        future.result(30)


def grant_product(bootstrap: str) -> None:
    """Give ``PRODUCT`` what the whole product needs (README, "A Kafka cluster")."""
    for kind, name, operations in _ACLS:
        grant(bootstrap, PRODUCT, kind, name, *operations)


def exports(secure_bootstrap: str, ca_pem: str, password: str) -> list[str]:
    """The ``export EOS_KAFKA_*`` lines that point the product at the secured listener as
    ``PRODUCT``: the only place its password is printed."""
    config = {"bootstrap": secure_bootstrap, **client_config(PRODUCT, password, ca_pem)}
    names = {k: "EOS_KAFKA_" + k.upper().replace(".", "_") for k in config}
    return [f"export {names[k]}={shlex.quote(v)}" for k, v in config.items()]
