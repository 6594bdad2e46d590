"""The score of a fault suite: each fault injected, how often, and what it lost or doubled,
printed at the end of the session."""

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LedgerEntry:
    """One fault as injected by one test."""

    fault: str
    injected: int
    lost: int
    doubled: int
    note: str = ""


@dataclass
class Ledger:
    """What the fault suite injected, for the summary at the end of the session."""

    entries: list[LedgerEntry] = field(default_factory=list)

    def record(
        self, fault: str, injected: int, lost: int = 0, doubled: int = 0, note: str = ""
    ) -> None:
        """Add one line to the summary."""
        self.entries.append(LedgerEntry(fault, injected, lost, doubled, note))

    def lines(self) -> list[str]:
        """The summary table, one fault per line."""
        width = max((len(e.fault) for e in self.entries), default=5)
        out = [f"{'fault':<{width}}  injected  lost  doubled  note"]
        for e in self.entries:
            out.append(
                f"{e.fault:<{width}}  {e.injected:>8}  {e.lost:>4}  {e.doubled:>7}  {e.note}"
            )
        return out


def print_ledger(terminalreporter: Any, ledger: Ledger | None, title: str) -> None:
    """Print ``ledger`` as a section ``title`` of pytest's summary; nothing when it is empty."""
    if ledger is None or not ledger.entries:
        return
    terminalreporter.section(title)
    for line in ledger.lines():
        terminalreporter.write_line(line)
