"""Shared generators for the threshold-grid tests (plain module, imported by test files)."""

from __future__ import annotations

import itertools

import numpy as np

from costlib.thresholds.point._lattice_path import path_area


def make_rows(n: int, k: int, seed: int, *, missing: float = 0.1, weighted: bool = False):
    """Rated rows: scores (n, k) with some -inf (did not score), labels, optional weights."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    scores = rng.normal(size=(n, k)) + 1.2 * y[:, None]
    scores[rng.random((n, k)) < missing] = -np.inf
    # Put some scores exactly on candidate edges (the boundary case of ">=").
    edges = [np.round(np.linspace(-1.5, 2.5, 6 + 2 * j), 3) for j in range(k)]
    on_edge = rng.random((n, k)) < 0.1
    for j in range(k):
        scores[on_edge[:, j], j] = rng.choice(edges[j], size=int(on_edge[:, j].sum()))
    weights = rng.choice([0.5, 1.0, 2.0, 3.25], size=n) if weighted else None
    return scores, y, weights, edges


def brute_counts(scores, labels, weights, thresholds, rule):
    """TP and FP at one threshold tuple by direct counting on the rows (the independent truth)."""
    fires = scores >= np.asarray(thresholds)[None, :]
    flagged = fires.any(axis=1) if rule == "any" else fires.all(axis=1)
    w = np.ones(len(labels)) if weights is None else weights
    return float(np.sum(w[flagged & labels])), float(np.sum(w[flagged & ~labels]))


def exhaustive_path_area(tp, fp) -> float:
    """Largest PN-curve area over every monotone path of a 2-D lattice, enumerated one by one
    (independent of the dynamic programme; small lattices only)."""
    n0, n1 = tp.shape
    best = -np.inf
    for ups in itertools.combinations(range(n0 + n1 - 2), n0 - 1):
        cell, cells = [0, 0], [(0, 0)]
        for step in range(n0 + n1 - 2):
            cell[0 if step in ups else 1] += 1
            cells.append(tuple(cell))
        best = max(best, path_area(tp, fp, np.array(cells)))
    return best


def random_grid(seed: int, widths=(12, 9), n: int = 3_000):
    """A rated grid of ``n`` rows with a seed-dependent class separation, uniform edges of
    ``widths`` candidates per classifier."""
    from costlib.thresholds.grid._grid import ThresholdGrid

    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.25
    scores = rng.normal(size=(n, len(widths))) + y[:, None] * rng.uniform(0.3, 2.0)
    edges = [np.linspace(-2.5, 2.5, w) for w in widths]
    return ThresholdGrid.from_scores(scores, y, edges)
