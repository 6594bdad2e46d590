"""Errors a user can hit, each with a one-line cause and the fix."""


class EosError(Exception):
    """A failure the user can fix; the message is one line: what happened and what to do."""


class ConfigError(EosError):
    """Settings are missing or wrong."""


class BrokerError(EosError):
    """The Kafka broker is unreachable, missing or misbehaving."""


class JavaMissingError(EosError):
    """No Java runtime is available for Spark."""
