"""Benchmark: fitting ExampleCostLogisticRegression vs plain LogisticRegression (issue 14).

Target: fitting the per-example cost-sensitive LR on 100,000 x 30 rows takes at most 3x as long
as scikit-learn's ``LogisticRegression()`` (lbfgs, defaults) on the same data, both on one BLAS
thread, timed alternately in the same run (best of ``--repeats``). The data: standard normal
features, a logistic label with ~16 % positives, per-row false-negative costs = a log-normal
"amount", false-positive cost 5, so the cost-sensitive objective is exercised as in fraud.
Also prints the fitted models' savings on the training data (cost-blind LR at 0.5 vs ours) so
a speed-up that broke the fit would show.

Run: ``.venv/bin/python tests/benchmarks/bench_example_costs.py [--rows 100000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import best_of, describe

from costlib.costs._example_costs import binary_example_costs, savings_score
from costlib.estimators import ExampleCostLogisticRegression


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=float, default=3.0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, args.features))
    beta = rng.normal(size=args.features) / 3
    y = (X @ beta + rng.logistic(size=args.rows) > 2.5).astype(np.int64)
    costs = binary_example_costs(fn=rng.lognormal(3.0, 1.0, size=args.rows), fp=5.0)
    print(describe())
    print(f"{args.rows} rows x {args.features} features, {y.mean():.1%} positive")
    with threadpool_limits(1):
        t_peer = best_of(lambda: LogisticRegression().fit(X, y), args.repeats)
        t_ours = best_of(
            lambda: ExampleCostLogisticRegression().fit(X, y, cost_matrix=costs), args.repeats)
        t_init = best_of(
            lambda: ExampleCostLogisticRegression(init="logistic").fit(X, y, cost_matrix=costs),
            args.repeats)
    ours = ExampleCostLogisticRegression().fit(X, y, cost_matrix=costs)
    peer = LogisticRegression().fit(X, y)
    ratio = t_ours / t_peer
    print(f"LogisticRegression().fit                       {t_peer * 1e3:8.1f} ms")
    print(f"ExampleCostLogisticRegression().fit            {t_ours * 1e3:8.1f} ms   "
          f"ratio {ratio:5.2f} (target <= {args.target:g}) "
          f"{'MET' if ratio <= args.target else 'NOT MET'}")
    print(f"ExampleCostLogisticRegression(init='logistic') {t_init * 1e3:8.1f} ms   "
          f"ratio {t_init / t_peer:5.2f}")
    print(f"training savings: cost-blind LR {savings_score(y, peer.predict(X), costs):.3f}, "
          f"ours {savings_score(y, ours.predict(X), costs):.3f} ({ours.n_iter_} L-BFGS-B "
          "iterations)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
