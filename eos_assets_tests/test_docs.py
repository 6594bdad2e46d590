"""The README's references are the code's: every column of every table a declared stream gets
has its line, every field of a declaration is named, and the README holds what `make docs`
writes."""

import re

from eos_assets.declaration import StreamModel
from eos_assets.devkit import docs


def test_every_column_of_every_table_has_its_line() -> None:
    tables = docs.tables()
    assert len(tables) == 9
    missing = {t: [c for c in cols if c not in docs.ABOUT] for t, cols in tables.items()}
    assert not any(missing.values()), f"add a line to docs.ABOUT for {missing}"
    kpi_windows = tables["KPI SQL: window_aggregates"]
    for column in ("window_start", "window_end", "is_final", "revision", "late_events"):
        assert column in kpi_windows
    assert tables["<stream>/gold/<kpi>"][-2:] == ["revision", "silver_version"]


def test_the_readme_holds_the_generated_reference() -> None:
    text = docs.README.read_text()
    assert docs.reference() in text, "the README's column reference is stale: run `make docs`"


def test_the_readme_holds_the_generated_settings_and_names_every_declared_field() -> None:
    text = docs.README.read_text()
    assert docs.settings_reference() in text, (
        "the README's settings reference is stale: run `make docs`"
    )
    fields = text.partition("## Declared streams")[2].partition("**What a declared stream gets.**")[
        0
    ]
    missing = [f for f in StreamModel.model_fields if not re.search(rf"`{f}[`.]", fields)]
    assert not missing, f"name {missing} in the README's table of declared fields"
