"""Rows with unrated labels for the coverage tests (plain module, imported by test files)."""

from __future__ import annotations

import numpy as np
from threshold_data import make_rows


def make_selective_rows(n: int, k: int, seed: int, *, weighted: bool = False):
    """Scored rows of which only some are rated, as in production.

    A row is rated when the thresholds "in force" (random edges, rule any) flag it, plus a few
    random others; the rest are unrated. Returns ``scores, labels (object: True/False/None),
    weights, edges, truth (bool), rated (bool)``.
    """
    scores, truth, weights, edges = make_rows(n, k, seed, weighted=weighted)
    rng = np.random.default_rng(seed + 1)
    in_force = [rng.choice(e) for e in edges]
    rated = (scores >= np.asarray(in_force)[None, :]).any(axis=1) | (rng.random(n) < 0.05)
    labels = np.where(rated, truth, None).astype(object)
    return scores, labels, weights, edges, truth, rated


def brute_flags(scores, thresholds, rule):
    fires = scores >= np.asarray(thresholds)[None, :]
    return fires.any(axis=1) if rule == "any" else fires.all(axis=1)


def brute_cell(scores, truth, rated, weights, thresholds, rule):
    """``(TP, FP, U, V)`` at one threshold tuple by direct counting on the rows."""
    flagged = brute_flags(scores, thresholds, rule)
    w = np.ones(len(truth)) if weights is None else weights
    tp = float(np.sum(w[flagged & rated & truth]))
    fp = float(np.sum(w[flagged & rated & ~truth]))
    unr = float(np.sum(w[flagged & ~rated]))
    return tp, fp, unr, float(np.sum(w[flagged]))
