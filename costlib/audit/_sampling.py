"""Audit samples of unflagged rows: stratified, hash-based Poisson sampling (Part E).

Ratings exist only for rows the thresholds flag, so a grid built from them can never learn that
lower thresholds would pay. An *audit sample* closes the loop: every unflagged row ``i`` is
rated with a known inclusion probability ``pi_i > 0`` and enters the grid with weight
``w_i / pi_i`` (Horvitz-Thompson), which makes every cell's counts unbiased for the whole scored
population. Flagged rows are rated anyway: they are not "audited" and their probability is 1.

Design
------
- **Band score.** ``b_i = max_j s_ij`` over the classifiers that scored the row (``-inf`` or
  NaN = did not score); ``b_i = -inf`` when none did.
- **Strata.** Edges ``e_1 < ... < e_{m-1}`` split the band scores into ``m`` strata,
  stratum ``h`` holding ``e_h <= b < e_{h+1}`` (``e_0 = -inf``, ``e_m = +inf``; rows that did not
  score fall in stratum 0). Stratum ``h`` has a relative weight ``w_h >= 0`` (more weight near
  the thresholds spends more audit effort there).
- **Probabilities.** With scale ``c`` (default ``budget_share``) and floor ``f`` in (0, 1]:
  ``pi_h = min(1, max(f, c * w_h))``. Every unflagged row thus has ``pi >= f > 0``: no region
  of the score space is unreachable.
- **Inclusion.** ``u_i = U(hash(id_i), salt)`` in [0, 1) (53-bit resolution; see
  :func:`audit_uniforms`); row ``i`` is audited iff it is unflagged and ``u_i < pi_i``.
  ``P(u_i < pi) = ceil(pi * 2**53) / 2**53``, which differs from ``pi`` by less than
  ``2**-53``.

Determinism
-----------
``u_i`` depends on the item id (as its UTF-8 string: ``12`` and ``"12"`` agree, as the
``item_id`` column of decision records holds it) and the salt only, and ``pi_i`` on the row's
scores and flag only. So the same row gets the same decision in any shard, file order, batch
size, worker or runner, and anyone holding a decision record, the design and the salt can
recompute it. Another salt gives an (effectively) independent sample.

Budget
------
Inclusions are independent Bernoulli(``pi_i``) draws (given the ids' hashes are uniform), so
over ``N_h`` unflagged rows in stratum ``h`` the audited count ``A`` has

    E[A] = sum_h N_h pi_h,        Var[A] = sum_h N_h pi_h (1 - pi_h).

With the default scale ``c = budget_share``: when every weight is 1 and ``f <= budget_share``,
``E[A] = budget_share * N`` exactly (``N`` unflagged rows); in general ``E[A] / N`` is the
row-weighted mean of the ``pi_h``, between ``min_h pi_h`` and ``max_h pi_h``, so weights act as
multipliers of ``budget_share`` and ``budget_share`` is the share spent in a stratum of weight 1.
Shards cannot agree on more without communication. When the unflagged counts per stratum are
known before sampling (a previous run's counts, or a first pass), :func:`budget_scale` returns
the ``c`` for which ``E[A]`` equals a given expected count exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "AuditDesign",
    "AuditSample",
    "audit_sample",
    "audit_uniforms",
    "band_scores",
    "budget_scale",
    "expected_audits",
    "salt_key",
]

_MASK53 = 1.0 / 2.0**53


def _mix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64 finaliser: a bijective avalanche mix of 64-bit words."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


@dataclass(frozen=True)
class AuditDesign:
    """Stratified audit design: ``pi_h = min(1, max(floor, scale * weights[h]))``.

    Parameters
    ----------
    edges : sequence of float
        Strictly increasing finite band-score edges ``e_1 < ... < e_{m-1}`` (may be empty: one
        stratum).
    weights : sequence of float
        ``m = len(edges) + 1`` finite weights ``>= 0``, one per stratum.
    floor : float
        Minimum inclusion probability of an unflagged row, in (0, 1].
    budget_share : float
        Default scale ``c`` in [0, 1]: the expected share of unflagged rows audited in a stratum
        of weight 1 (and overall when all weights are 1 and ``floor <= budget_share``).
    """

    edges: tuple[float, ...] = ()
    weights: tuple[float, ...] = (1.0,)
    floor: float = 0.001
    budget_share: float = 0.01

    def __post_init__(self) -> None:
        edges = np.asarray(self.edges, dtype=np.float64).reshape(-1)
        weights = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if not np.isfinite(edges).all() or (np.diff(edges) <= 0).any():
            raise ValueError(f"strata.edges: need strictly increasing finite numbers, got "
                             f"{edges.tolist()}")
        if weights.size != edges.size + 1:
            raise ValueError(f"strata.weights: need len(strata.edges) + 1 = {edges.size + 1} "
                             f"weights (one per stratum), got {weights.size}")
        if not np.isfinite(weights).all() or (weights < 0).any():
            raise ValueError(f"strata.weights: need finite numbers >= 0, got "
                             f"{weights.tolist()}")
        if not 0.0 < self.floor <= 1.0:
            raise ValueError(f"floor: need 0 < floor <= 1, got {self.floor}")
        if not 0.0 <= self.budget_share <= 1.0:
            raise ValueError(f"budget_share: need 0 <= budget_share <= 1, got "
                             f"{self.budget_share}")
        object.__setattr__(self, "edges", tuple(float(e) for e in edges))
        object.__setattr__(self, "weights", tuple(float(w) for w in weights))
        object.__setattr__(self, "floor", float(self.floor))
        object.__setattr__(self, "budget_share", float(self.budget_share))

    @property
    def n_strata(self) -> int:
        """Number of strata ``m``."""
        return len(self.weights)

    def probabilities(self, scale: float | None = None) -> NDArray[np.float64]:
        """``pi_h = min(1, max(floor, c * w_h))`` per stratum (``c`` = ``budget_share`` by
        default)."""
        c = self.budget_share if scale is None else float(scale)
        if not (np.isfinite(c) and c >= 0):
            raise ValueError(f"scale must be a finite number >= 0, got {scale}")
        return np.clip(c * np.asarray(self.weights), self.floor, 1.0)

    def strata(self, scores: ArrayLike) -> NDArray[np.intp]:
        """Stratum of every row: ``h`` with ``e_h <= band score < e_{h+1}``."""
        return np.searchsorted(np.asarray(self.edges), band_scores(scores), side="right")


@dataclass(frozen=True)
class AuditSample:
    """Per row: ``audit`` (bool), ``audit_probability`` (1 for flagged rows, ``pi`` otherwise)
    and ``stratum`` (of every row, flagged or not)."""

    audit: NDArray[np.bool_]
    audit_probability: NDArray[np.float64]
    stratum: NDArray[np.intp]


def band_scores(scores: ArrayLike) -> NDArray[np.float64]:
    """Highest score of every row over the classifiers that scored it (``-inf``: none did).

    ``scores`` has shape (n, k); ``-inf`` and NaN mean "did not score".
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must have shape (n, k), got {s.shape}")
    if s.shape[1] == 0:
        return np.full(s.shape[0], -np.inf)
    best = np.where(np.isnan(s[:, 0]), -np.inf, s[:, 0])
    for j in range(1, s.shape[1]):
        best = np.fmax(best, s[:, j])  # fmax ignores NaN
    return best


