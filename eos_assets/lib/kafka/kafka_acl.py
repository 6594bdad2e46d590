"""What the broker says this client may do: for naming the ACL a refused request lacked.

A transactional producer refused a topic learns only "Topic authorization failed" for the whole
transaction (its records are purged, no topic named); the broker's authorized operations per
topic (KIP-430) tell which topic it was.
"""

from collections.abc import Mapping, Sequence

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import (
    AclOperation,  # pyright: ignore[reportPrivateImportUsage] (documented; the stub hides it)
    AdminClient,
)

from eos_assets.lib.kafka.kafka_admin import quiet_logger

_quiet = quiet_logger(__name__)


def unwritable(
    client_config: Mapping[str, str], topics: Sequence[str], timeout: float = 10.0
) -> list[str]:
    """The topics of ``topics`` this client may not write; [] when the broker does not say."""
    admin = AdminClient(dict(client_config), logger=_quiet)
    try:
        futures = admin.describe_topics(
            TopicCollection(list(topics)),
            request_timeout=timeout,
            include_authorized_operations=True,
        )
        found = {name: future.result(timeout) for name, future in futures.items()}
    except KafkaException:
        return []
    return [
        name
        for name in topics
        if name in found and AclOperation.WRITE not in (found[name].authorized_operations or [])
    ]
