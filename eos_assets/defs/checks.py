"""Asset checks of bronze/raw_events: DuckDB over the Delta table and its log, no Spark.

``offsets_contiguous`` is blocking: when it fails, nothing downstream of bronze runs. The
malformed rate and the freshness warn. The Kafka audit re-reads the retained log, so it runs on
its own schedule (``audit_bronze_against_kafka``), never inside an ingest run.
"""

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

import dagster as dg
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from eos_assets.defs.check_state import CheckConfig, last_checked
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.stream import Stream
from eos_assets.lib.checks.audit import AuditReport, audit_bronze
from eos_assets.lib.checks.contiguity import contiguity_of
from eos_assets.lib.checks.freshness import bronze_freshness
from eos_assets.lib.checks.malformed import malformed_rate
from eos_assets.lib.delta import delta_io
from eos_assets.lib.errors import EosError
from eos_assets.lib.ingest.commit_log import read_ingest_log
from eos_assets.resources.kafka import KafkaResource
from eos_assets.resources.lake import LakeResource
from eos_assets.settings import read_limits

OFFSETS_CONTIGUOUS = "offsets_contiguous"
MALFORMED_RATE = "malformed_rate_below_threshold"
FRESHNESS = "fresh_within_max_age"
KAFKA_AUDIT = "matches_kafka_log"

# Checks that read Kafka and run on schedules, not after every ingest.
SCHEDULED = (FRESHNESS, KAFKA_AUDIT)


def scheduled_checks(stream: Stream) -> list[dg.AssetCheckKey]:
    """The stream's checks that read Kafka (run on schedules)."""
    return [dg.AssetCheckKey(stream.raw_events, name) for name in SCHEDULED]


class CheckReport(Protocol):
    """What a check's logic in ``lib/checks`` reports."""

    @property
    def ok(self) -> bool: ...

    def summary(self) -> str: ...

    def metadata(self) -> dict[str, object]: ...


R = TypeVar("R", bound=CheckReport)


