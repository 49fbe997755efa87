"""The Tables 2-3 reproduction runs end to end and prints the paper's layout."""

from __future__ import annotations

import re

import numpy as np
import pytest

from costlib.decoding._losses import get_loss
from costlib.experiments import natarajan2016


def test_reproduction_prints_both_tables(capsys) -> None:
    assert natarajan2016.main(["--datasets", "wine", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "Table 2: F1 and Jaccard" in out and "Table 3: AM and G-TP/PR" in out
    for name in ("WINE (3)",):
        rows = [line for line in out.splitlines() if line.startswith(name)]
        assert len(rows) == 2  # one per table
        for row in rows:
            values = [float(v) for v in re.findall(r"\d\.\d{4}", row)]
            assert len(values) == 6 and all(0.0 <= v <= 1.0 for v in values)


def test_binary_problem_methods_are_scored_on_test_counts() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    y = (x[:, 0] + 0.5 * rng.normal(size=300)) > 0.8
    losses = {"F1": get_loss("f1"), "AM": get_loss("am")}
    out = natarajan2016.run_binary_problem(x[:200], y[:200], x[200:], y[200:], losses, 1.0, 0)
    assert set(out) == {(loss, m) for loss in losses for m in natarajan2016.METHODS}
    assert all(0.0 <= v < 0.5 for v in out.values())  # an easy problem: every method is decent


def test_bad_options_exit_with_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        natarajan2016.main(["--datasets", "mnist"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        natarajan2016.main(["--repeats", "0"])


def test_bundled_data_sets_load_with_the_paper_positive_class() -> None:
    cancer = natarajan2016._load("breast_cancer")
    assert cancer.display == "BREAST CANCER" and cancer.classes == (0,)  # 0 = malignant
    assert cancer.features.shape == (569, 30)
    digits = natarajan2016._load("digits")
    assert digits.display == "DIGITS (10)" and len(digits.classes) == 10