def salt_key(salt: str) -> np.uint64:
    """64-bit key of a salt: the first 8 bytes (little-endian) of ``sha256(salt)``."""
    digest = hashlib.sha256(str(salt).encode("utf-8")).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


def _id_strings(item_ids: ArrayLike) -> NDArray[np.object_]:
    """Item ids as an object array of their UTF-8 strings (ints as decimal strings).

    Accepts numpy/list ids and Arrow arrays (anything with ``to_numpy`` and ``null_count``;
    pyarrow is not imported here).
    """
    if hasattr(item_ids, "null_count") and hasattr(item_ids, "to_numpy"):
        if item_ids.null_count:
            raise ValueError("item_ids must not be null")
        try:
            ids = item_ids.to_numpy(zero_copy_only=False)
        except TypeError:  # ChunkedArray.to_numpy has no zero_copy_only
            ids = item_ids.to_numpy()
        if ids.dtype.kind == "O":
            return ids  # Arrow strings: str objects, no nulls
    else:
        ids = np.asarray(item_ids)
    if ids.ndim != 1:
        raise ValueError(f"item_ids must be 1-D, got shape {ids.shape}")
    if ids.dtype.kind in "iu":
        return ids.astype(str).astype(object)
    if ids.dtype.kind in "UO":
        if ids.dtype.kind == "O" and not all(isinstance(v, str) for v in ids):
            raise ValueError("item_ids of dtype object must all be str")
        return ids.astype(object)
    raise ValueError(f"item_ids must be integers or strings, got dtype {ids.dtype}")


def audit_uniforms(
    item_ids: ArrayLike, salt: str
) -> NDArray[np.float64]:
    """Uniform ``u`` in [0, 1) of every row, from its item id and the salt only.

    ``u = (mix64(mix64(siphash(id) XOR k)) >> 11) / 2**53`` with ``siphash`` =
    :func:`pandas.util.hash_array` of the id's UTF-8 string (SipHash-2-4 with a fixed key: the
    same in every process and on every machine), ``k`` = :func:`salt_key` and ``mix64`` the
    SplitMix64 finaliser (a bijection, applied twice so that nearby keys decorrelate).
    """
    import pandas as pd  # on first use: importing pandas costs every pipeline start ~0.3 s

    hashed = pd.util.hash_array(_id_strings(item_ids), categorize=False)
    bits = _mix64(_mix64(hashed ^ salt_key(salt)))
    return (bits >> np.uint64(11)).astype(np.float64) * _MASK53


