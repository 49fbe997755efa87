"""docs/api/sample.md's example runs as written, and the figures in its comments are the ones
it prints, checked against the generator's own definition of a rated row (some classifier
scored at or above the rating floor) and against the Parquet files read back."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "api" / "sample.md"


def _example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"),
                        flags=re.S | re.M)
    assert len(blocks) == 1
    return blocks[0]


def test_the_example_runs_and_its_figures_are_current(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.chdir(tmp_path)
    block = _example()
    namespace: dict = {}
    exec(compile(block, str(PAGE), "exec"), namespace)
    stream, scores, labels = namespace["stream"], namespace["scores"], namespace["labels"]

    # Rated: some classifier scored the item at or above the rating floor (0.5 by default).
    raw = np.nan_to_num(stream[["text_model", "image_model"]].to_numpy(), nan=-np.inf)
    rated = (raw >= 0.5).any(axis=1)
    assert stream["label"].notna().to_numpy().tolist() == rated.tolist()
    assert scores.shape == (rated.sum(), 2) and labels.sum() == stream["label"].sum()
    assert np.isneginf(scores).any() and not np.isnan(scores).any()
    truth = namespace["truth"]
    assert truth[rated].sum() == labels.sum()  # a rated row's label is its truth

    comments = " ".join(re.findall(r"#(.*)$", block, flags=re.M))
    assert f"{rated.sum():,} rated rows" in comments
    assert f"({rated.sum()}, 2)" in comments
    assert f"{labels.sum()} positives among them" in comments
    assert f"{truth.sum()} positives in all: {truth.sum() - labels.sum()} were never rated" \
        in comments

    # The files hold the stream, in order.
    files = sorted(Path("stream").glob("*.parquet"))
    assert [f.name for f in files] == ["scores-0000.parquet", "scores-0001.parquet"]
    back = np.concatenate([pq.read_table(f).column("item_id").to_numpy() for f in files])
    assert back.tolist() == stream["item_id"].tolist()
