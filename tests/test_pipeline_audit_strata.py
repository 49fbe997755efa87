"""costlib decide with ``audit.strata.relative_to: point``: strata in lattice steps below the
group's thresholds in force, checked against a by-hand walk down the lattice."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from test_pipeline_audit_sampling import decisions, manifest
from test_pipeline_decide import (
    CLASSIFIERS,
    THRESHOLDS,
    expected_threshold_decisions,
    make_config,
    make_stream,
    op_record,
    write_files,
    write_operating_points,
)

from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.records import records_to_table

BINS = 16
STEPS, WEIGHTS = [2, 5], [0.5, 3.0, 10.0]
RELATIVE = {"enabled": True, "design": "fixed", "floor": 0.001, "budget_share": 0.01,
            "strata": {"relative_to": "point", "steps": STEPS, "weights": WEIGHTS}}


def config_file(path: Path, audit) -> str:
    raw = dict(make_config(buckets=3).raw)
    raw["grid"] = {"edges": "uniform", "bins": BINS, "range": [0.0, 1.0]}
    raw["audit"] = audit
    path.write_text(json.dumps(raw))
    return str(path)


def run(tmp_path: Path, config: str, out: Path, run_id: str, seed: int, rows: int = 4000):
    frame = make_stream(rows, seed=seed)
    inputs = write_files(frame, tmp_path / f"in-{run_id}", 2, rows // 8)
    ops = write_operating_points(tmp_path / "ops.parquet")
    code = main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                 "--output", str(out), "--run-id", run_id])
    return code, frame


def hand_depths(frame) -> np.ndarray:
    """Walk each classifier's threshold down the lattice one edge at a time until it is at or
    below the row's score; depth = fewest steps over the classifiers (rule any)."""
    applied = [t for s, t, _ in THRESHOLDS.values() if t is not None]
    lattice = [sorted(set(np.linspace(0.0, 1.0, BINS).tolist())  # grid.bins = edges
                      | {t[j] for t in applied if np.isfinite(t[j])}) for j in range(2)]
    out = np.empty(len(frame))
    for i, (group, s0, s1) in enumerate(zip(frame["group"], frame["text_model"],
                                            frame["image_model"], strict=True)):
        _, t, _ = THRESHOLDS.get(group, THRESHOLDS["__all__"])
        t = [np.inf, np.inf] if t is None else t  # no usable point: nothing flagged ("off")
        best = np.inf
        for j, s in enumerate((s0, s1)):
            if np.isnan(s):
                continue
            if s >= t[j]:
                best = 0
                continue
            position, steps = t[j], 0
            while True:
                lower = [e for e in lattice[j] if e < position]
                if not lower:
                    break
                position, steps = max(lower), steps + 1
                if position <= s:
                    best = min(best, steps)
                    break
        out[i] = best
    return out


def hand_strata(depth: np.ndarray) -> np.ndarray:
    return np.where(depth <= STEPS[0], 2, np.where(depth <= STEPS[1], 1, 0))


def test_audit_probability_equals_the_hand_computation(tmp_path):
    out = tmp_path / "out"
    code, frame = run(tmp_path, config_file(tmp_path / "c.yaml", RELATIVE), out, "r1", seed=5)
    assert code == 0
    depth = hand_depths(frame)
    flagged = np.array([d is True for d in expected_threshold_decisions(frame, "any")[0]])
    assert (depth[flagged] == 0).all() and (depth[~flagged] > 0).all()
    stratum = hand_strata(depth)
    pi = np.clip(0.01 * np.array(WEIGHTS), 0.001, 1.0)  # fixed design: budget * weight
    got = decisions(out)
    ids = frame["item_id"].astype(str).to_numpy()
    want = np.where(flagged, 1.0, pi[stratum])
    assert got.loc[ids, "audit_probability"].to_numpy().tolist() == want.tolist()
    audit = manifest(out, "r1")["audit"]
    n = np.bincount(stratum[~flagged], minlength=3)
    assert [s["unflagged"] for s in audit["strata"]] == n.tolist()
    assert audit["relative_to"] == "point"
    assert audit["cutoffs"]["default"] == STEPS and audit["cutoffs"]["by_group"] == {}
    assert audit["lattice"]["source"] == "config_edges"
    assert audit["expected"] == pytest.approx(float(np.sum(n * pi)), abs=1e-6)
    assert audit["audited"] == int(got.loc[ids, "audit"].sum())
    assert all(n > 0)