def audit_sample(
    item_ids: ArrayLike,
    scores: ArrayLike,
    flagged: ArrayLike,
    salt: str,
    design: AuditDesign,
    scale: float | None = None,
) -> AuditSample:
    """Which rows to audit, and every row's probability of being rated.

    Parameters
    ----------
    item_ids : array-like or Arrow array, shape (n,)
        Integer or string ids, no nulls (hashed as their UTF-8 string).
    scores : array-like, shape (n, k)
        Scores; ``-inf`` / NaN = did not score.
    flagged : array-like of bool, shape (n,)
        Whether the thresholds flag the row (pass False where the decision is unknown and the
        row should be treated as unflagged).
    salt : str
        Per-run salt; the same salt gives the same sample.
    design : AuditDesign
        Strata, weights, floor and default scale.
    scale : float, optional
        Scale ``c`` of the weights (default ``design.budget_share``; see :func:`budget_scale`).

    Returns
    -------
    AuditSample
        ``audit[i] = not flagged[i] and u_i < pi_{h(i)}``; ``audit_probability[i] = 1`` if
        flagged, else ``pi_{h(i)} >= design.floor``.
    """
    flagged = np.asarray(flagged, dtype=bool)
    stratum = design.strata(scores)
    if flagged.shape != stratum.shape:
        raise ValueError(f"flagged has shape {flagged.shape} for {stratum.size} rows")
    pi = design.probabilities(scale)[stratum]
    u = audit_uniforms(item_ids, salt)
    if u.shape != stratum.shape:
        raise ValueError(f"item_ids has {u.size} entries for {stratum.size} rows")
    return AuditSample(
        audit=~flagged & (u < pi),
        audit_probability=np.where(flagged, 1.0, pi),
        stratum=stratum,
    )


def expected_audits(
    counts: Sequence[int] | NDArray[Any], probabilities: Sequence[float] | NDArray[Any]
) -> tuple[float, float]:
    """``(E[A], Var[A])`` of the audited count over ``counts[h]`` unflagged rows per stratum:
    ``sum_h N_h pi_h`` and ``sum_h N_h pi_h (1 - pi_h)`` (independent Bernoulli draws)."""
    n = np.asarray(counts, dtype=np.float64)
    p = np.asarray(probabilities, dtype=np.float64)
    if n.shape != p.shape:
        raise ValueError(f"counts {n.shape} and probabilities {p.shape} differ in shape")
    return float(np.sum(n * p)), float(np.sum(n * p * (1.0 - p)))


def budget_scale(
    counts: Sequence[int] | NDArray[Any], design: AuditDesign, expected: float
) -> float:
    """The scale ``c`` with ``sum_h N_h min(1, max(f, c w_h)) = expected``.

    ``g(c) = sum_h N_h min(1, max(f, c w_h))`` is continuous, nondecreasing and piecewise
    linear in ``c`` with breakpoints ``f / w_h`` and ``1 / w_h``; the smallest root is found
    exactly on the segment that brackets ``expected``.

    Parameters
    ----------
    counts : sequence of int
        Unflagged rows per stratum (known before sampling: a previous run, or a first pass).
    design : AuditDesign
        Weights and floor.
    expected : float
        The expected number of audited rows wanted.

    Raises
    ------
    ValueError
        ``expected`` outside ``[g(0), g(inf)]`` (below the floor's share, or above what the
        strata with weight > 0 and the floor can give).
    """
    n = np.asarray(counts, dtype=np.float64)
    w = np.asarray(design.weights)
    if n.shape != w.shape or (n < 0).any():
        raise ValueError(f"counts: need {w.size} counts >= 0 (one per stratum), got {n.tolist()}")

    def g(c: float) -> float:
        return float(np.sum(n * np.clip(c * w, design.floor, 1.0)))

    positive = w > 0
    low, high = g(0.0), float(np.sum(n[~positive]) * design.floor + np.sum(n[positive]))
    if not low <= expected <= high:
        raise ValueError(f"expected audits {expected} outside the reachable range "
                         f"[{low}, {high}] for these counts, weights and floor")
    knots = np.unique(np.concatenate([[0.0], design.floor / w[positive], 1.0 / w[positive]]))
    values = np.array([g(c) for c in knots])
    i = int(np.searchsorted(values, expected, side="left"))
    if i == 0 or values[i] == values[i - 1]:
        return float(knots[i])
    c0, c1, v0, v1 = knots[i - 1], knots[i], values[i - 1], values[i]
    return float(c0 + (expected - v0) * (c1 - c0) / (v1 - v0))
