"""Benchmark of the cost/benefit-sensitive estimators against their scikit-learn peers.

No speed target (issue 4): this shows the overhead of our wrappers over the scikit-learn parts
they are built from, and a kernel peer. Each line prints our figure, the peer's and the ratio.

1. ``BenefitLogisticRegression`` binary (breast cancer) vs ``LogisticRegression`` with the same
   η sample weights; multiclass (digits, 10 classes) vs ``OneVsRestClassifier(LogisticRegression)``.
2. ``KernelLogisticRegression`` (exact, 1000 digits) vs ``SVC(probability=True)``: fit and
   ``predict_proba``, with test accuracy.
3. ``CostSensitiveNaiveBayes`` vs ``KBinsDiscretizer(kmeans) + CategoricalNB`` (digits).

Run: ``.venv/bin/python tests/benchmarks/bench_estimators.py [--repeats 5]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.naive_bayes import CategoricalNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import KBinsDiscretizer, StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

from costlib.estimators import (
    BenefitLogisticRegression,
    CostSensitiveNaiveBayes,
    KernelLogisticRegression,
)


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _line(label: str, ours: float, peer: float, peer_name: str) -> None:
    print(f"{label:44} ours {ours * 1e3:8.1f} ms   {peer_name:28} {peer * 1e3:8.1f} ms"
          f"   ratio {ours / peer:5.2f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print(describe())

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    b = [[1.0, -2.0], [-10.0, 5.0]]
    w = np.where(y == 0, 3.0 / 15.0, 1.0)
    ours = _median_seconds(lambda: BenefitLogisticRegression(b).fit(X, y), args.repeats)
    peer = _median_seconds(lambda: LogisticRegression().fit(X, y, sample_weight=w), args.repeats)
    _line("benefit LR fit, binary (569 x 30)", ours, peer, "LogisticRegression(weights)")

    Xd, yd = load_digits(return_X_y=True)
    Xd = StandardScaler().fit_transform(Xd)
    bd = 11.0 * np.eye(10) - 1.0
    ours = _median_seconds(lambda: BenefitLogisticRegression(bd).fit(Xd, yd), args.repeats)
    peer = _median_seconds(
        lambda: OneVsRestClassifier(LogisticRegression()).fit(Xd, yd), args.repeats
    )
    _line("benefit LR fit, 10-class OvR (1797 x 64)", ours, peer, "OneVsRest(LogisticRegression)")

    tr, te = slice(0, 1000), slice(1000, None)
    klr = KernelLogisticRegression(n_components=1000, random_state=0)
    svc = SVC(probability=True, random_state=0)
    ours = _median_seconds(lambda: klr.fit(Xd[tr], yd[tr]), args.repeats)
    peer = _median_seconds(lambda: svc.fit(Xd[tr], yd[tr]), args.repeats)
    _line("kernel LR fit, exact (1000 x 64, 10 classes)", ours, peer, "SVC(probability=True)")
    ours = _median_seconds(lambda: klr.predict_proba(Xd[te]), args.repeats)
    peer = _median_seconds(lambda: svc.predict_proba(Xd[te]), args.repeats)
    _line("kernel LR predict_proba (797 rows)", ours, peer, "SVC(probability=True)")
    print(f"{'':44} test accuracy: kernel LR {klr.score(Xd[te], yd[te]):.3f}, "
          f"SVC {svc.score(Xd[te], yd[te]):.3f}")

    Xr = load_digits().data
    nb = CostSensitiveNaiveBayes(1.0 - np.eye(10))
    parts = make_pipeline(
        KBinsDiscretizer(5, encode="ordinal", strategy="kmeans", subsample=None),
        CategoricalNB(min_categories=5),
    )
    ours = _median_seconds(lambda: nb.fit(Xr, yd), args.repeats)
    peer = _median_seconds(lambda: parts.fit(Xr, yd), args.repeats)
    _line("cost-based naive Bayes fit (1797 x 64)", ours, peer, "KBinsDiscretizer+CategoricalNB")
    return 0


if __name__ == "__main__":
    with threadpool_limits(limits=1):
        sys.exit(main(sys.argv[1:]))
