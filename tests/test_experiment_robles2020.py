"""The Robles et al. (2020) reproduction: structure of the table and properties of its numbers.

The quick run (all data sets and classifier types, smaller data) is computed once per module.
Every check below recomputes its truth independently of the code under test: objectives from
the grid's counts, grid counts by brute force on the rated rows, hold-out flags from the
thresholds, and metrics with scikit-learn.
"""

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from costlib.experiments import robles2020 as R
from costlib_pipelines.commands.cli import main as cli_main

TARGET = 0.5
SLOPE = TARGET / (1 - TARGET)


@pytest.fixture(scope="module")
def rep():
    return R.run(R.Config(quick=True, target=TARGET))


def test_table_has_every_row(rep):
    expected_pairs = [(d, t) for d in R.DATASETS for t in R.CLASSIFIER_TYPES]
    assert [(r.dataset, r.clf_type) for r in rep.results] == expected_pairs
    for res in rep.results:
        label = R.CLASSIFIER_TYPES[res.clf_type].label
        assert [r.label for r in res.rows] == [
            "Analytical", "Graph", "Hull (exact optimum)", "Bucket", f"{label} 1", f"{label} 2"
        ]
        assert set(res.points) == set(R.METHOD_LABELS)
    rows = R.table_rows(rep)
    assert len(rows) == 6 * len(expected_pairs)
    assert all(len(row) == 6 for row in rows)
    text = R.report(rep)
    for name in R.DATASETS:
        assert name in text
    assert "Summary:" in text


def test_hull_objective_bounds_graph_and_analytic(rep):
    for res in rep.results:
        tp, fp = res.grid.counts("any")
        objective = {k: tp[p.index] - SLOPE * fp[p.index] for k, p in res.points.items()}
        for k, p in res.points.items():  # the reported objective is the grid's
            assert p.objective == pytest.approx(objective[k], abs=1e-9)
            assert p.thresholds == res.grid.threshold_values(p.index)
        brute_max = float(np.max(tp - SLOPE * fp))
        where = f"{res.dataset}/{res.clf_type}"
        assert objective["hull"] == pytest.approx(brute_max, abs=1e-9), where
        assert objective["hull"] >= objective["graph"] - 1e-9, where
        assert objective["hull"] >= objective["analytic"] - 1e-9, where
        assert objective["hull"] >= objective["bucket"] - 1e-9, where
        assert objective["hull"] >= 0.0  # "all off" is always available


def test_grid_counts_at_chosen_thresholds_match_brute_force_on_rated_rows(rep):
    for res in rep.results:
        for p in res.points.values():
            flagged = (res.rated_scores >= np.asarray(p.thresholds)).any(axis=1)
            assert p.tp == np.count_nonzero(flagged & res.rated_labels)
            assert p.fp == np.count_nonzero(flagged & ~res.rated_labels)


def test_rating_floor_and_candidate_thresholds(rep):
    for res in rep.results:
        floors = np.asarray(res.floors)
        # Every rated row is at or above some classifier's floor ...
        assert ((res.rated_scores >= floors).any(axis=1)).all()
        assert res.n_rated == res.rated_labels.size <= res.n_train
        assert res.rated_positives == int(res.rated_labels.sum()) <= res.train_positives
        # ... and no candidate threshold lies below the floor, so rated counts are exact.
        for j, edges in enumerate(res.grid.edges):
            assert edges[0] == pytest.approx(floors[j])
            assert (np.diff(edges) > 0).all()
        assert res.grid.total_positives == res.rated_positives


def test_holdout_flags_apply_the_union_rule(rep):
    for res in rep.results:
        for key, label in R.METHOD_LABELS.items():
            t = np.asarray(res.points[key].thresholds)
            expected = (res.holdout_scores[:, 0] >= t[0]) | (res.holdout_scores[:, 1] >= t[1])
            assert np.array_equal(res.flags[label], expected)


