"""Where a partition the table has never read starts, as its stream declares it.

``earliest`` starts at the low watermark (every retained record), ``latest`` at the last stable
offset of the first plan (only what is committed after it), and an ISO-8601 time with a zone at
the first offset whose timestamp is at or after it (Kafka's offsets_for_times; a time after the
last record starts at the last stable offset). Only the first plan of a partition decides: its
commit records the offsets passed over (``eos.skipped``) and pins the position, so a partition
once read always continues from where it stands.
"""

from collections.abc import Mapping
from datetime import datetime

from confluent_kafka import Consumer, KafkaException, TopicPartition

from eos_assets.lib.errors import BrokerError, EosError
from eos_assets.lib.ingest.ranges import TopicPartition as Tp
from eos_assets.lib.ingest.reader import reader_config
from eos_assets.lib.kafka.kafka_admin import quiet_logger
from eos_assets.lib.kafka.retry import with_retry

EARLIEST = "earliest"
LATEST = "latest"
_quiet = quiet_logger(__name__)
# Why the offsets before a declared start are not in the table (``eos.skipped``'s reason).
SKIP_REASON = "declared start"


def start_ms(start: str) -> int | None:
    """The time a ``start`` names, in epoch milliseconds (None for earliest and latest).

    Raises:
        EosError: neither earliest, latest nor an ISO-8601 time with a zone.
    """
    if start in (EARLIEST, LATEST):
        return None
    try:
        parsed = datetime.fromisoformat(start)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise EosError(
            f"start {start!r} is not earliest, latest or an ISO-8601 time with a zone: "
            "fix the stream's start"
        )
    return int(parsed.timestamp() * 1000)


def declared_starts(
    start: str,
    bounds: Mapping[Tp, tuple[int, int]],
    positions: Mapping[Tp, int | None],
    at_time: Mapping[Tp, int | None] | None = None,
) -> dict[Tp, int]:
    """The start of each partition the table has never read; partitions it has read are left out.

    Args:
        start: the declared start: earliest, latest or an ISO-8601 time.
        bounds: ``(low watermark, last stable offset)`` per partition.
        positions: the table's position per partition (None or absent: never read).
        at_time: for a time start, the first offset at or after the time per partition (None
            or negative: no record that late yet, so it starts at the last stable offset).
    """
    starts: dict[Tp, int] = {}
    timed = start_ms(start) is not None
    for tp, (low, stable_end) in bounds.items():
        if positions.get(tp) is not None:
            continue
        if start == EARLIEST:
            offset = low
        elif start == LATEST:
            offset = stable_end
        else:
            found = (at_time or {}).get(tp) if timed else None
            offset = stable_end if found is None or found < 0 else found
        starts[tp] = min(max(offset, low), stable_end)
    return starts


def never_read_starts(
    client_config: Mapping[str, str],
    start: str,
    bounds: Mapping[Tp, tuple[int, int]],
    positions: Mapping[Tp, int | None],
    timeout_s: float = 10.0,
) -> dict[Tp, int]:
    """``declared_starts``, asking Kafka for the offsets of a time start when one is declared.

    Raises:
        BrokerError: the broker does not answer the offsets-for-times request.
        EosError: ``start`` is not a valid start.
    """
    at = start_ms(start)
    new = sorted(tp for tp in bounds if positions.get(tp) is None)
    at_time = offsets_for_time(client_config, new, at, timeout_s) if at is not None and new else {}
    return declared_starts(start, bounds, positions, at_time)


def offsets_for_time(
    client_config: Mapping[str, str], tps: list[Tp], at_ms: int, timeout_s: float = 10.0
) -> dict[Tp, int | None]:
    """The first offset whose timestamp is at or after ``at_ms``, per partition (None: none).

    Asked as a ``read_committed`` consumer, so an offset past the last stable offset is never
    returned. A leader that dies meanwhile costs a retry (``EOS_KAFKA_RETRY_SECONDS``).

    Raises:
        BrokerError: the broker does not answer.
    """
    config = {**reader_config(client_config), "group.id": "eos-assets-planner", "logger": _quiet}
    consumer = Consumer(config)
    try:
        found = with_retry(
            lambda: consumer.offsets_for_times(
                [TopicPartition(t, p, at_ms) for t, p in tps], timeout=timeout_s
            )
        )
    except KafkaException as exc:
        raise BrokerError(_unanswered(at_ms, exc.args[0].str())) from exc
    finally:
        consumer.close()
    for r in found:
        if r.error is not None:
            raise BrokerError(_unanswered(at_ms, f"{r.topic}[{r.partition}]: {r.error.str()}"))
    return {(r.topic, r.partition): (r.offset if r.offset >= 0 else None) for r in found}


def _unanswered(at_ms: int, why: str) -> str:
    return (
        f"Kafka did not answer which offsets follow {at_ms} ms ({why}): check the broker, or "
        "start the stream at earliest or latest"
    )
