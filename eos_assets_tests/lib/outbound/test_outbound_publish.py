"""Which Kafka error a failed publishing transaction carries, however the client raised it."""

from confluent_kafka import KafkaError, KafkaException

from eos_assets.lib.outbound.outbound_publish import _kafka_error


def test_the_error_a_delivery_callback_left_pending_in_flush_is_found() -> None:
    fenced = KafkaError(KafkaError._FENCED, "fenced by newer producer instance", fatal=True)
    # confluent-kafka raises the callback's pending KafkaException from flush as a SystemError.
    try:
        try:
            raise KafkaException(fenced)
        except KafkaException as cause:
            raise SystemError("returned a result with an exception set") from cause
    except SystemError as raised:
        error = _kafka_error(raised)
    assert error is not None and error.code() == KafkaError._FENCED
    assert _kafka_error(KafkaException(fenced)) is fenced
    assert _kafka_error(SystemError("something else")) is None
