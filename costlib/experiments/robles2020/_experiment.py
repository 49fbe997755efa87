"""Running the Robles et al. (2020) reproduction: the protocol of one experiment, and a run of all.

The protocol is described in the docstring of :mod:`costlib.experiments.robles2020`.
:func:`run` loads every data set a :class:`Config` asks for and prepares it once (steps 1-3:
cleaning, the 75/25 split, standardising and PCA fitted on the training side), then runs
:func:`run_experiment` per classifier type (steps 3-7: the :func:`feature_split` of the
components, training and scoring, the rating floor, candidate thresholds, the operating point of
every method and its hold-out metrics) and collects the results in a :class:`Reproduction`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.base import clone
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.model_selection import StratifiedKFold, cross_val_predict, train_test_split
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from costlib.experiments.robles2020._classifiers import (
    CLASSIFIER_TYPES,
    _scores_from_output,
    _sklearn_method,
    _tuned,
)
from costlib.experiments.robles2020._datasets import DATASETS, DataSet
from costlib.experiments.robles2020._results import (
    METHOD_LABELS,
    ExperimentResult,
    MethodResult,
    holdout_metrics,
)
from costlib.thresholds.binning._edges import quantile_edges, uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import OperatingPoint
from costlib.thresholds.point._optimize import optimize

__all__ = ["Config", "Reproduction", "feature_split", "run", "run_experiment"]


def feature_split(n_components: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """The paper's split of PCA components between the two classifiers.

    Both classifiers get the first 20% of the components (at least one); classifier 1 also gets
    the remaining components at even positions, classifier 2 those at odd positions.

    Parameters
    ----------
    n_components : int
        Number of PCA components, at least 3.

    Returns
    -------
    (cols_1, cols_2) : tuple of ndarray of int
        Column indices into the PCA scores.
    """
    if n_components < 3:
        raise ValueError(f"need at least 3 PCA components, got {n_components}")
    shared = max(1, round(0.2 * n_components))
    rest = np.arange(shared, n_components)
    common = np.arange(shared)
    return np.concatenate([common, rest[0::2]]), np.concatenate([common, rest[1::2]])


@dataclass(frozen=True)
class Config:
    """Options of a run (see :func:`main` for their meaning)."""

    quick: bool = False
    seed: int = 0
    target: float = 0.5
    floor_quantile: float = 0.9
    bins: int = 64
    edges: str = "quantile"
    folds: int = 3
    in_sample: bool = False
    n_buckets: int = 50
    tune: bool = True
    datasets: tuple[str, ...] = tuple(DATASETS)
    types: tuple[str, ...] = tuple(CLASSIFIER_TYPES)


@dataclass
class Reproduction:
    """All experiments of a run plus the data set facts for the report."""

    config: Config
    results: list[ExperimentResult]
    datasets: list[DataSet]
    seconds: float = 0.0


def _prepare(ds: DataSet, seed: int):
    """Clean, split 75/25 stratified, standardise and PCA (fitted on T only)."""
    X_t, X_h, y_t, y_h = train_test_split(
        ds.X, ds.y, test_size=0.25, stratify=ds.y, random_state=seed
    )
    imputer = SimpleImputer(strategy="mean").fit(X_t)
    scaler = StandardScaler().fit(imputer.transform(X_t))
    pca = PCA(n_components=ds.n_components, random_state=seed)
    Z_t = pca.fit_transform(scaler.transform(imputer.transform(X_t)))
    Z_h = pca.transform(scaler.transform(imputer.transform(X_h)))
    return Z_t, Z_h, np.asarray(y_t, dtype=bool), np.asarray(y_h, dtype=bool)


def _edges_for(values: NDArray[np.float64], floor: float, config: Config) -> NDArray[np.float64]:
    """Candidate thresholds of one classifier: the floor, then edges over the scores above it.

    Quantile edges are taken over the scores *strictly* above the floor, so that a mass of tied
    scores at the floor (k-NN and tree probabilities of 0) does not swallow all quantiles.
    """
    above = values[values > floor]
    if above.size == 0 or config.bins == 1:
        return np.array([floor])
    if config.edges == "uniform":
        low, high = float(above.min()), float(above.max())
        upper = uniform_edges(low, high, config.bins - 1) if high > low else np.array([low])
    else:
        upper = quantile_edges(above, config.bins - 1)
    return np.unique(np.concatenate([[floor], upper]))


def run_experiment(
    ds_name: str,
    split: tuple[NDArray, NDArray, NDArray, NDArray],
    n_components: int,
    type_key: str,
    config: Config,
) -> ExperimentResult:
    """Run the protocol for one data set and one classifier type (see the module docstring)."""
    Z_t, Z_h, y_t, y_h = split
    ctype = CLASSIFIER_TYPES[type_key]
    cols = feature_split(n_components)
    method = _sklearn_method(ctype.score_method)
    cv = StratifiedKFold(config.folds, shuffle=True, random_state=config.seed)
    train_scores = np.empty((y_t.size, 2))
    hold_scores = np.empty((y_h.size, 2))
    defaults: list[NDArray[np.bool_]] = []
    params: list[dict] = []
    for j, c in enumerate(cols):
        X_t, X_h = Z_t[:, c], Z_h[:, c]
        est = _tuned(ctype, X_t, y_t, quick=config.quick, tune=config.tune, seed=config.seed)
        params.append({k: est.get_params()[k] for k in ctype.grid})
        model = clone(est).fit(X_t, y_t)
        if config.in_sample:  # the paper's literal protocol: scores of the fitted model on T
            train_out = getattr(model, method)(X_t)
        else:
            train_out = cross_val_predict(clone(est), X_t, y_t, cv=cv, method=method, n_jobs=1)
        train_scores[:, j] = _scores_from_output(train_out, ctype.score_method)
        hold_scores[:, j] = _scores_from_output(getattr(model, method)(X_h), ctype.score_method)
        defaults.append(np.asarray(model.predict(X_h), dtype=bool))

    # Rating floor: only rows some classifier scores at or above its floor are labelled.
    floors = np.quantile(train_scores, config.floor_quantile, axis=0)
    above = train_scores >= floors
    rated = above.any(axis=1)
    s_rated, y_rated = train_scores[rated], y_t[rated]
    edges = [_edges_for(s_rated[:, j], float(floors[j]), config) for j in range(2)]
    names = (f"{ctype.label} 1", f"{ctype.label} 2")
    grid = ThresholdGrid.from_scores(s_rated, y_rated, edges, names=names)

    points: dict[str, OperatingPoint] = {}
    rows: list[MethodResult] = []
    flags: dict[str, NDArray[np.bool_]] = {}
    for key, label in METHOD_LABELS.items():
        p = optimize(
            grid,
            target_marginal_precision=config.target,
            rule="any",
            method=key,
            n_buckets=config.n_buckets,
        )
        points[key] = p
        t = np.asarray(p.thresholds)
        flagged = np.asarray((hold_scores >= t).any(axis=1))  # +inf never fires
        flags[label] = flagged
        rows.append(holdout_metrics(label, flagged, y_h))
    for j, name in enumerate(names):
        flags[name] = defaults[j]
        rows.append(holdout_metrics(name, defaults[j], y_h))
    return ExperimentResult(
        dataset=ds_name,
        clf_type=type_key,
        grid=grid,
        points=points,
        rows=rows,
        flags=flags,
        y_holdout=y_h,
        holdout_scores=hold_scores,
        rated_scores=s_rated,
        rated_labels=y_rated,
        floors=(float(floors[0]), float(floors[1])),
        n_train=int(y_t.size),
        n_rated=int(rated.sum()),
        train_positives=int(y_t.sum()),
        rated_positives=int(y_rated.sum()),
        params=(params[0], params[1]),
    )


def run(config: Config) -> Reproduction:
    """Run every (data set, classifier type) experiment of ``config``.

    Single-threaded (BLAS/OpenMP limited to one thread) and deterministic for a fixed seed.
    """
    start = time.perf_counter()
    results: list[ExperimentResult] = []
    datasets: list[DataSet] = []
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for ds_name in config.datasets:
            ds = DATASETS[ds_name](config.quick, config.seed)
            datasets.append(ds)
            split = _prepare(ds, config.seed)
            for type_key in config.types:
                results.append(run_experiment(ds_name, split, ds.n_components, type_key, config))
    return Reproduction(config, results, datasets, time.perf_counter() - start)