def test_metrics_in_unit_interval_and_match_sklearn(rep):
    checked = 0
    for res in rep.results:
        y = res.y_holdout
        for row in res.rows:
            flags = res.flags[row.label]
            assert row.tp + row.fn == int(y.sum())
            assert row.tp + row.fp == int(flags.sum())
            assert 0.0 <= row.recall <= 1.0
            assert row.recall == pytest.approx(recall_score(y, flags))
            if row.flagged:
                assert 0.0 <= row.precision <= 1.0 and 0.0 <= row.f1 <= 1.0
                assert row.precision == pytest.approx(precision_score(y, flags))
                assert row.f1 == pytest.approx(f1_score(y, flags))
            else:  # undefined precision / F1, printed as "-"
                assert math.isnan(row.precision) and math.isnan(row.f1)
            checked += 1
    assert checked == 6 * len(rep.results)


def test_summary_is_the_mean_difference_against_the_average_single_classifier(rep):
    s = R.summary(rep, ["hull"])
    d_recall = [
        r.row("Hull (exact optimum)").recall - np.mean([x.recall for x in r.rows[-2:]])
        for r in rep.results
    ]
    assert s["n"] == len(rep.results)
    assert s["recall"] == pytest.approx(100 * np.mean(d_recall))
    best = R.summary(rep)
    assert all(math.isfinite(best[k]) for k in ("recall", "f1"))


def test_deterministic_and_independent_of_the_other_experiments(rep):
    """A run of a subset reproduces the same pairs of the full run bit for bit."""
    again = R.run(R.Config(quick=True, target=TARGET, datasets=("digits-8",), types=("nb", "rf")))
    for x in again.results:
        y = next(r for r in rep.results if (r.dataset, r.clf_type) == (x.dataset, x.clf_type))
        assert [(r.tp, r.fp, r.fn) for r in x.rows] == [(r.tp, r.fp, r.fn) for r in y.rows]
        assert [p.thresholds for p in x.points.values()] == [
            p.thresholds for p in y.points.values()
        ]
        assert np.array_equal(x.holdout_scores, y.holdout_scores)


def test_cli_prints_table_and_writes_plots(tmp_path, capsys):
    argv = ["reproduce", "robles2020", "--quick", "--datasets", "digits-8", "--types", "nb,knn",
            "--plots", str(tmp_path), "--plot-type", "nb", "--verbose"]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "Naive Bayes 1" in out and "k-NN 2" in out and "Hull (exact optimum)" in out
    assert "Training side" in out
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["robles2020_digits-8_nb_pn.png", "robles2020_digits-8_nb_surfaces.png"]
    assert all((tmp_path / p).stat().st_size > 0 for p in pngs)


def test_bad_options_are_rejected():
    with pytest.raises(SystemExit):
        R.main(["--target", "1.5"])
    with pytest.raises(SystemExit):
        R.main(["--types", "xgboost"])


def test_feature_split_is_the_papers():
    one, two = R.feature_split(10)
    assert one.tolist() == [0, 1, 2, 4, 6, 8]
    assert two.tolist() == [0, 1, 3, 5, 7, 9]
    assert not set(one[2:]) & set(two[2:])


def test_in_sample_variant_uses_the_refit_models_scores_on_t(rep):
    """``--in-sample`` (the paper's literal protocol) changes only the training-side scores."""
    cfg = R.Config(quick=True, target=TARGET, datasets=("digits-8",), types=("nb",), in_sample=True)
    res = R.run(cfg).results[0]
    oof = next(r for r in rep.results if (r.dataset, r.clf_type) == ("digits-8", "nb"))
    assert np.array_equal(res.holdout_scores, oof.holdout_scores)
    assert res.rows[-2:] == oof.rows[-2:]  # same single-classifier baselines
    assert not np.array_equal(res.grid.edges[0], oof.grid.edges[0])
    tp, fp = res.grid.counts("any")
    assert res.points["hull"].objective == pytest.approx(float(np.max(tp - SLOPE * fp)))
