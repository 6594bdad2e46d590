"""Errors a user can hit, each with a one-line cause and the fix."""

import re


class EosError(Exception):
    """A failure the user can fix; the message is one line: what happened and what to do."""


class ConfigError(EosError):
    """Settings are missing or wrong."""


class BrokerError(EosError):
    """The Kafka broker is unreachable, missing or misbehaving."""


class BrokerUnreachable(BrokerError):
    """No broker answers at the bootstrap address: down, restarting, or never started."""


class TopicMissingError(BrokerError):
    """A topic to ingest does not exist (yet): the first state of a new deployment."""

    def __init__(self, topic: str, bootstrap: str) -> None:
        super().__init__(
            f"topic {topic!r} does not exist on {bootstrap}: create it "
            "(`eos-assets produce` does) or fix the stream's topics (its defs.yaml, or "
            "EOS_TOPICS when set)"
        )
        self.topic = topic
        self.bootstrap = bootstrap

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.topic, self.bootstrap)


class JavaMissingError(EosError):
    """No Java runtime is available for Spark."""


class SparkServerError(EosError):
    """The Spark Connect server a run uses stopped answering (or was never there)."""


class RegistryError(EosError):
    """The schema registry of a stream did not answer, refused the credentials, or failed."""


class DataLossError(EosError):
    """Kafka deleted records (retention, delete-records) before the ingest read them."""


# The last line of a Python traceback that ended in one of the errors above.
_RAISED = re.compile(r"^eos_assets\.lib\.errors\.(\w+): (.+)$", re.MULTILINE)


def raised_in(text: str) -> EosError | None:
    """The error above that a remote process (a Spark task) raised, rebuilt from its traceback.

    Spark wraps a task's exception, Python traceback and Java stack included, into one
    exception on the driver; the user needs only the one line the task meant to say.
    """
    found = _RAISED.findall(text)
    if not found:
        return None
    name, message = found[-1]
    kinds = {
        k.__name__: k
        for k in (
            EosError,
            ConfigError,
            BrokerError,
            BrokerUnreachable,
            JavaMissingError,
            DataLossError,
            RegistryError,
        )
    }
    return kinds.get(name, EosError)(message.strip())
