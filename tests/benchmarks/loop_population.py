"""The closed-loop benchmarks' population and full-label references.

:func:`population` draws one day's items (groups, ids, two classifiers' scores, labels) of a
score family; the references are full-label optima on the edges the config's recipe would
place on the labelled rows (:func:`reference_edges`): the same-day optimum, the window oracle
(the previous days' optimum applied to the day) and the population optimum (fitted on a larger
independent sample of the day's distribution).
"""

from __future__ import annotations

import math

import numpy as np
from model_scores import model_scores

from costlib.thresholds.binning._edges import decision_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize
from costlib_pipelines.config import RunConfig

CLASSIFIERS = ("text_model", "image_model")
GROUPS = ("market_a", "market_b", "market_c")
PREVALENCE = (0.005, 0.01, 0.02)
SEPARATION = (3.2, 2.8)
CORRELATION = 0.3
STARTS = {"high": (0.9, 0.9), "image-off": (0.9, math.inf)}
#: Starting points of the families with scores concentrated near 0 (0.9 flags almost nothing).
STARTS_CONCENTRATED = {"high": (0.5, 0.5), "image-off": (0.5, math.inf)}
#: The score families (:func:`population`).
FAMILIES = ("spread", "concentrated", "model")


def starts_of(family: str) -> dict[str, tuple[float, ...]]:
    """The starting points of a score family by name."""
    return STARTS if family == "spread" else STARTS_CONCENTRATED
# ----------------------------------------------------------------------------- population
def population(n: int, day: int, *, seed: int, drift_day: int | None, drift_logit: float,
               family: str = "spread", prevalence=PREVALENCE, problem: int | None = None):
    """One day's items: (group index, item ids, scores (n, 2), labels). Deterministic per day.

    ``family="spread"``: latent score of classifier j: ``separation_j * y + sqrt(rho) * shared
    + sqrt(1 - rho) * noise + group shift``; score = sigmoid(latent - 2) (as
    ``costlib.sample.generate_score_stream``, every classifier scores every row). Drift: from
    ``drift_day`` on, positives' latent scores are ``drift_logit`` lower (a shift in logit
    space).

    ``family="concentrated"``: scores concentrated near 0: negatives ``beta(0.5, 30)`` per
    classifier (mean 0.016), positives heavier-tailed ``beta(1.5, 2.5)``; drift: positives
    ``beta(1.5, 2.5 + 2 * drift_logit)`` (their scores fall towards the negatives').

    ``family="model"``: two logistic regressions' probabilities on a generated tabular problem
    (:mod:`model_scores`; the problem and its models are those of ``problem``, default
    ``seed``, so that other seeds draw other rows of the same problem); drift: the positives'
    features of the image model move ``drift_logit`` times the class gap towards the
    negatives'.
    """
    rng = np.random.default_rng([seed, day])
    g = rng.integers(0, len(GROUPS), n)
    y = rng.random(n) < np.asarray(prevalence)[g]
    scores = np.empty((n, len(CLASSIFIERS)))
    drifted = drift_day is not None and day >= drift_day
    if family == "model":
        scores = model_scores(y, rng, key=seed if problem is None else problem,
                              prevalence=float(np.mean(prevalence)),
                              drift=drift_logit if drifted else 0.0)
    elif family == "concentrated":
        for j in range(len(CLASSIFIERS)):
            negatives = rng.beta(0.5, 30.0, n)
            positives = rng.beta(1.5, 2.5 + (2.0 * drift_logit if drifted else 0.0), n)
            scores[:, j] = np.where(y, positives, negatives)
    elif family == "spread":
        shared = rng.standard_normal(n)
        shift_bad = drift_logit if drifted else 0.0
        for j in range(len(CLASSIFIERS)):
            group_shift = 0.25 * (g - (len(GROUPS) - 1) / 2) * (1 if j % 2 == 0 else -1)
            latent = (SEPARATION[j] * y + math.sqrt(CORRELATION) * shared
                      + math.sqrt(1 - CORRELATION) * rng.standard_normal(n) + group_shift
                      - shift_bad * y)
            scores[:, j] = 1.0 / (1.0 + np.exp(-(latent - 2.0)))
    else:
        raise ValueError(f"unknown score family {family!r} (one of {', '.join(FAMILIES)})")
    ids = np.int64(day) * 10_000_000 + np.arange(n, dtype=np.int64)
    return g, ids, scores, y