def test_auto_design_budget_identity_on_relative_counts(tmp_path):
    config = config_file(tmp_path / "a.yaml", {**RELATIVE, "design": "auto"})
    out = tmp_path / "out"
    code, first = run(tmp_path, config, out, "d1", seed=6, rows=20_000)
    assert code == 0
    flagged1 = np.array([d is True for d in expected_threshold_decisions(first, "any")[0]])
    n1 = np.bincount(hand_strata(hand_depths(first))[~flagged1], minlength=3)
    code, second = run(tmp_path, config, out, "d2", seed=7, rows=20_000)
    assert code == 0
    audit = manifest(out, "d2")["audit"]
    assert audit["sizing"]["counts_from"] == "d1" and audit["sizing"]["unflagged"] == n1.tolist()
    assert "relative strata" in audit["sizing"]["spread_reason"]
    pi = np.array([s["probability"] for s in audit["strata"]])
    assert np.sum(n1 * pi) == pytest.approx(0.01 * n1.sum(), rel=1e-9)
    np.testing.assert_allclose(pi / np.array(WEIGHTS), pi[0] / WEIGHTS[0], rtol=1e-12)
    flagged2 = np.array([d is True for d in expected_threshold_decisions(second, "any")[0]])
    stratum2 = hand_strata(hand_depths(second))
    got = decisions(out)
    ids = second["item_id"].astype(str).to_numpy()
    want = np.where(flagged2, 1.0, pi[stratum2])
    assert got.loc[ids, "audit_probability"].to_numpy().tolist() == want.tolist()


@pytest.mark.parametrize(("strata", "key"), [
    ({"relative_to": "points", "steps": STEPS, "weights": WEIGHTS}, "audit.strata.relative_to"),
    ({"relative_to": "point", "steps": [5, 2], "weights": WEIGHTS}, "audit.strata.steps"),
    ({"relative_to": "point", "steps": [0, 2], "weights": WEIGHTS}, "audit.strata.steps"),
    ({"relative_to": "point", "steps": [2], "weights": WEIGHTS}, "audit.strata.weights"),
    ({"relative_to": "point", "steps": STEPS, "edges": [0.3], "weights": WEIGHTS},
     "audit.strata.edges"),
    ({"relative_to": "score", "steps": STEPS, "edges": [0.3, 0.6], "weights": WEIGHTS},
     "audit.strata.steps"),
    ({"relative_to": "point", "steps": STEPS, "weights": WEIGHTS, "proposal_stratum": 3},
     "audit.strata.proposal_stratum"),
    ({"relative_to": "point", "steps": STEPS, "weights": WEIGHTS, "proposal_stratum": -1},
     "audit.strata.proposal_stratum"),
    ({"relative_to": "point", "steps": STEPS, "weights": WEIGHTS, "proposal_stratum": 1.5},
     "audit.strata.proposal_stratum"),
    ({"relative_to": "score", "edges": [0.3, 0.6], "weights": WEIGHTS, "proposal_stratum": 1},
     "audit.strata.proposal_stratum"),
])
def test_bad_relative_strata_exit_2_naming_the_key(tmp_path, capsys, strata, key):
    inputs = write_files(make_stream(100, seed=4), tmp_path / "in", 1, 100)
    ops = write_operating_points(tmp_path / "ops.parquet")
    config = config_file(tmp_path / "c.yaml", {**RELATIVE, "strata": strata})
    code = main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                 "--output", str(tmp_path / "o")])
    assert code == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert CLASSIFIERS


