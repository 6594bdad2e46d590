"""What every derived table's run reports, whatever the table: the fields the incremental step
(``incremental.run``) fills in. Each table's outcome adds its own counts."""

from dataclasses import dataclass, field


@dataclass
class DerivedOutcome:
    """What one run did; ``version`` is None when nothing was committed.

    Attributes:
        version: the table version the run committed.
        attempts: attempts made (more than one after a lost commit race).
        seconds: time spent by phase; ``total`` for the whole run.
    """

    version: int | None = None
    attempts: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
