"""The score of a fault suite: each fault injected, how often, and what it lost or doubled,
printed at the end of the session.

A test's entries travel in its teardown report (``user_properties``), so the summary is the
same whether the tests ran in this process or in parallel workers (pytest-xdist), whose
reports reach the process that prints it.
"""

from collections.abc import Iterator
from dataclasses import astuple, dataclass, field
from typing import Any

import pytest

_PROPERTY = "eos_ledger"
# Entries recorded in this process since the last teardown report: (title, entry).
_RECORDED: list[tuple[str, "LedgerEntry"]] = []


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
    """What a fault suite injected, for the summary at the end of the session."""

    title: str = "exactly-once fault ledger"
    entries: list[LedgerEntry] = field(default_factory=list)

    def record(
        self, fault: str, injected: int, lost: int = 0, doubled: int = 0, note: str = ""
    ) -> None:
        """Add one line to the summary."""
        entry = LedgerEntry(fault, injected, lost, doubled, note)
        self.entries.append(entry)
        _RECORDED.append((self.title, entry))


def lines(entries: list[LedgerEntry]) -> list[str]:
    """The summary table, one fault per line."""
    width = max((len(e.fault) for e in entries), default=5)
    out = [f"{'fault':<{width}}  injected  lost  doubled  note"]
    for e in entries:
        out.append(f"{e.fault:<{width}}  {e.injected:>8}  {e.lost:>4}  {e.doubled:>7}  {e.note}")
    return out


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if call.when == "teardown":
        while _RECORDED:
            title, entry = _RECORDED.pop(0)
            report.user_properties.append((_PROPERTY, [title, *astuple(entry)]))
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print each ledger as a section of pytest's summary; nothing for an empty one."""
    ledgers: dict[str, list[LedgerEntry]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == _PROPERTY:
                    title, *entry = value
                    ledgers.setdefault(title, []).append(LedgerEntry(*entry))
    for title, entries in ledgers.items():
        terminalreporter.section(title)
        for line in lines(entries):
            terminalreporter.write_line(line)
