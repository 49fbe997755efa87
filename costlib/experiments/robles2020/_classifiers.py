"""The classifier types of the Robles et al. (2020) reproduction: models, tuning grids, scores.

:data:`CLASSIFIER_TYPES` maps each type key to its label, estimator factory, the small grid it
is tuned on by cross-validated accuracy (the paper's criterion) and the method its scores come
from (one score per row, higher = more positive). Why these models, grids and scores: the
deviations from the paper in :mod:`costlib.experiments.robles2020`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.model_selection import GridSearchCV, StratifiedKFold, train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

__all__ = ["CLASSIFIER_TYPES", "TUNE_MAX_ROWS", "ClassifierType"]

TUNE_MAX_ROWS = 8000


@dataclass(frozen=True)
class ClassifierType:
    """A classifier family: label, estimator factory, tuning grid and scoring method."""

    label: str
    make: Callable[[int, bool], BaseEstimator]  # (seed, quick) -> unfitted estimator
    grid: dict[str, list]
    score_method: str  # "decision_function", "predict_proba" or "log_odds"


CLASSIFIER_TYPES: dict[str, ClassifierType] = {
    "svm": ClassifierType(
        "Linear SVM",
        lambda seed, quick: LinearSVC(C=0.1, max_iter=5000, random_state=seed),
        {"C": [0.01, 0.1, 1.0]},
        "decision_function",
    ),
    "rf": ClassifierType(
        "Random Forest",
        lambda seed, quick: RandomForestClassifier(
            n_estimators=10 if quick else 30,
            max_depth=8,
            min_samples_leaf=3,
            max_samples=0.25,
            n_jobs=1,
            random_state=seed,
        ),
        {},
        "predict_proba",
    ),
    "dt": ClassifierType(
        "Decision Tree",
        lambda seed, quick: DecisionTreeClassifier(max_depth=8, random_state=seed),
        {"max_depth": [4, 8, 16]},
        "predict_proba",
    ),
    "knn": ClassifierType(
        "k-NN",
        lambda seed, quick: KNeighborsClassifier(n_neighbors=15),
        {"n_neighbors": [5, 15, 45]},
        "predict_proba",
    ),
    "hgb": ClassifierType(
        "HistGradBoost (XGBoost)",
        lambda seed, quick: HistGradientBoostingClassifier(
            max_iter=15 if quick else 50, max_leaf_nodes=15, early_stopping=False, random_state=seed
        ),
        {},
        "decision_function",
    ),
    "nb": ClassifierType("Naive Bayes", lambda seed, quick: GaussianNB(), {}, "log_odds"),
}


def _scores_from_output(output: NDArray[np.float64], score_method: str) -> NDArray[np.float64]:
    """Turn the output of ``score_method`` into one score per row (higher = more positive)."""
    if score_method == "decision_function":
        return np.asarray(output, dtype=np.float64).ravel()
    if score_method == "predict_proba":
        return np.asarray(output[:, 1], dtype=np.float64)
    return np.asarray(output[:, 1] - output[:, 0], dtype=np.float64)  # log-odds


def _sklearn_method(score_method: str) -> str:
    return "predict_log_proba" if score_method == "log_odds" else score_method


def _tuned(
    ctype: ClassifierType, X: NDArray, y: NDArray, *, quick: bool, tune: bool, seed: int
) -> BaseEstimator:
    """The classifier with hyperparameters chosen by CV accuracy (the paper's criterion)."""
    est = ctype.make(seed, quick)
    if quick or not tune or not ctype.grid:
        return est
    if y.size > TUNE_MAX_ROWS:
        X, _, y, _ = train_test_split(
            X, y, train_size=TUNE_MAX_ROWS, stratify=y, random_state=seed
        )
    search = GridSearchCV(
        est,
        ctype.grid,
        scoring="accuracy",
        cv=StratifiedKFold(3, shuffle=True, random_state=seed),
        n_jobs=1,
    )
    search.fit(X, y)
    return clone(est).set_params(**search.best_params_)