def check_result(
    passed: bool,
    description: str,
    metadata: Mapping[str, object],
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetCheckResult:
    """A check's result; list and dict metadata values are shown as JSON."""
    values = {
        k: dg.MetadataValue.json(v) if isinstance(v, list | dict) else v
        for k, v in metadata.items()
    }
    return dg.AssetCheckResult(
        passed=passed,
        description=description,
        metadata=values,  # type: ignore[arg-type]
        severity=severity,
    )


def report_result(
    report: CheckReport, severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR
) -> dg.AssetCheckResult:
    """The result of a check whose logic reported ``report``."""
    return check_result(report.ok, report.summary(), report.metadata(), severity)


def _reported(
    key: dg.AssetKey,
    lake: LakeResource,
    read: Callable[[str], R],
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    escalated: Callable[[R], bool] | None = None,
) -> dg.AssetCheckResult:
    """The result of the report ``read(table_uri)`` makes, at ``severity`` (ERROR where
    ``escalated(report)``); a missing table or a user-fixable error is a one-line failure."""
    uri = lake.table_uri(*key.path)
    try:
        report = read(uri)
    except TableNotFoundError:
        cause = f"no Delta table at {uri}: materialize {key.to_user_string()} first"
    except EosError as exc:
        cause = str(exc)
    else:
        if escalated is not None and escalated(report):
            severity = dg.AssetCheckSeverity.ERROR
        return report_result(report, severity)
    return check_result(False, cause, {"table_uri": uri}, severity)


def bronze_checks(stream: Stream) -> list[dg.AssetChecksDefinition]:
    """The checks of ``<stream>/bronze/raw_events``."""
    table = stream.raw_events

    def bronze_check(
        name: str,
        description: str,
        blocking: bool = False,
        op_tags: Mapping[str, str] | None = None,
    ):
        check = dg.asset_check(
            asset=table, name=name, description=description, blocking=blocking, op_tags=op_tags
        )
        return lambda fn: check(stream.keyed(fn))

    @bronze_check(
        OFFSETS_CONTIGUOUS,
        "Committed ranges tile each partition with no hole or overlap; every row lies "
        "in a range, exactly as many as its commit recorded; (topic, partition, offset) is unique. "
        "Offsets Kafka deleted before they were ingested and that a run accepted "
        "(accept_data_loss) tile as acknowledged loss and are listed, never a hole.",
        blocking=True,
    )
    def offsets_contiguous(
        context: dg.AssetCheckExecutionContext, config: CheckConfig, lake: LakeResource
    ) -> dg.AssetCheckResult:
        """Prove bronze holds each committed offset range once and nothing else (the rows
        added since the latest passing evaluation, see ``defs/check_state``)."""

        def read(uri: str) -> CheckReport:
            dt = delta_io.load(uri, lake.storage_options)
            return contiguity_of(dt, last_checked(context, config), lake.storage_options)

        return _reported(table, lake, read)

    @bronze_check(
        MALFORMED_RATE,
        "Share of malformed records, whole table and latest ingest, is at most "
        "EOS_MALFORMED_MAX_RATE (warns).",
        op_tags=AFTER_SERVING,
    )
    def malformed_rate_below_threshold(lake: LakeResource) -> dg.AssetCheckResult:
        """Warn when producers send more malformed records than the threshold allows."""

        def read(uri: str) -> CheckReport:
            log = read_ingest_log(delta_io.load(uri, lake.storage_options))
            errors = delta_io.read_arrow(uri, lake.storage_options, ["topic", "partition", "error"])
            limit = read_limits(declared=stream.limits).malformed_max_rate
            return malformed_rate(log, errors, limit)

        return _reported(table, lake, read, dg.AssetCheckSeverity.WARN)

    @bronze_check(
        FRESHNESS,
        "The oldest committed Kafka record not yet in bronze is at most "
        "EOS_FRESHNESS_MAX_AGE_S old (warns).",
    )
    def fresh_within_max_age(lake: LakeResource, kafka: KafkaResource) -> dg.AssetCheckResult:
        """Warn when bronze falls behind Kafka by more than the freshness limit."""

        def read(uri: str) -> CheckReport:
            dt: DeltaTable = delta_io.load(uri, lake.storage_options)
            return bronze_freshness(
                kafka.client_config(),
                kafka.topics_for(stream.topics, stream.topic_pattern),
                uri,
                dt,
                read_limits(declared=stream.limits).freshness_max_age_s,
                lake.storage_options,
                start=stream.start,
            )

        return _reported(table, lake, read, dg.AssetCheckSeverity.WARN)

    @bronze_check(
        KAFKA_AUDIT,
        "Re-reads the retained Kafka log of every partition (read_committed, from the "
        "low watermark) and compares it with bronze: nothing lost, invented or altered. Offsets "
        "Kafka deleted before they were ingested fail it until a run accepts them; accepted ones "
        "are counted as acknowledged loss.",
    )
    def matches_kafka_log(lake: LakeResource, kafka: KafkaResource) -> dg.AssetCheckResult:
        """Audit bronze against Kafka within EOS_AUDIT_BUDGET_S; a partial audit never passes."""

        def read(uri: str) -> AuditReport:
            columns = ["topic", "partition", "offset", "key", "value"]
            # Bronze first: a missing table is the failure, whatever Kafka would say.
            bronze = delta_io.read_arrow(uri, lake.storage_options, columns)
            budget = read_limits(declared=stream.limits).audit_budget_s
            return audit_bronze(
                kafka.client_config(),
                kafka.topics_for(stream.topics, stream.topic_pattern),
                uri,
                bronze,
                budget,
                lake.storage_options,
            )

        # A discrepancy is an error; a partial audit only warns.
        return _reported(
            table, lake, read, dg.AssetCheckSeverity.WARN, lambda r: r.discrepancies > 0
        )

    return [
        offsets_contiguous,
        malformed_rate_below_threshold,
        fresh_within_max_age,
        matches_kafka_log,
    ]
