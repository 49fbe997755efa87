"""Product text names no issue or stop numbers of this project's own tracker.

Product text is what a user reads: the docs (``docs/``; ``docs/audit.md`` joins once its
rewrite lands), the README, the config schema's descriptions, and everything in the modules of
``costlib/`` and ``pipelines/`` (docstrings, comments, messages). Citations of other projects'
issues (``apache/beam#25975``) are fine: they name their repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: "issue 21", "issues 12 and 23", "stop 33", "#12" (not "owner/repo#12", "&#39;" or "#fff").
OWN_NUMBERS = re.compile(r"(?<![\w-])(?:issues?|stops?)\s+#?\d+\b|(?<![\w/&.#-])#\d+\b",
                         re.IGNORECASE)


def _product_files() -> list[Path]:
    files = [*ROOT.joinpath("docs").rglob("*.md"), ROOT / "README.md",
             *ROOT.joinpath("schemas").glob("*.json"),
             *ROOT.joinpath("costlib").rglob("*.py"), *ROOT.joinpath("pipelines").rglob("*.py"),
             *ROOT.joinpath("pipelines", "report", "templates").glob("*.j2")]
    return files


def own_numbers(text: str) -> list[str]:
    return [match.group(0) for match in OWN_NUMBERS.finditer(text)]


def test_product_text_names_no_issue_or_stop_numbers():
    files = _product_files()
    assert len(files) > 150
    found = {}
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if own_numbers(line):
                found[f"{path.relative_to(ROOT)}:{number}"] = own_numbers(line)
    assert found == {}


def test_the_pattern_tells_our_numbers_from_other_projects():
    assert own_numbers("measured (issue 21 targets), see stop 33 and Issues 12; fixed in #40") \
        == ["issue 21", "stop 33", "Issues 12", "#40"]
    assert own_numbers("apache/beam#25975, color #fff, &#39;, a non-stop 3-step run, "
                       "tissue 4 or bus stops at 5pm") == []
