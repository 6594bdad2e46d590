"""A wrong declaration on the command line: `dagster`, `dg` and `eos-assets` end with the
product's one line (file, field, fix); no frame of the product's code and no second copy of
the line come before it, only Dagster's own stack where Dagster prints one.

Each command runs on a fresh copy of the project whose shipped declaration is broken.
"""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from eos_assets_tests.support.project_copy import ProjectCopy, copy_project

DEFINITIONS = "eos_assets.definitions"
FORMAT = "    format: iso8601\n"
MISSPELT = (
    "eos_assets/streams/orders/defs.yaml: event_time.formatt: extra inputs are not permitted: "
    "remove it or fix its spelling"
)
UNBOUND = (
    "eos_assets/streams/orders/defs.yaml: kpis.orders_by_status.sql: Binder Error: Referenced "
    'column "paidd" not found in FROM clause!: write a SELECT over window_aggregates and '
    "entity_state with their declared columns"
)


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> tuple[ProjectCopy, ProjectCopy]:
    """Two copies: a misspelt field, and KPI SQL naming no column, in the shipped stream."""
    copies = []
    for name, old, new in (
        ("misspelt", FORMAT, FORMAT.replace("format", "formatt")),
        ("unbound", "sum(paid_amount) AS paid_amount", "sum(paidd) AS paid_amount"),
    ):
        copy = copy_project(tmp_path_factory.mktemp(name))
        declaration = copy.streams / "orders" / "defs.yaml"
        text = declaration.read_text()
        assert old in text
        declaration.write_text(text.replace(old, new))
        copies.append(copy)
    return copies[0], copies[1]


def _product_frames(text: str, root: Path) -> list[str]:
    """Stack lines in the copy's package, but for the one that imports the definitions."""
    package = str(root / "eos_assets")
    return [
        line
        for line in text.splitlines()
        if package in line and "eos_assets/definitions.py" not in line
    ]


@pytest.mark.slow
def test_the_command_lines_end_with_the_one_line(broken: tuple[ProjectCopy, ProjectCopy]) -> None:
    misspelt, unbound = broken
    commands = {
        "dagster asset list": (
            misspelt,
            ("dagster", "asset", "list", "-m", "eos_assets.definitions"),
        ),
        "dg list defs": (misspelt, ("dg", "list", "defs")),
        "eos-assets run": (misspelt, ("eos-assets", "run", "--stream", "orders")),
        "dagster definitions validate": (
            unbound,
            ("dagster", "definitions", "validate", "-m", DEFINITIONS),
        ),
        "dg check defs": (unbound, ("dg", "check", "defs")),
    }
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        futures = {name: pool.submit(copy.run, *argv) for name, (copy, argv) in commands.items()}
        results = {name: future.result() for name, future in futures.items()}

    listed = results["dagster asset list"]
    assert listed.returncode != 0
    last = listed.stderr.strip().splitlines()[-1]
    assert last == f"eos_assets.definitions.LoadError: {MISSPELT}", listed.stderr[-3000:]
    assert listed.stderr.count(MISSPELT) == 1, listed.stderr
    assert _product_frames(listed.stderr, misspelt.root) == [], listed.stderr

    dg_list = results["dg list defs"]
    assert dg_list.returncode != 0
    assert dg_list.stderr.strip().splitlines()[-1] == MISSPELT, dg_list.stdout + dg_list.stderr
    assert "Stack Trace" not in dg_list.stdout + dg_list.stderr

    run = results["eos-assets run"]
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"eos-assets: {MISSPELT}"], run.stderr

    # Dagster's validators print the line in their report, without a stack, and say last that
    # the validation failed.
    for name in ("dagster definitions validate", "dg check defs"):
        out = results[name].stdout + results[name].stderr
        assert results[name].returncode != 0 and out.count(UNBOUND) == 1, (name, out)
        assert "Traceback" not in out and "Stack Trace" not in out, (name, out)
