"""Every Python block of docs/example_costs.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "example_costs.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.usefixtures("single_blas_thread")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_block_runs(index, capsys):
    exec(compile(BLOCKS[index], f"{DOC.name}[block {index}]", "exec"), {})
    assert capsys.readouterr().out  # every block prints what it shows
