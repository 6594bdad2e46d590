"""Riding over a broker that dies: which Kafka errors are retried, and for how long.

A replicated cluster moves the leadership of a dead broker's partitions (and its group and
transaction coordinators) to a live one within seconds; until then a client sees transport
errors, "not leader", "coordinator not available" and timeouts. Those are retried with backoff
for up to ``EOS_KAFKA_RETRY_SECONDS`` (default 60); anything else (authentication,
authorization, a missing topic, a fatal producer error) fails at once.
"""

import os
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

from eos_assets.lib.errors import BrokerUnreachable

RETRY_ENV = "EOS_KAFKA_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 60.0
_FIRST_BACKOFF_S, _MAX_BACKOFF_S = 0.2, 2.0

# Errors of a broker going away or of a leadership moving; librdkafka marks only some of
# them retriable.
_TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._DESTROY_BROKER,  # "Broker handle destroyed": a dead broker left the metadata
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._NOENT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)
# Never transient, whatever librdkafka says: the fix is the user's.
_PERMANENT = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._SSL,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)

T = TypeVar("T")


def retry_seconds(env: Mapping[str, str] | None = None) -> float:
    """``EOS_KAFKA_RETRY_SECONDS``: how long a step retries a broker that went away.

    A value that is not a positive number falls back to the default: this is read inside
    Spark tasks and sensor ticks, where a configuration error would only hide the broker's.
    """
    raw = (os.environ if env is None else env).get(RETRY_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_RETRY_SECONDS
    return value if value > 0 else DEFAULT_RETRY_SECONDS


def transient(err: KafkaError) -> bool:
    """True when ``err`` is what a client sees while a broker dies or a leadership moves.

    An error after which the transaction can only be aborted is never transient: retrying its
    commit would hold the partition's last stable offset back for nothing.
    """
    if err.fatal() or err.txn_requires_abort() or err.code() in _PERMANENT:
        return False
    return err.code() in _TRANSIENT or err.retriable()


def error_of(exc: KafkaException) -> KafkaError | None:
    """The ``KafkaError`` a ``KafkaException`` carries, if it carries one."""
    err = exc.args[0] if exc.args else None
    return err if isinstance(err, KafkaError) else None


def with_retry(call: Callable[[], T], seconds: float | None = None) -> T:
    """Return ``call()``, retried with backoff while it raises a transient ``KafkaException``.

    Raises:
        KafkaException: a permanent error at once, or the last transient one after
            ``seconds`` (default ``retry_seconds()``).
    """
    deadline = time.monotonic() + (retry_seconds() if seconds is None else seconds)
    backoff = _FIRST_BACKOFF_S
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = error_of(exc)
            if err is None or not transient(err) or time.monotonic() + backoff > deadline:
                raise
        time.sleep(backoff)
        backoff = min(backoff * 2, _MAX_BACKOFF_S)


def while_unreachable(
    call: Callable[[], T], say: Callable[[str], None], seconds: float | None = None
) -> T:
    """Return ``call()``, retried with backoff while no broker answers at all (a one-node
    broker restarting, say), for up to ``seconds`` (default ``retry_seconds()``).

    ``say`` gets one line when the retries begin and one when Kafka answers again.

    Raises:
        BrokerUnreachable: still no answer after ``seconds``.
    """
    patience = retry_seconds() if seconds is None else seconds
    deadline = time.monotonic() + patience
    backoff, began = _FIRST_BACKOFF_S, None
    while True:
        try:
            result = call()
        except BrokerUnreachable as exc:
            if time.monotonic() + backoff > deadline:
                raise
            if began is None:
                began = time.monotonic()
                say(f"{exc}; retrying for up to {patience:g}s ({RETRY_ENV})")
            time.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
            continue
        if began is not None:
            say(f"Kafka answers again after {time.monotonic() - began:.1f}s")
        return result