SHARES = [0.05, 0.3]
SHARE_AUDIT = {"enabled": True, "design": "auto", "floor": 0.001, "budget_share": 0.01,
               "strata": {"relative_to": "point", "shares": SHARES, "weights": WEIGHTS}}


def hand_cutoffs(depths: np.ndarray) -> list[float]:
    """Smallest depth whose cumulative count of unflagged rows reaches each share (the
    largest finite depth when the finite depths hold less)."""
    finite = np.sort(depths[np.isfinite(depths)])
    out = []
    for q in SHARES:
        need = q * depths.size
        k = next((d for d in np.unique(finite) if np.count_nonzero(finite <= d) >= need),
                 finite.max())
        out.append(float(k))
    return out


def test_share_strata_follow_the_previous_runs_depths(tmp_path):
    config = config_file(tmp_path / "s.yaml", SHARE_AUDIT)
    out = tmp_path / "out"
    code, first = run(tmp_path, config, out, "s1", seed=8, rows=20_000)
    assert code == 0
    a1 = manifest(out, "s1")["audit"]
    assert a1["cutoffs"]["from"] is None  # no previous run: one stratum, pi = budget
    got1 = decisions(out)
    ids1 = first["item_id"].astype(str).to_numpy()
    flagged1 = np.array([d is True for d in expected_threshold_decisions(first, "any")[0]])
    assert set(got1.loc[ids1[~flagged1], "audit_probability"]) == {0.01}
    depth1 = hand_depths(first)
    groups1 = first["group"].to_numpy()
    written = json.loads((out / "runs" / "s1" / "audit_cells.json").read_text())
    lattice = written["lattice"]
    assert lattice == [sorted(set(np.linspace(0.0, 1.0, BINS).tolist())
                              | {t[j] for _, t, _ in THRESHOLDS.values()
                                 if t is not None and np.isfinite(t[j])}) for j in range(2)]
    for g in np.unique(groups1):
        want: dict[str, int] = {}
        for s0, s1 in first.loc[groups1 == g, list(CLASSIFIERS)].itertuples(index=False):
            key = ",".join(str(0 if np.isnan(v) else sum(e <= v for e in lattice[j]))
                           for j, v in enumerate((s0, s1)))
            want[key] = want.get(key, 0) + 1
        assert written["cells"][g] == dict(sorted(want.items()))

    code, second = run(tmp_path, config, out, "s2", seed=9, rows=20_000)
    assert code == 0
    a2 = manifest(out, "s2")["audit"]
    cutoffs = {g: hand_cutoffs(depth1[(groups1 == g) & ~flagged1]) for g in np.unique(groups1)}
    assert a2["cutoffs"]["by_group"] == cutoffs and a2["cutoffs"]["from"] == "s1"
    # the previous run's rows re-cut by these cutoffs are the sizing counts: budget identity
    recut = np.zeros(3, dtype=int)
    for g, k in cutoffs.items():
        d = depth1[(groups1 == g) & ~flagged1]
        np.add.at(recut, 2 - (d[:, None] > np.asarray(k)).sum(axis=1), 1)
    assert a2["sizing"]["unflagged"] == recut.tolist()
    pi = np.array([s["probability"] for s in a2["strata"]])
    assert np.sum(recut * pi) == pytest.approx(0.01 * recut.sum(), rel=1e-9)
    # records: pi of the row's stratum under its group's cutoffs
    depth2 = hand_depths(second)
    flagged2 = np.array([d is True for d in expected_threshold_decisions(second, "any")[0]])
    k2 = np.array([cutoffs[g] for g in second["group"]])
    stratum2 = 2 - (depth2[:, None] > k2).sum(axis=1)
    got = decisions(out)
    ids = second["item_id"].astype(str).to_numpy()
    want = np.where(flagged2, 1.0, pi[stratum2])
    assert got.loc[ids, "audit_probability"].to_numpy().tolist() == want.tolist()
    share = a2["audited"] / a2["unflagged"]
    assert abs(share - 0.01) <= 0.0015, share