# ----------------------------------------------------------------------------- evaluation
def utility_of(flagged: np.ndarray, y: np.ndarray, slope: float) -> float:
    return float(np.sum(flagged & y) - slope * np.sum(flagged & ~y))


def apply_thresholds(scores: np.ndarray, thresholds) -> np.ndarray:
    return (scores >= np.asarray(thresholds, dtype=float)).any(axis=1)


def reference_edges(config: RunConfig, scores: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """The edges of the full-label references: the config's fixed edges (uniform, explicit), or
    for ``grid.edges: auto`` those ``costlib recalibrate`` would place on these rows if every
    one were rated (:func:`costlib.thresholds.decision_edges`, ``grid.bins`` candidates)."""
    fixed = config.fixed_edges()
    if fixed is not None:
        return fixed
    return decision_edges(scores, y, n_edges=config.n_edges, names=list(CLASSIFIERS))


def full_label_points(g, scores, y, config: RunConfig, target: float) -> list[tuple]:
    """Per group, the full-label hull optimum's thresholds on these rows
    (:func:`reference_edges` of all of them, shared by the groups as in the pipeline)."""
    edges = reference_edges(config, scores, y)
    points = []
    for k in range(len(GROUPS)):
        sel = g == k
        grid = ThresholdGrid.from_scores(scores[sel], y[sel], edges, names=list(CLASSIFIERS))
        points.append(tuple(optimize(grid, target_marginal_precision=target, method="hull",
                                     max_unrated_share=1).thresholds))
    return points


def utility_of_points(g, scores, y, points, slope: float) -> float:
    """Utility of per-group thresholds ``points`` (rows: ``GROUPS``) on these rows."""
    return sum(utility_of(apply_thresholds(scores[g == k], points[k]), y[g == k], slope)
               for k in range(len(GROUPS)))


def full_label_optimum(g, scores, y, config: RunConfig, target: float, slope: float) -> float:
    """The same-day optimum: the full-label optimum of the day's own rows, applied to them."""
    return utility_of_points(g, scores, y, full_label_points(g, scores, y, config, target),
                             slope)


def population_optimum(day: int, g, scores, y, config: RunConfig, args, slope: float,
                       drift: bool, seed: int = 0, family: str = "spread"
                       ) -> tuple[float, dict]:
    """Utility on the day's rows of the thresholds that are optimal for the day's *distribution*:
    per group, the full-label hull optimum on an independent sample of ``--reference-factor``
    times the day's rows drawn from the same day's generator (another seed). Unlike the same-day
    optimum it does not fit the day's own noise, so no policy fixed before the day could expect
    to beat it; a ratio above 1 on a day is possible."""
    if args.reference_factor <= 0:
        return float("nan"), {}
    rg, _, rs, ry = population(args.rows_per_day * args.reference_factor, day,
                               seed=seed + 1_000_003,
                               drift_day=args.drift_day if drift else None,
                               drift_logit=args.drift_logit, family=family,
                               prevalence=args.prevalence, problem=seed)
    points = full_label_points(rg, rs, ry, config, args.target)
    return (utility_of_points(g, scores, y, points, slope),
            dict(zip(GROUPS, points, strict=True)))


def window_oracle(days, g, scores, y, config: RunConfig, target: float, slope: float) -> float:
    """Utility today of the full-label hull optimum over the previous days of the window (what
    the loop would publish if every row of those days were rated, on the edges
    :func:`reference_edges` places on them): the reference free of the same-day optimum's
    in-sample optimism and of rating noise, but with the window's lag. ``days``: ``(groups,
    scores, labels)`` per day."""
    points = full_label_points(np.concatenate([d[0] for d in days]),
                               np.concatenate([d[1] for d in days]),
                               np.concatenate([d[2] for d in days]), config, target)
    return utility_of_points(g, scores, y, points, slope)
