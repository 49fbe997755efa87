"""The README as a newcomer follows it: installed from a clone, commands of the clone's
``.venv``, and the examples (the README's, and those of docs/evidence.md it links to) printing
what their comments say."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
#: Tools the Quick start installs into ``.venv`` (``python3 -m venv`` itself is the system's).
VENV_TOOLS = {"costlib", "pip", "python", "ruff", "mypy", "mkdocs", "pytest"}


#: The explanation of moves on evidence, whose examples the README links to.
EVIDENCE = (Path(__file__).resolve().parents[1] / "docs" / "evidence.md").read_text(
    encoding="utf-8")


def _blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def test_shell_commands_run_the_clones_venv():
    bare = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            command = line.split(" #", 1)[0] if not line.startswith("#") else ""
            for part in re.split(r"&&|\|\||[|;]", command):
                words = part.split()
                if words and words[0] in VENV_TOOLS:
                    bare.append(line)
    assert _blocks("bash") and bare == []


def test_install_is_from_a_clone_until_published():
    intro = README.split("## Quick start", 1)[0]
    assert "install it from a clone" in intro
    for found in re.finditer(r"pip install '?costlib", README):
        assert "once published" in README[max(0, found.start() - 40):found.start()]


def test_the_example_costs_example_prints_what_its_comments_say(capsys):
    block = next(b for b in _blocks("python") if "bayes_minimum_risk(" in b)
    exec(compile(block, "README.md[example costs]", "exec"), {})
    printed = capsys.readouterr().out.splitlines()[-1]
    decisions = np.array(printed.strip("[]").split(), dtype=int)
    assert len(decisions) == 10 and set(decisions) <= {0, 1}  # class decisions, not risks
    comment = next(line for line in block.splitlines() if "bayes_minimum_risk(" in line
                   and line.startswith("print("))
    assert "class" in comment.split("#", 1)[1]


def test_the_census_review_example_prints_what_its_comments_say(capsys):
    block = next(b for b in _blocks("python", EVIDENCE) if "census since the move" in b)
    exec(compile(block, "README.md[census review]", "exec"), {})
    thresholds, reason = capsys.readouterr().out.splitlines()[-2:]
    assert thresholds == "(0.7,)"
    assert reason.startswith("moved back: the rows ")
    assert "lost 15 ± 3.873 on their census (60 rated rows" in reason


def test_the_switch_on_example_prints_what_its_comments_say(capsys):
    block = next(b for b in _blocks("python", EVIDENCE) if "switch_on_evidence=False" in b)
    exec(compile(block, "README.md[switch-on]", "exec"), {})
    thin, status, reason, free = capsys.readouterr().out.splitlines()[-4:]
    assert thin == "insufficient_data 1 1000.0"  # min_rated counts the one row, not its weight
    assert status == "insufficient_data None"
    assert reason.startswith("not switched on: no thresholds in force, and over flagging "
                             "nothing the method's point would gain 1000 ± 1000")
    assert reason.endswith("the method's point: (0.7)")
    assert free == "(0.7,)"