def test_defaults_relative_share_strata_and_auto_design_score_strata_unchanged():
    from pathlib import Path as _Path

    import yaml

    from costlib_pipelines.config import RunConfig
    from costlib_pipelines.config_audit import DEFAULT_AUDIT_SHARES, DEFAULT_AUDIT_WEIGHTS

    base = {"classifiers": list(CLASSIFIERS), "target": {"marginal_precision": 0.3}}
    audit = RunConfig.from_dict({**base, "audit": {"enabled": True}}).raw["audit"]
    assert audit["design"] == "auto" and audit["strata"]["relative_to"] == "point"
    assert audit["strata"]["shares"] == DEFAULT_AUDIT_SHARES
    assert audit["strata"]["weights"] == DEFAULT_AUDIT_WEIGHTS
    named = RunConfig.from_dict({**base, "audit": {"enabled": True, "strata": {
        "edges": [0.3, 0.6], "weights": [0.5, 3, 10]}}})
    assert named.audit.design == "fixed" and not named.relative_strata
    assert named.audit_design().edges == (0.3, 0.6)
    # proposals: the third-nearest stratum (the next 4%) by default; off for score strata
    default = RunConfig.from_dict({**base, "audit": {"enabled": True}})
    assert default.proposal_stratum == len(DEFAULT_AUDIT_WEIGHTS) - 3 == 2
    assert named.proposal_stratum is None

    def band(strata, **audit):
        return RunConfig.from_dict({**base, "audit": {"enabled": True, **audit, "strata": {
            "relative_to": "point", **strata}}}).proposal_stratum
    # fewer than four strata: the third-nearest would be the farthest (a no-op): off unless set
    assert band({"steps": [2], "weights": [1, 5]}) is None
    assert band({"steps": [2, 5], "weights": [1, 2, 3]}) is None
    assert band({"steps": [2, 5], "weights": [1, 2, 3], "proposal_stratum": 1}) == 1
    assert band({"shares": [0.01, 0.1, 0.3], "weights": [1, 2, 3, 4]}) == 1  # own weights
    assert band({"steps": [2, 5], "weights": [1, 2, 3]}, design="fixed") is None  # no total
    assert band({"steps": [2, 5], "weights": [1, 2, 3], "proposal_stratum": 1},
                design="fixed") == 1
    assert band({"proposal_stratum": None}) is None
    # an override of the strata re-derives the default (it is not stored in the config)
    fewer = default.with_overrides({"audit.strata.shares": [0.01, 0.1],
                                    "audit.strata.weights": [1.0, 10.0, 100.0]}, source="test")
    assert fewer.proposal_stratum is None  # three strata: off
    four = default.with_overrides({"audit.strata.shares": [0.01, 0.1, 0.3],
                                   "audit.strata.weights": [1.0, 5.0, 10.0, 100.0]},
                                  source="test")
    assert four.proposal_stratum == 1
    # the example config spells out the defaults
    example = yaml.safe_load((_Path(__file__).parents[1] / "schemas" /
                              "example_config.yaml").read_text())["audit"]
    for key in ("design", "floor", "budget_share"):
        assert example[key] == audit[key]
    keys = ("relative_to", "shares", "weights")
    assert {k: example["strata"][k] for k in keys} == {k: audit["strata"][k] for k in keys}
    assert example["strata"]["proposal_stratum"] == default.proposal_stratum


