"""The README and docs/deviations.md stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path

from kcoord.broker.apis import advertised_versions
from kcoord.broker.config import DEV_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent


def test_readme_lists_every_development_default():
    readme = (ROOT / "README.md").read_text()
    for name, (dev_value, kafka_value) in DEV_DEFAULTS.items():
        row = re.search(rf"^\| `{re.escape(name)}` \| (\S+) \| (\S+) \|", readme, re.M)
        assert row, f"README does not list the development default {name}"
        assert row.groups() == (str(dev_value), str(kafka_value)), name


def test_readme_starts_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("\n\n")[1]
    assert "make run" in head and "make test" in head


def test_readme_api_table_matches_what_is_advertised():
    readme = (ROOT / "README.md").read_text()
    rows = dict(re.findall(r"^\| [A-Za-z]+ \((\d+)\) \| v(\d+–v\d+)", readme, re.M))
    served = {str(key): f"{low}–v{high}" for key, low, high in advertised_versions()}
    assert rows == served


def test_every_deviation_names_a_test_that_exists():
    text = (ROOT / "docs" / "deviations.md").read_text()
    checks = re.findall(r"\*\*Checked by:\*\* `([^`]+)::([^`]+)`", text)
    assert len(checks) == text.count("\n## ")
    for path, test in checks:
        source = (ROOT / path).read_text()
        assert f"def {test}(" in source, f"{path}::{test} is gone"
