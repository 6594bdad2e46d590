"""Each test's time, written to a file: ``pytest --durations-file=PATH``.

``make test`` writes ``.eos/test-output/durations.tsv``: one line per test, slowest first, with
its setup, call and teardown seconds apart (a slow teardown of a module's fixture shows on the
last test of its module), then one line per module with its total.
"""

from collections import defaultdict
from pathlib import Path

import pytest

_PHASES = ("setup", "call", "teardown")


class Durations:
    """The seconds of each phase of each test, and each test's outcome."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.times: dict[str, dict[str, float]] = defaultdict(dict)
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A test's id without the "@group" suffix of its worker group (conftest.py).
        node = report.nodeid.rsplit("@", 1)[0] if "@" in report.nodeid else report.nodeid
        self.times[node][report.when] = report.duration
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[node] = report.outcome

    def pytest_sessionfinish(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(self.lines()) + "\n")

    def lines(self) -> list[str]:
        """The file's lines: tests slowest first, then modules slowest first."""
        total = {node: sum(phases.values()) for node, phases in self.times.items()}
        lines = ["seconds\tsetup\tcall\tteardown\toutcome\ttest"]
        for node in sorted(total, key=lambda n: -total[n]):
            phases = "\t".join(f"{self.times[node].get(p, 0.0):.2f}" for p in _PHASES)
            outcome = self.outcomes.get(node, "passed")
            lines.append(f"{total[node]:.2f}\t{phases}\t{outcome}\t{node}")
        modules: dict[str, float] = defaultdict(float)
        for node, seconds in total.items():
            modules[node.split("::", 1)[0]] += seconds
        lines += ["", f"seconds\tmodule (all tests: {sum(total.values()):.0f} s)"]
        lines += [f"{s:.1f}\t{m}" for m, s in sorted(modules.items(), key=lambda ms: -ms[1])]
        return lines


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--durations-file",
        default=None,
        help="write each test's setup, call and teardown seconds to this file",
    )


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("durations_file")
    # In parallel workers (pytest-xdist) the controller gets every report and writes the file.
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Durations(Path(path)), "eos-durations")
