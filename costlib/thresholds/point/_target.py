"""The business trade-off, in the three forms users state it.

An operating point is chosen by the *target marginal precision* ``m`` in (0, 1): the precision
the next items let in must reach for letting them in to be worth it. Equivalent forms:

- slope ``r = dTP/dFP = m / (1 - m)``: the optimal point maximises ``TP - r * FP`` (a false
  positive costs ``r`` true positives' worth). "One more true positive is worth up to 3 false
  positives" is ``r = 1/3``, ``m = 0.25``;
- a 2x2 benefit matrix ``B`` with rows = true class, columns = predicted class (``b11`` = benefit of
  a true positive, ``b10`` of a false negative, ``b01`` of a false positive, ``b00`` of a true
  negative). Flagging an item with P(positive) = p is worth it iff
  ``p (b11 - b10) > (1 - p)(b00 - b01)``, so the target slope is
  ``eta = (b00 - b01) / (b11 - b10)`` and ``m = eta / (1 + eta)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from costlib._messages import plain
from costlib.bounds import BOUNDS

__all__ = ["Target", "resolve_target"]


@dataclass(frozen=True)
class Target:
    """A trade-off between true and false positives, stored as the slope ``r = dTP/dFP``."""

    slope: float

    def __post_init__(self) -> None:
        if self.slope not in BOUNDS["target.slope"]:
            raise ValueError(f"target slope dTP/dFP must be finite and "
                             f"{BOUNDS['target.slope'].text()}, got {plain(self.slope)}")

    @property
    def marginal_precision(self) -> float:
        """``m = r / (1 + r)``."""
        return self.slope / (1.0 + self.slope)

    @classmethod
    def from_marginal_precision(cls, m: float) -> Target:
        """Target marginal precision ``m`` in (0, 1)."""
        BOUNDS["target.marginal_precision"].check("target_marginal_precision", m)
        return cls(slope=m / (1.0 - m))

    @classmethod
    def from_fp_per_tp(cls, fp_per_tp: float) -> Target:
        """"One more true positive is worth up to ``fp_per_tp`` false positives": ``r = 1/that``."""
        if fp_per_tp not in BOUNDS["target.fp_per_tp"]:
            raise ValueError(f"fp_per_tp must be finite and {BOUNDS['target.fp_per_tp'].text()}, "
                             f"got {plain(fp_per_tp)}")
        return cls(slope=1.0 / fp_per_tp)

    @classmethod
    def from_benefit_matrix(cls, benefit_matrix: ArrayLike) -> Target:
        """Slope ``eta = (b00 - b01) / (b11 - b10)`` of a 2x2 benefit matrix (rows = truth)."""
        b = np.asarray(benefit_matrix, dtype=np.float64)
        if b.shape != (2, 2) or not np.isfinite(b).all():
            raise ValueError(f"benefit_matrix must be a finite 2x2 array, got shape {b.shape}")
        gain_tp = b[1, 1] - b[1, 0]
        gain_tn = b[0, 0] - b[0, 1]
        if gain_tp <= 0 or gain_tn <= 0:
            raise ValueError(
                "benefit_matrix must reward correct decisions: need b11 > b10 and b00 > b01, "
                f"got b11-b10={plain(gain_tp)}, b00-b01={plain(gain_tn)}"
            )
        return cls(slope=float(gain_tn / gain_tp))


def resolve_target(
    target_marginal_precision: float | None = None,
    target_slope: float | None = None,
    benefit_matrix: ArrayLike | None = None,
    target: Target | None = None,
) -> Target:
    """Exactly one way of stating the trade-off -> :class:`Target`."""
    given = [
        name
        for name, value in (
            ("target_marginal_precision", target_marginal_precision),
            ("target_slope", target_slope),
            ("benefit_matrix", benefit_matrix),
            ("target", target),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise ValueError(
            "give exactly one of target_marginal_precision, target_slope, benefit_matrix, "
            f"target; got {given or 'none'}"
        )
    if target is not None:
        return target
    if target_marginal_precision is not None:
        return Target.from_marginal_precision(float(target_marginal_precision))
    if target_slope is not None:
        return Target(slope=float(target_slope))
    assert benefit_matrix is not None  # exactly one of the four was given
    return Target.from_benefit_matrix(benefit_matrix)
