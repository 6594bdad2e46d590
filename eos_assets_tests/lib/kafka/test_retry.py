"""Which Kafka errors a step rides over (``lib/kafka/retry``)."""

import pytest
from confluent_kafka import KafkaError

from eos_assets.lib.errors import BrokerError, BrokerUnreachable
from eos_assets.lib.kafka.retry import transient, while_unreachable


def test_a_broker_going_away_is_transient_an_abortable_or_fatal_error_is_not() -> None:
    assert transient(KafkaError(KafkaError._TRANSPORT))
    assert transient(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not transient(KafkaError(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True))
    assert not transient(KafkaError(KafkaError._TRANSPORT, fatal=True))
    assert not transient(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED))


def test_a_broker_that_answers_nothing_is_retried_until_it_answers_or_the_time_is_up() -> None:
    said: list[str] = []
    calls = iter([BrokerUnreachable("Kafka at h:1 is unreachable"), None, None])

    def call() -> str:
        error = next(calls)
        if error is not None:
            raise error
        return "planned"

    assert while_unreachable(call, said.append, seconds=5.0) == "planned"
    assert said[0] == "Kafka at h:1 is unreachable; retrying for up to 5s (EOS_KAFKA_RETRY_SECONDS)"
    assert said[1].startswith("Kafka answers again after ")

    def never() -> str:
        raise BrokerUnreachable("Kafka at h:1 is unreachable")

    with pytest.raises(BrokerUnreachable):
        while_unreachable(never, said.append, seconds=0.5)


def test_only_a_broker_that_answers_nothing_is_retried() -> None:
    def denied() -> str:
        raise BrokerError("authentication failed for user u at Kafka h:1")

    said: list[str] = []
    with pytest.raises(BrokerError):
        while_unreachable(denied, said.append, seconds=5.0)
    assert said == []
