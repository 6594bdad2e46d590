"""The incremental step every derived table runs: plan, compute, commit or re-plan.

A derived table (silver/events, silver/entity_state, gold/window_aggregates, gold/kpi_*)
consumes one upstream Delta table and records, in its own ``txn`` action, the upstream version
it has consumed (``txn_ids.upstream_app``). One attempt of ``run``:

1. **Plan.** Load the table's snapshot and those of its companions (tables the step commits
   before it, such as gold/late_events), let ``check`` refuse the table, read the consumed
   version from the snapshot and plan the increment from the latest upstream snapshot.
2. **Nothing new:** return without committing anything.
3. **Compute and commit:** the table's ``step`` does both, every commit made from the snapshots
   of step 1, carrying ``Attempt.txns`` and ``Attempt.metadata`` (which names the run).
4. The committed version is found by the run's id in the table's history.

A concurrent run that committed first makes a commit from the planned snapshot fail with
``CommitFailedError`` (DESIGN.md, "Positions live with the data"); the attempt is then made
again from new snapshots, where the rival's work is already consumed.
"""

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from eos_assets.lib.delta import delta_io, txn_ids
from eos_assets.lib.derived import increments
from eos_assets.lib.errors import EosError

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3


@dataclass
class Outcome:
    """What every derived table's run reports; each table's outcome adds its own counts.

    Attributes:
        version: the table version the run committed; None when nothing was committed.
        consumed: the upstream versions ``[first, last]`` the run consumed; None when none was
            new.
        attempts: attempts made (more than one after a lost commit race).
        seconds: time spent by phase; ``total`` for the whole run.
    """

    version: int | None = None
    consumed: tuple[int, int] | None = None
    attempts: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class FromSilverOutcome(Outcome):
    """What the run of a table derived from silver/events reports before its own counts:
    ``events``, the new silver events that went into the table."""

    events: int = 0


OutcomeT = TypeVar("OutcomeT", bound=Outcome)


@dataclass(frozen=True)
class Derived:
    """A derived table and the upstream it consumes.

    Attributes:
        name: ``layer/table``, for messages.
        uri: the table.
        upstream_uri: the upstream table.
        app: the ``txn`` app id holding the consumed upstream version.
        storage_options: for every table involved.
        companions: tables the step also commits to, loaded right after this one.
        check: raises ``EosError`` when the table cannot be continued (before planning, so it
            refuses even when nothing is new).
        upto: the upstream version to consume up to (one a blocking check proved); None: the
            latest.
    """

    name: str
    uri: str
    upstream_uri: str
    app: str
    storage_options: Mapping[str, str] | None = None
    companions: tuple[str, ...] = ()
    check: Callable[[DeltaTable], None] | None = None
    upto: int | None = None


@dataclass(frozen=True)
class Attempt:
    """One planned attempt: the snapshots every commit must be made from, and the increment."""

    table: Derived
    target: DeltaTable
    companions: tuple[DeltaTable, ...]
    upstream: DeltaTable
    increment: increments.Increment
    run_id: str
    started: float

    @property
    def versions(self) -> tuple[int, int]:
        """The upstream versions ``[first, last]`` this attempt consumes."""
        return self.increment.first_version, self.increment.version

    @property
    def txns(self) -> dict[str, int]:
        """The ``txn`` recording the consumed upstream version."""
        return {self.table.app: self.increment.version}

    def metadata(self, operation: str, **extra: Any) -> dict[str, Any]:
        """Commit metadata naming the run and what it consumed."""
        return {
            txn_ids.OPERATION: operation,
            txn_ids.UPSTREAM: self.increment.upstream_uri,
            txn_ids.UPSTREAM_VERSIONS: [self.increment.first_version, self.increment.version],
            txn_ids.LINEAGE: txn_ids.lineage(
                self.table.app.removeprefix(txn_ids.UPSTREAM_PREFIX),
                self.increment.version,
                delta_io.positions(self.upstream, (txn_ids.FROM_BRONZE, txn_ids.FROM_SILVER)),
            ),
            txn_ids.RUN_ID: self.run_id,
            **extra,
        }


def run(
    table: Derived, new: Callable[[], OutcomeT], step: Callable[[Attempt, OutcomeT], None]
) -> OutcomeT:
    """Run ``step`` (compute and commit) on the increment ``table`` has not consumed yet.

    ``new`` makes an empty outcome for each attempt; ``step`` fills it in.

    Raises:
        EosError: ``check`` refused the table, the upstream is missing or was rewritten, or
            ``MAX_ATTEMPTS`` attempts lost their commit race.
    """
    options = table.storage_options
    what = f"{table.name} at {table.uri}"
    for number in range(1, MAX_ATTEMPTS + 1):
        outcome = new()
        outcome.attempts = number
        started = time.monotonic()
        target = delta_io.load(table.uri, options)
        companions = tuple(delta_io.load(uri, options) for uri in table.companions)
        if table.check is not None:
            table.check(target)
        consumed = target.transaction_version(table.app)
        if table.upto is not None and consumed is not None and consumed >= table.upto:
            outcome.seconds["total"] = time.monotonic() - started
            return outcome  # a run of its own already went past the version asked for
        upstream = increments.load_upstream(table.upstream_uri, options, table.upto)
        increment = increments.plan_increment(upstream, table.upstream_uri, consumed)
        if increment.is_new:
            attempt = Attempt(
                table, target, companions, upstream, increment, uuid.uuid4().hex, started
            )
            outcome.consumed = attempt.versions
            try:
                step(attempt, outcome)
            except CommitFailedError:
                log.warning("%s: concurrent commit (attempt %d); re-planning", what, number)
                continue
            outcome.version = delta_io.find_commit(
                table.uri, txn_ids.RUN_ID, attempt.run_id, options
            )
        outcome.seconds["total"] = time.monotonic() - started
        return outcome
    raise EosError(
        f"{what} lost {MAX_ATTEMPTS} commit races with concurrent writers: let one run at a "
        "time and retry"
    )
