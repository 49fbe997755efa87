"""The sooklal_benefit reproduction: its matrices, settings, identities and command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from costlib.costs._binary import target_marginal_precision
from costlib.costs._matrices import BenefitMatrix
from costlib.experiments import sooklal_benefit as exp
from costlib_pipelines.commands.cli import main as cli_main

pytestmark = pytest.mark.usefixtures("single_blas_thread")


def test_group_benefit_matrix_and_xu_costs():
    classes = np.array(["0", "1", "other"])
    bm = exp.group_benefit_matrix(classes, ("other",))
    np.testing.assert_array_equal(
        bm.values, [[5, -3, -10], [-3, 5, -10], [-2, -2, 1]]
    )
    assert exp.xu_costs(bm, ("other",)) == (3.0, 15.0, 8.0)
    # p* = C_HD / (C_HD + C_DH) = 1/6 is the binary target marginal precision of the schema.
    binary = exp.group_benefit_matrix(np.array(["benign", "malignant"]), ("benign",))
    assert target_marginal_precision(binary) == pytest.approx(3 / (3 + 15))


def test_xu_costs_rejects_matrices_not_of_xus_form():
    bm = BenefitMatrix([[1, -2, -2], [-10, 5, -3], [-10, -4, 5]], labels=["H", "a", "b"])
    with pytest.raises(ValueError, match="C_DD is not one number"):
        exp.xu_costs(bm, ("H",))


def test_rare_settings_keep_the_requested_minority_share():
    settings = exp.load_settings(("digits", "rare-digits"), 0.1, seed=0)
    full, rare = settings
    for c in full.minority:
        assert (rare.y == c).sum() == round(0.1 * (full.y == c).sum())
    assert (rare.y == "other").sum() == (full.y == "other").sum()
    assert rare.minority == ("0", "1", "2")


def test_binary_identities_in_the_results(capsys):
    assert exp.main(["--settings", "rare-cancer", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = out["results"]["rare-cancer"]
    assert set(res) == set(exp.METHODS)
    # With one minority class: the benefit-LR stage 1 is the binary benefit LR, and Zhang's
    # β/Δ rule is the threshold p* of Xu's stage 1; both OvR combinations coincide.
    assert res["hierarchical, benefit LR"] == res["benefit LR, paper OvR"]
    assert res["flat CS kernel LR (Zhang)"] == res["hierarchical, kernel LR (Xu)"]
    assert res["benefit LR, paper OvR"] == res["benefit LR, normalised OvR"]
    for vals in res.values():
        assert vals["mu"] <= 1.0
        # μ = B / Σ π_i b_ii with Σ π_i b_ii in [b_HH, b_DD] = [1, 5].
        assert 1.0 <= vals["B"] / vals["mu"] <= 5.0


def test_command_line_prints_one_table(capsys):
    assert cli_main(["reproduce", "sooklal_benefit", "--settings", "wine", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "b_DH=-10" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("method"))
    rows = lines[header + 2 : header + 2 + len(exp.METHODS)]
    assert [r[:30].strip() for r in rows] == list(exp.METHODS)
    for r in rows:
        b, mu = (float(v) for v in r[30:].split())
        assert np.isfinite(b) and mu <= 1.0
    with pytest.raises(SystemExit):
        exp.main(["--repeats", "0"])
