"""The audit a recall half-width needs depends on the audit's rows, not on how they are cut.

Truth: the same rows cut into more strata (equal or nearly equal ``π``) give the same advice,
in the library and through ``costlib recalibrate``; Jeffreys' posterior mean ``(x + ½) / π`` of
one stratum by hand; and a simulation from known populations (the families of
``tests/benchmarks/bench_recall_coverage.py``): the design recommended from one audit, audited
again, reaches the half-width asked within 20%.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.audit import audit_for_recall_width
from costlib.audit._recall_power import same_pi_classes

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))


def test_one_stratum_cut_in_ten_with_pi_apart_by_1e7_gives_the_same_share():
    caught, rows, pi, audited, found = 70.0, 60_000.0, 0.01, 600.0, 2.0
    whole = audit_for_recall_width(caught, [rows], [pi], [audited], [found], 0.05)
    pis = pi + 1e-7 * np.arange(10)
    x = np.zeros(10)
    x[[3, 7]] = 1.0
    cut = audit_for_recall_width(caught, np.full(10, rows / 10), pis, np.full(10, audited / 10),
                                 x, 0.05)
    assert whole.reachable and cut.reachable
    assert cut.share == pytest.approx(whole.share, rel=0.01)
    assert 0.01 < whole.share < 1.0  # a real answer, not a bound of the search
    # one stratum: the posterior mean of the missed positives is Jeffreys' (x + 1/2) / π
    assert whole.expected_missed == pytest.approx((found + 0.5) / pi, rel=0.01)


def test_strata_of_pi_within_five_percent_are_one_class():
    pi = np.array([0.0150001, 0.1, 0.015, 0.0155, 0.016, 0.0101])
    cls = same_pi_classes(pi)
    assert cls[0] == cls[2] == cls[3]  # 0.015 .. 0.0155: within 5% of 0.015
    assert cls[4] != cls[0]  # 0.016 is 6.7% above 0.015
    assert len({cls[1], cls[4], cls[5], cls[0]}) == 4


LEVELS = (0.002, 0.01, 0.05, 0.25, 1.0)  # the π of distinct design strata


@st.composite
def audits_and_a_cut(draw):
    """Strata of distinct π with their audit, and one of them cut into several parts of
    equal or nearly equal π (relative jitter up to 1e-3), rows and finds spread at random."""
    k = draw(st.integers(1, 4))
    levels = draw(st.lists(st.sampled_from(LEVELS), min_size=k, max_size=k, unique=True))
    pi = np.array(levels)
    rows = np.array([draw(st.integers(2_000, 200_000)) for _ in range(k)], dtype=float)
    audited = np.round(rows * pi)
    found = np.array([draw(st.integers(0, min(30, int(a)))) for a in audited], dtype=float)
    caught = float(draw(st.integers(5, 500)))
    h = draw(st.integers(0, k - 1))
    parts = draw(st.integers(2, 12))
    share = np.array(draw(st.lists(st.integers(1, 20), min_size=parts, max_size=parts)),
                     dtype=float)
    share /= share.sum()
    jitter = draw(st.sampled_from([0.0, 1e-7, 1e-5, 1e-3]))
    signs = np.array(draw(st.lists(st.floats(-1, 1), min_size=parts, max_size=parts)))
    part_pi = np.minimum(1.0, pi[h] * (1 + jitter * signs))
    where = draw(st.lists(st.integers(0, parts - 1), min_size=int(found[h]),
                          max_size=int(found[h])))
    part_found = np.bincount(np.asarray(where, dtype=np.int64), minlength=parts).astype(float)
    keep = np.arange(k) != h
    cut = (np.r_[rows[keep], rows[h] * share], np.r_[pi[keep], part_pi],
           np.r_[audited[keep], audited[h] * share], np.r_[found[keep], part_found])
    return caught, (rows, pi, audited, found), cut, jitter


@settings(max_examples=25, deadline=None)
@given(audits_and_a_cut(), st.sampled_from([0.03, 0.05, 0.1]))
def test_cutting_a_stratum_into_parts_of_nearly_equal_pi_changes_the_share_under_5pc(
        case, half_width):
    caught, whole, cut, jitter = case
    a = audit_for_recall_width(caught, *whole, half_width)
    b = audit_for_recall_width(caught, *cut, half_width)
    assert a.reachable == b.reachable
    assert b.share == pytest.approx(a.share, rel=0.05, abs=1e-9)
    if jitter == 0.0:  # the same π: the same classes, the same draws
        assert b.share == pytest.approx(a.share, rel=1e-6, abs=1e-12)


def test_a_census_of_a_cut_stratum_is_a_census():
    """Two parts of one stratum with the same π: their class's π is a rows-weighted mean,
    which rounds just below the stratum's, so the scale that audits every row left the class
    a hair below 1 and called the design unreachable; it is a census, half-width 0."""
    whole = ([10793.0], [0.01], [108.0], [0.0])
    cut = ([2158.6, 8634.4], [0.01, 0.01], [21.6, 86.4], [0.0, 0.0])
    a = audit_for_recall_width(5.0, *whole, 0.03)
    b = audit_for_recall_width(5.0, *cut, 0.03)
    assert a.reachable and b.reachable
    assert a.half_width == b.half_width == 0.0
    assert a.share == b.share == 1.0


def test_the_recommended_design_reaches_the_half_width_asked():
    """From one audit of each of these populations (prevalence 2%, a 5% audit: the first audit
    finds 20 or more of the missed positives) the recommended design, audited again 30 times,
    has a mean half-width within 20% of the 0.05 asked. ``bench_recall_power.py`` prints every
    family, including the thin audits where it is not."""
    from bench_recall_power import make_cell, run_cell

    for n, (design, family) in enumerate([("default", "near"), ("default", "far"),
                                          ("score", "near"), ("score", "far")]):
        cell = make_cell(0.02, 0.05, design, family, 1, 60_000, seed=100 + n)
        out = run_cell(cell, 0.05, audits=6, follow_ups=30, seed=200 + n)
        assert out.unreachable == 0
        assert out.found >= 10, (design, family)
        assert out.achieved == pytest.approx(0.05, rel=0.2), (design, family, out)


def _shares_needed(frame, tmp_path, name):
    """``audit_share_needed`` and the strata count of every record of ``costlib recalibrate``
    on ``frame`` (the audited stream of the pipeline audit tests)."""
    import json

    import pyarrow.parquet as pq
    from pipeline_data import base_config, write_files

    from costlib_pipelines.commands.cli import main

    config = base_config(columns={"weight": "weight", "audit_probability": "audit_p"},
                         target={"marginal_precision": 0.05})
    pattern = write_files(frame, tmp_path / name / "in", n_files=2, row_group_size=5_000)
    path = tmp_path / name / "config.yaml"
    path.write_text(json.dumps(config.raw))
    out = tmp_path / name / "out"
    code = main(["recalibrate", "--config", str(path), "--input", pattern, "--output",
                 str(out), "--run-id", "r1"])
    assert code in (0, 3)
    records = pq.read_table(out / "runs" / "r1" / "operating_points.parquet").to_pylist()
    return {(r["group"], r["method"]): (r["audit_share_needed"], len(r["audit_strata_pi"] or []))
            for r in records}


def test_pi_split_across_days_gives_the_same_share_needed_in_recalibrate(tmp_path):
    """The same rows and labels, the audit probability of half the days 1e-7 higher: more
    strata (cells mix the two values), the same ``audit_share_needed`` within 5%."""
    from test_pipeline_audit_estimation import audited_frame

    frame = audited_frame(n=20_000, seed=3)
    split = frame.copy()
    later_days = (split.index % 10 >= 5) & (split["audit_p"] < 1).to_numpy()
    split.loc[later_days, "audit_p"] = split.loc[later_days, "audit_p"] + 1e-7
    one = _shares_needed(frame, tmp_path, "one")
    two = _shares_needed(split, tmp_path, "two")
    assert one.keys() == two.keys()
    compared = 0
    for key, (share, strata) in one.items():
        other, more = two[key]
        assert (share is None) == (other is None), key
        if share is None:
            continue
        compared += 1
        assert more > strata, key  # the cut is finer
        assert other == pytest.approx(share, rel=0.05), key
    assert compared >= 4