@pytest.mark.parametrize("budget", [0.01, 0.0025])
def test_default_strata_audit_the_nearest_occupied_step_as_a_census(budget):
    """The default nearest band holds the first occupied lattice depth(s) and the auto design
    gives it pi = 1 at the default and the thin budget (issue 21's recovery diagnosis,
    docs/audit.md), with the budget identity intact. Truth by hand: the cutoffs by walking
    the depths, the scale by bisection on the expected audited rows."""
    from costlib.audit._neyman import neyman_design
    from costlib.audit._strata import share_cutoffs, stratum_counts
    from costlib_pipelines.config_audit import DEFAULT_AUDIT_SHARES, DEFAULT_AUDIT_WEIGHTS

    rng = np.random.default_rng(21)
    for _ in range(20):
        # rows per lattice depth 1..D below the point, then depth inf: few rows near the point
        # (as below a threshold in a distribution's tail), many far
        d = int(rng.integers(20, 80))
        counts = np.round(rng.uniform(0.5, 2.0) * np.exp(np.linspace(0, 9, d))).astype(float)
        counts[: int(rng.integers(0, 3))] = 0.0  # the first steps may be empty
        counts = np.append(counts, rng.integers(0, 20_000))
        total = counts.sum()
        cutoffs = share_cutoffs(counts, DEFAULT_AUDIT_SHARES)
        # by hand: the smallest depth whose cumulative count reaches each share
        want = []
        for q in DEFAULT_AUDIT_SHARES:
            cum, k = 0.0, 0
            while k < d and cum < q * total * (1 - 1e-12):
                cum += counts[k]
                k += 1
            want.append(float(max(k, 1)))
        assert cutoffs.tolist() == want
        first = int(np.flatnonzero(counts[:-1])[0]) + 1
        assert cutoffs[0] >= first  # the band reaches the nearest occupied step
        n = stratum_counts(counts, cutoffs, len(DEFAULT_AUDIT_WEIGHTS))
        design, _ = neyman_design(n, DEFAULT_AUDIT_WEIGHTS, tuple(h + 0.5 for h in range(4)),
                                  budget, 0.0005)
        pi = np.asarray(design.weights)
        lo, hi = 0.0, 1.0
        for _ in range(200):  # the scale c with sum_h N_h min(1, max(floor, c w_h)) = budget
            c = (lo + hi) / 2
            spent = np.sum(n * np.minimum(1, np.maximum(0.0005, c * np.asarray(
                DEFAULT_AUDIT_WEIGHTS))))
            lo, hi = (c, hi) if spent < budget * total else (lo, c)
        want_pi = np.minimum(1, np.maximum(0.0005, hi * np.asarray(DEFAULT_AUDIT_WEIGHTS)))
        assert np.allclose(pi[n > 0], want_pi[n > 0], rtol=1e-6)
        assert np.isclose(np.sum(n * pi), budget * total, rtol=1e-6)
        if n[-1] <= 0.3 * budget * total:  # a band this cheap is a census
            assert pi[-1] == 1.0


def test_share_strata_without_previous_counts_audit_at_the_budget_fixed_or_auto(tmp_path):
    for design in ("fixed", "auto"):
        config = config_file(tmp_path / f"{design}.yaml", {**SHARE_AUDIT, "design": design})
        out = tmp_path / f"out-{design}"
        code, frame = run(tmp_path, config, out, "first", seed=10, rows=2000)
        assert code == 0
        flagged = np.array([d is True for d in expected_threshold_decisions(frame, "any")[0]])
        got = decisions(out)
        ids = frame["item_id"].astype(str).to_numpy()
        # not budget_share * weights[-1] = 0.6: one uniform stratum at the budget
        assert set(got.loc[ids[~flagged], "audit_probability"]) == {0.01}
        assert "budget_share for every unflagged row" in \
            manifest(out, "first")["audit"]["sizing"]["reason"]


#: g0 would lower its text threshold and g1 switch its image model on; their evidence rule kept
#: the thresholds in force (the records' proposed_thresholds).
PROPOSED = {"g0": [0.4, 0.7], "g1": [0.3, 0.5]}


