"""Which Kafka errors a step rides over (``lib/kafka/retry``)."""

from confluent_kafka import KafkaError

from eos_assets.lib.kafka.retry import transient


def test_a_broker_going_away_is_transient_an_abortable_or_fatal_error_is_not() -> None:
    assert transient(KafkaError(KafkaError._TRANSPORT))
    assert transient(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not transient(KafkaError(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True))
    assert not transient(KafkaError(KafkaError._TRANSPORT, fatal=True))
    assert not transient(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED))
