"""The benchmarks' model-scores family (tests/benchmarks/model_scores.py): deterministic per
problem and row seed, real model outputs, and a drift that the image model loses."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
import bench_feedback_loop as loop
import model_scores


def _day(seed: int, day: int, problem: int | None = None, drift_day: int | None = None):
    return loop.population(40_000, day, seed=seed, drift_day=drift_day, drift_logit=1.0,
                           family="model", prevalence=(0.01, 0.01, 0.01), problem=problem)


def test_days_are_deterministic_and_other_seeds_draw_other_rows_of_the_same_problem():
    a, b = _day(3, 2), _day(3, 2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    other = _day(99, 2, problem=3)  # other rows, same models
    assert not np.array_equal(a[2], other[2])
    p = model_scores.problem(3, 0.01)
    assert model_scores.problem(3, 0.01) is p  # fitted once, kept


def test_scores_are_the_fitted_logistic_regressions_probabilities():
    p = model_scores.problem(5, 0.01)
    rng = np.random.default_rng(0)
    y = rng.random(5000) < 0.3
    x = p.features(y, rng)
    for j in range(2):  # refit on these rows: sklearn's own predict_proba, same model form
        fit = LogisticRegression(max_iter=1000).fit(x[:, p.columns[j]], y)
        fit.coef_[0], fit.intercept_[0] = p.coef[j], p.intercept[j]
        assert np.allclose(p.scores(x)[:, j], fit.predict_proba(x[:, p.columns[j]])[:, 1])


def test_drift_hides_the_positives_from_the_image_model_only():
    before = [_day(7, d) for d in range(2)]
    after = [_day(7, d, drift_day=0) for d in range(2)]

    def auc(days, j):
        y = np.concatenate([d[3] for d in days])
        s = np.concatenate([d[2][:, j] for d in days])
        return roc_auc_score(y, s)

    assert auc(before, 0) > 0.85 and auc(before, 1) > 0.75  # both models tell positives apart
    assert abs(auc(after, 1) - 0.5) < 0.08  # the image model no longer does
    assert abs(auc(after, 0) - auc(before, 0)) < 0.04  # the text model is untouched