def write_points_with_proposals(path: Path) -> str:
    records = []
    for group, (status, thresholds, fallback) in THRESHOLDS.items():
        record = op_record(group, status, thresholds, fallback)
        record["proposed_thresholds"] = PROPOSED.get(group)
        records.append(record)
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


@pytest.mark.parametrize("band", [1, 2, None])
def test_rows_of_a_proposed_point_are_audited_in_the_proposal_stratum(tmp_path, band, capsys):
    strata = {**RELATIVE["strata"], "proposal_stratum": band}
    config = config_file(tmp_path / "c.yaml", {**RELATIVE, "strata": strata})
    frame = make_stream(4000, seed=5)
    inputs = write_files(frame, tmp_path / "in", 2, 500)
    ops = write_points_with_proposals(tmp_path / "ops.parquet")
    out = tmp_path / "out"
    assert main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                 "--output", str(out), "--run-id", "r1"]) == 0
    flagged = np.array([d is True for d in expected_threshold_decisions(frame, "any")[0]])
    stratum = hand_strata(hand_depths(frame))
    # by hand: a row of g0 / g1 that its group's proposal flags (rule any), unflagged today
    s = frame[["text_model", "image_model"]].to_numpy()
    proposed = np.zeros(len(frame), dtype=bool)
    for group, t in PROPOSED.items():
        mine = (frame["group"] == group).to_numpy()
        proposed |= mine & ((s[:, 0] >= t[0]) | (s[:, 1] >= t[1]))
    raised = proposed & ~flagged & (stratum < (band if band is not None else -1))
    if band is not None:
        stratum = np.where(proposed, np.maximum(stratum, band), stratum)
    pi = np.clip(0.01 * np.array(WEIGHTS), 0.001, 1.0)
    got = decisions(out)
    ids = frame["item_id"].astype(str).to_numpy()
    assert got.loc[ids, "audit_probability"].to_numpy().tolist() == np.where(
        flagged, 1.0, pi[stratum]).tolist()
    audit = manifest(out, "r1")["audit"]
    assert [h["unflagged"] for h in audit["strata"]] == np.bincount(
        stratum[~flagged], minlength=3).tolist()
    assert audit["proposal"] == {"stratum": band,
                                 "unflagged": int(raised.sum()) if band is not None else 0}
    summary = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("audit:")]
    promoted = (f"; {int(raised.sum()):,} rows of proposed moves promoted"
                if band is not None else "")
    assert summary == [f"audit: {audit['audited']:,} unflagged rows sent to audit (expected "
                       f"{audit['expected']:,.1f} under the fixed design{promoted}): rate them "
                       "like flagged rows and keep audit_probability for recalibrate"]
    if band is not None:
        assert raised.sum() > 10  # the case is not empty


def test_auto_design_counts_the_proposed_rows_where_they_will_be_audited(tmp_path):
    strata = {**RELATIVE["strata"], "proposal_stratum": 2}
    config = config_file(tmp_path / "a.yaml", {**RELATIVE, "design": "auto", "strata": strata})
    ops = write_points_with_proposals(tmp_path / "ops.parquet")
    out = tmp_path / "out"
    frames = {}
    for run_id, seed in (("d1", 6), ("d2", 7)):
        frames[run_id] = make_stream(20_000, seed=seed)
        inputs = write_files(frames[run_id], tmp_path / f"in-{run_id}", 2, 2500)
        assert main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                     "--output", str(out), "--run-id", run_id]) == 0
    first = manifest(out, "d1")["audit"]
    second = manifest(out, "d2")["audit"]
    # the first run's unflagged rows per stratum (proposal rows included) size the second
    assert second["sizing"]["unflagged"] == [h["unflagged"] for h in first["strata"]]
    n1 = np.array(second["sizing"]["unflagged"])
    pi = np.array([h["probability"] for h in second["strata"]])
    assert np.sum(n1 * pi) == pytest.approx(0.01 * n1.sum(), rel=1e-9)
