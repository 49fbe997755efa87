"""The ``min_recall`` constraint (issue 21, part 3): TP >= r P̂ with audit data, refused without.

Truth: direct counts on the rows at every cell of small lattices. Audit probabilities are
powers of two and weights dyadic, so the Horvitz–Thompson weights ``w / π`` and every sum of
them are exact in float64: the brute force and the grid agree bit for bit.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from coverage_data import brute_flags
from pipeline_data import base_config, comparable, direct_records, write_files
from test_pipeline_audit_estimation import audited_frame
from threshold_data import make_rows

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._recall_bounds import total_positives_bounds
from costlib.thresholds.loop._recalibration import RECALL_UNKNOWN, optimize_group
from costlib.thresholds.point._objectives import Constraints
from costlib.thresholds.point._operating_point import METHODS, RECALL_NEEDS_AUDIT, point_at
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import Target
from costlib_pipelines.commands.cli import main
from costlib_pipelines.decide.records import read_decisions


def audited_rows(n: int, k: int, seed: int, *, weighted: bool):
    """Rows rated where random thresholds in force flag them (π = 1, a few still pending) and on
    an audit of the rest (π = 1/2 above the median top score, 1/4 below).

    Returns ``scores, labels (True/False/None), weights, pi, edges, truth, rated``.
    """
    scores, truth, weights, edges = make_rows(n, k, seed, weighted=weighted)
    rng = np.random.default_rng(seed + 7)
    in_force = [rng.choice(e[1:]) for e in edges]
    flagged = brute_flags(scores, in_force, "any")
    top = scores.max(axis=1)
    pi = np.where(flagged, 1.0, np.where(top >= np.median(top), 0.5, 0.25))
    rated = np.where(flagged, rng.random(n) >= 0.03, rng.random(n) < pi)  # 3% pending
    labels = np.where(rated, truth, None).astype(object)
    return scores, labels, weights, pi, edges, truth, rated


def brute_table(grid, scores, truth, rated, w, pi, rule):
    """``(cell, TP, FP, U, V)`` at every tuple by direct counting with weights ``w / π``.

    Unrated rows with ``π = 1`` are gaps (``U``); unrated rows with ``π < 1`` are represented
    by the audit sample and leave the grid.
    """
    w = np.ones(len(truth)) if w is None else w
    ht = w / pi
    gap = ~rated & (pi == 1)
    rows = []
    for cell in itertools.product(*(range(n) for n in grid.shape)):
        flagged = brute_flags(scores, grid.threshold_values(cell), rule)
        tp = float(np.sum(ht[flagged & rated & truth]))
        fp = float(np.sum(ht[flagged & rated & ~truth]))
        unrated = float(np.sum(w[flagged & gap]))
        rows.append((cell, tp, fp, unrated, tp + fp + unrated))
    return rows


def brute_value(kwargs, tp, fp, positives):
    if kwargs.get("objective") == "f1":
        den = 2 * tp + (positives - tp) + fp
        return 1.0 if den == 0 else 2 * tp / den
    m = kwargs["target_marginal_precision"]
    return tp - m / (1 - m) * fp


def brute_feasible(kwargs, tp, fp, vol, positives):
    ok = tp >= kwargs["min_recall"] * positives
    if "min_precision" in kwargs:
        ok &= tp + fp > 0 and tp >= kwargs["min_precision"] * (tp + fp)
    if "max_volume" in kwargs:
        ok &= vol <= kwargs["max_volume"]
    return ok


def brute_violation(kwargs, tp, fp, vol, positives):
    """The largest relative violation (costlib.thresholds.point._objectives: nearest point)."""
    r = kwargs["min_recall"]
    out = [max(r * positives - tp, 0.0) / (r * positives)]
    if "min_precision" in kwargs:
        p = kwargs["min_precision"]
        prec = tp / (tp + fp) if tp + fp > 0 else 0.0
        out.append(max(p - prec, 0.0) / p)
    if "max_volume" in kwargs:
        out.append(max(vol - kwargs["max_volume"], 0.0) / max(kwargs["max_volume"], 1.0))
    return max(out)


CASES = [
    ({"target_marginal_precision": 0.3, "min_recall": 0.5}, 0.0),
    ({"target_marginal_precision": 0.6, "min_recall": 0.8}, 0.0),
    ({"target_marginal_precision": 0.3, "min_recall": 0.7}, 0.2),
    ({"objective": "f1", "min_recall": 0.9}, 0.0),
    ({"target_marginal_precision": 0.5, "min_recall": 0.6, "min_precision": 0.5}, 0.1),
    ({"target_marginal_precision": 0.2, "min_recall": 0.4, "max_volume": "median"}, 0.0),
    ({"target_marginal_precision": 0.3, "min_recall": 1.0}, 0.0),  # positives below every edge
    ({"objective": "f1", "min_recall": 0.95, "min_precision": 0.9}, 0.0),
]


@pytest.mark.parametrize("bound", ["point", "lower"])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("seed", [0, 1])
def test_hull_is_the_brute_force_best_feasible_cell_and_infeasible_is_nearest(k, rule, seed,
                                                                              bound):
    """``recall_bound="point"``: the floor is ``TP >= r P̂``; ``"lower"`` (the default):
    ``TP >= r P_U`` with ``P_U`` the upper bound of the total positives."""
    scores, labels, w, pi, edges, truth, rated = audited_rows(
        240, k, seed=31 * k + seed, weighted=bool(seed))
    grid = ThresholdGrid.from_scores(scores, labels, edges, w, audit_probabilities=pi)
    assert grid.has_audit
    positives = grid.total_positives
    floor_total = positives if bound == "point" else total_positives_bounds(grid)[1]
    assert floor_total >= positives
    ht = (np.ones(len(truth)) if w is None else w) / pi
    assert positives == float(np.sum(ht[rated & truth]))  # P̂, exactly
    table = brute_table(grid, scores, truth, rated, w, pi, rule)
    median = float(np.median([v for *_, v in table if v > 0]))
    seen = set()
    for spec, share in CASES:
        kwargs = {key: (median if val == "median" else val) for key, val in spec.items()}
        covered = [row for row in table if row[3] <= share * row[4]]
        feasible = [r for r in covered if brute_feasible(kwargs, r[1], r[2], r[4], floor_total)]
        informative = [r for r in feasible if r[4] > 0]
        for method in METHODS:
            point = optimize(grid, rule=rule, method=method, max_unrated_share=share,
                             check_resolution=False, recall_bound=bound, **kwargs)
            assert point.constraints["min_recall"] == kwargs["min_recall"]
            cell = next(r for r in table if r[0] == point.index)
            assert (point.tp, point.fp, point.unrated, point.volume) == cell[1:]
            assert point.estimated_recall == point.tp / positives
            if point.status != "infeasible":
                assert brute_feasible(kwargs, point.tp, point.fp, point.volume, floor_total)
                assert point.estimated_recall >= kwargs["min_recall"]
            if not informative:
                assert point.status == "infeasible", (method, spec)
                assert "min_recall" in point.reason or "min_precision" in point.reason
            if method != "hull":
                continue
            if not informative:
                seen.add("infeasible")
                # The nearest point: the least largest relative violation among covered tuples
                # that flag something (only the all-off tuple when no covered tuple does).
                pool = [r for r in covered if r[4] > 0] or covered
                least = min(brute_violation(kwargs, r[1], r[2], r[4], floor_total) for r in pool)
                got = brute_violation(kwargs, point.tp, point.fp, point.volume, floor_total)
                assert got == pytest.approx(least, rel=1e-12, abs=1e-15), spec
                assert point.volume > 0 or not any(r[4] > 0 for r in covered)
                if got > 0 and point.tp < kwargs["min_recall"] * floor_total:
                    assert "min_recall" in point.reason.split("misses")[-1]
                assert f"{positives:,.4g}" in point.reason  # the estimated total, 4 digits
                assert "estimated" in point.reason
                continue
            seen.add("feasible")
            values = {r[0]: brute_value(kwargs, r[1], r[2], positives) for r in feasible}
            best = max(values.values())
            assert point.objective == pytest.approx(best, rel=1e-12, abs=1e-12), spec
            assert point.index in [c for c, v in values.items()
                                   if v == pytest.approx(best, rel=1e-12, abs=1e-12)]
            assert point.status in ("ok", "coverage_limited"), spec
    # both branches were exercised (on these 240 rows the lower bound is often too wide for
    # any floor: honest, so only the point floor is required to reach both)
    assert seen == {"feasible", "infeasible"} if bound == "point" else "infeasible" in seen


def test_recall_one_is_infeasible_when_a_positive_scores_below_every_candidate():
    scores, labels, w, pi, edges, truth, rated = audited_rows(400, 2, seed=5, weighted=False)
    below = (scores < np.array([e[0] for e in edges])[None, :]).all(axis=1) & rated & truth
    assert below.any()
    grid = ThresholdGrid.from_scores(scores, labels, edges, w, audit_probabilities=pi)
    every = {"target_marginal_precision": 0.3, "method": "hull", "max_unrated_share": 1.0,
             "recall_bound": "point"}
    point = optimize(grid, min_recall=1.0, **every)
    assert point.status == "infeasible" and "min_recall" in point.reason
    tp, _ = grid.counts("any")
    assert point.tp == tp.max()  # the nearest point flags every positive it can
    # A floor at the best reachable recall is feasible, and met.
    reachable = float(tp.max()) / grid.total_positives
    ok = optimize(grid, min_recall=reachable, **every)
    assert ok.status in ("ok", "resolution_limited") and ok.tp == tp.max()


def test_min_recall_is_refused_without_audit_data():
    scores, labels, w, _, edges, _, _ = audited_rows(300, 2, seed=2, weighted=True)
    grid = ThresholdGrid.from_scores(scores, labels, edges, w)  # rated rows only
    assert not grid.has_audit
    for method in METHODS:
        with pytest.raises(ValueError, match="min_recall needs audit data") as info:
            optimize(grid, target_marginal_precision=0.3, min_recall=0.5, method=method)
        assert str(info.value) == RECALL_NEEDS_AUDIT
    assert "total number of positives P is unknown" in RECALL_NEEDS_AUDIT
    assert "docs/audit.md" in RECALL_NEEDS_AUDIT
    # A bad value is reported as such, with or without audit data.
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match=r"min_recall must be in \(0, 1\]"):
            optimize(grid, target_marginal_precision=0.3, min_recall=bad)
    # point_at chooses nothing: the floor is recorded, not checked.
    at = point_at(grid, [0.5, 0.5], target_marginal_precision=0.3, min_recall=0.5)
    assert at.constraints["min_recall"] == 0.5 and at.status == "ok"
    # Without min_recall the grid optimises as before.
    assert optimize(grid, target_marginal_precision=0.3).constraints["min_recall"] is None


def test_constraints_object_needs_the_total_for_recall():
    tp, fp, vol = np.array([0.0, 3.0, 8.0]), np.array([0.0, 1.0, 4.0]), np.array([0.0, 4.0, 12.0])
    with pytest.raises(ValueError, match="needs total_positives"):
        Constraints(min_recall=0.5).satisfied(tp, fp, vol)
    cons = Constraints(min_recall=0.5, total_positives=10.0)
    np.testing.assert_array_equal(cons.satisfied(tp, fp, vol), [False, False, True])
    np.testing.assert_allclose(cons.violations(tp, fp, vol)["min_recall"], [1.0, 0.4, 0.0])
    none = Constraints(min_recall=0.5, total_positives=0.0)  # no positive to miss
    assert none.satisfied(tp, fp, vol).all() and not none.violations(tp, fp, vol)[
        "min_recall"].any()
    with pytest.raises(ValueError, match="total_positives"):
        Constraints(min_recall=0.5, total_positives=float("nan"))


def test_resolution_bound_holds_for_finer_lattices_under_min_recall():
    """finer_bound relaxes the recall floor with TP(a): no finer lattice of the rows beats it."""
    scores, labels, w, pi, edges, _, _ = audited_rows(600, 2, seed=11, weighted=True)
    grid = ThresholdGrid.from_scores(scores, labels, edges, w, audit_probabilities=pi)
    fine_edges = [np.union1d(e, np.linspace(-1.5, 2.5, 41)) for e in edges]
    fine = ThresholdGrid.from_scores(scores, labels, fine_edges, w, audit_probabilities=pi)
    assert fine.total_positives == grid.total_positives
    for r in (0.4, 0.7, 0.85):
        kwargs = {"target_marginal_precision": 0.4, "min_recall": r, "method": "hull"}
        point = optimize(grid, **kwargs)
        finer = optimize(fine, **kwargs)
        if finer.status == "infeasible":
            continue
        assert point.resolution is not None
        assert finer.objective <= point.resolution["finer_bound"] + 1e-9, r


def test_recalibration_marks_groups_without_audit_rows_infeasible():
    scores, labels, w, pi, edges, _, _ = audited_rows(400, 2, seed=3, weighted=False)
    plain = ThresholdGrid.from_scores(scores, labels, edges, w)
    audited = ThresholdGrid.from_scores(scores, labels, edges, w, audit_probabilities=pi)
    options = {"min_recall": 0.6, "max_unrated_share": 1.0}
    args = {"methods": ["graph", "hull"], "target": Target.from_marginal_precision(0.3),
            "rule": "any", "min_positives": 1, "min_negatives": 1}
    unknown = optimize_group("g", plain, **options, **args)
    for method, point in unknown.points.items():
        assert point.status == "infeasible" and point.reason.startswith(RECALL_UNKNOWN)
        assert point.constraints["min_recall"] == 0.6
        # the thresholds are the best point without the floor
        free = optimize(plain, target_marginal_precision=0.3, method=method,
                        max_unrated_share=1.0)
        assert point.thresholds == free.thresholds
    known = optimize_group("g", audited, **options, **args)
    for method, point in known.points.items():
        want = optimize(audited, target_marginal_precision=0.3, method=method, **options)
        assert point.thresholds == want.thresholds and point.status == want.status
        assert point.estimated_recall >= 0.6


# ---------------------------------------------------------------------------- the pipeline
AUDIT = {"weight": "weight", "audit_probability": "audit_p"}


@pytest.fixture(scope="module")
def frame():
    return audited_frame(n=12_000, seed=4)


@pytest.fixture(scope="module")
def pattern(frame, tmp_path_factory):
    return write_files(frame, tmp_path_factory.mktemp("recall_in"), n_files=2,
                       row_group_size=3000)


def _recalibrate(raw, pattern, out, tmp_path, *extra):
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(raw))  # JSON is YAML
    return main(["recalibrate", "--config", str(path), "--input", pattern, "--output",
                 str(out), "--run-id", "r1", *extra])


def _records(out):
    return pq.read_table(out / "runs" / "r1" / "operating_points.parquet").to_pylist()


def test_pipeline_min_recall_equals_costlib_directly(frame, pattern, tmp_path, capsys):
    config = base_config(columns=AUDIT, target={"marginal_precision": 0.4},
                         coverage={"max_unrated_share": 0.0},
                         constraints={"min_recall": 0.7})
    code = _recalibrate(config.raw, pattern, tmp_path / "out", tmp_path)
    assert code == 3  # market_c has no audit rows: infeasible, the guard holds the run
    printed = capsys.readouterr().out
    got = _records(tmp_path / "out")
    want = comparable(direct_records(frame, config))
    for a, b in zip(comparable(got), want, strict=True):
        assert a == b, {k: (a[k], b[k]) for k in a if a[k] != b[k]}
    assert {r["min_recall"] for r in got} == {0.7}
    by_group = {(r["group"], r["method"]): r for r in got}
    for group in ("market_a", "market_b", "__all__"):
        for method in config.methods:
            record = by_group[(group, method)]
            assert record["recall_bound"] == "lower"
            if record["point_status"] != "infeasible":
                assert record["estimated_recall"] >= 0.7, (group, method)
                # the floor holds on the bound: TP >= r P_U, P_U the interval's upper end
                assert record["tp"] >= 0.7 * record["estimated_total_positives_ci_high"] - 1e-9
            if method == config.decision_method and record["recall_warning"]:
                assert f"recall: group {group}: estimate" in printed
    warned = [g for g in ("market_a", "market_b", "__all__")
              if by_group[(g, config.decision_method)]["recall_warning"]]
    assert warned  # printed by the command, although the guard held the run
    for method in config.methods:
        record = by_group[("market_c", method)]
        assert record["point_status"] == "infeasible"
        assert record["reason"].startswith("no audit rows in this group's grid: recall unknown")
        assert record["estimated_recall"] is None


def test_cli_min_recall_flag_overrides_the_config(frame, pattern, tmp_path, capsys):
    raw = base_config(columns=AUDIT, target={"marginal_precision": 0.4}).raw
    assert _recalibrate(raw, pattern, tmp_path / "out", tmp_path, "--min-recall", "0.6") == 3
    got = _records(tmp_path / "out")
    expected = base_config(columns=AUDIT, target={"marginal_precision": 0.4},
                           constraints={"min_recall": 0.6})
    assert comparable(got) == comparable(direct_records(frame, expected))
    manifest = json.loads((tmp_path / "out" / "runs" / "r1" / "manifest.json").read_text())
    assert manifest["config"]["constraints"]["min_recall"] == 0.6
    for bad in ("0", "1.5", "nan"):
        assert _recalibrate(raw, pattern, tmp_path / "bad", tmp_path, "--min-recall", bad) == 2
        assert "--min-recall" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_min_recall_without_the_audit_column_exits_2_naming_the_key(pattern, tmp_path, capsys):
    raw = {**base_config().raw, "constraints": {"min_recall": 0.5}}
    assert _recalibrate(raw, pattern, tmp_path / "o", tmp_path) == 2
    err = capsys.readouterr().err
    assert "constraints.min_recall:" in err and "columns.audit_probability" in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()  # refused before reading any data
    # The flag on such a config: the same refusal.
    assert _recalibrate(base_config().raw, pattern, tmp_path / "o", tmp_path,
                        "--min-recall", "0.5") == 2
    assert "constraints.min_recall:" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    # Out of range in the config: the schema names the key.
    raw = {**base_config(columns=AUDIT).raw, "constraints": {"min_recall": 1.5}}
    assert _recalibrate(raw, pattern, tmp_path / "o", tmp_path) == 2
    assert "constraints.min_recall:" in capsys.readouterr().err


def test_an_overridden_unmeetable_min_recall_decides_with_the_highest_recall_point(
        frame, pattern, tmp_path, capsys):
    """min_recall 0.99 cannot be shown on this audit: the run is held. Published anyway by a
    person, it warns (before decide applies anything) what decide will apply, and decide gives
    each such group its nearest point, the covered point with the most true positives, instead
    of flagging nothing: asking for more recall never yields none."""
    raw = base_config(columns=AUDIT, target={"marginal_precision": 0.4},
                      coverage={"max_unrated_share": 0.0},
                      constraints={"min_recall": 0.99}).raw
    out = tmp_path / "out"
    assert _recalibrate(raw, pattern, out, tmp_path) == 3
    assert "if published anyway, decide applies this nearest point" in capsys.readouterr().err
    records = [r for r in _records(out) if r["method"] == "graph"]
    below = sorted(r["group"] for r in records if r["point_status"] == "infeasible")
    assert below  # the run was held for them
    assert main(["publish", "--output", str(out), "--run-id", "r1", "--by", "ana",
                 "--reason", "recall floor too strict for this audit"]) == 0
    printed = capsys.readouterr().out
    for group in below:
        assert f"warning: group {group!r}: the point is infeasible; decide applies this " \
               "nearest point" in printed
    main(["status", "--output", str(out)])
    status = capsys.readouterr().out
    groups = [g for g in below if g != "__all__"]  # status lists the groups
    assert (f"graph: {len(groups)} group(s) infeasible, no point meets min_recall (costlib "
            "decide applies their nearest point") in status, status
    assert "decide will flag nothing" not in status
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(raw))
    assert main(["decide", "--config", str(path), "--input", pattern, "--operating-points",
                 str(out), "--output", str(tmp_path / "dec")]) == 0
    printed = capsys.readouterr().out
    assert f"warning: {len(below)} group(s) miss min_recall" in printed
    decisions = read_decisions(str(tmp_path / "dec")).to_pandas()
    by_group = {r["group"]: r for r in records}
    checked = []
    for group, rows in decisions.groupby("group"):
        record = by_group.get(group, by_group["__all__"])
        if record["point_status"] != "infeasible":
            continue
        checked.append(group)
        # decided, not null, with the record's thresholds (by hand, rule any)
        assert rows["threshold_decision"].notna().all(), group
        ids = rows["item_id"].astype(np.int64).to_numpy()
        scores = frame.set_index("item_id").loc[ids, ["text_model", "image_model"]]
        fires = np.nan_to_num(scores.to_numpy(float), nan=-np.inf) >= np.asarray(
            [float(t) for t in record["thresholds"]])
        assert rows["threshold_decision"].to_numpy(bool).tolist() == fires.any(axis=1).tolist()
    assert checked == [g for g in below if g != "__all__"], (checked, below)
