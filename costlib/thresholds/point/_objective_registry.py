"""Objectives as objects: one class per objective, and the registry that lists them.

An objective (:class:`Objective`) says what a point maximises over threshold tuples: its
values at given counts (:meth:`Objective.values`), its parameters (:attr:`Objective.parameters`:
the keys of the config's ``objective`` section it reads, with their defaults), whether it needs
a target (:attr:`Objective.needs_target`), its volume behaviour (:attr:`Objective.volume_cap`:
the largest flagged volume a candidate may have, None for no limit) and whether a shared review
capacity can be allocated by it (:attr:`Objective.for_capacity`, with the slope of its
per-group utility ``TP - r FP``, :meth:`Objective.for_allocation`). The math of the built-in
objectives is in :mod:`costlib.thresholds.point._objectives`.

Every place that lists objectives reads the registry: :func:`objective_names` (the config
schema's ``objective.name``, ``costlib recalibrate --objective``, the records' ``objective``)
and :func:`capacity_objective_names` (``capacity.objective``,
:func:`~costlib.thresholds.allocate_capacity`). A new objective is one subclass registered
with :func:`register_objective`.

>>> objective_names()
('linear', 'fbeta', 'f1', 'precision_at_volume')
>>> capacity_objective_names()
('linear', 'true_positives')
>>> Objective.make("f1").params
{'beta': 1.0}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from costlib._messages import plain
from costlib.bounds import BOUNDS
from costlib.thresholds.point._target import Target

__all__ = [
    "FBeta",
    "Linear",
    "Objective",
    "PrecisionAtVolume",
    "TruePositives",
    "capacity_objective",
    "capacity_objective_names",
    "objective_names",
    "objective_parameters",
    "parameter_owners",
    "register_objective",
    "unregister_objective",
]

@dataclass(frozen=True)
class Objective:
    """An objective over threshold tuples; subclasses are the objectives.

    Class attributes (what the registry and the config read)
    ------------------------------------------------------
    name : str
        Its name in the config (``objective.name``), the records and the command line.
    aliases : mapping of str to mapping
        Further names, each with the parameters it fixes (``"f1"``: F-beta with
        ``beta = 1``).
    parameters : mapping of str to float or None
        The ``objective`` keys it reads, with their defaults (None: required). A key is a
        key of the config schema's ``objective`` section (``beta``, ``volume``); a new key
        needs a schema property too.
    parameter_help : mapping of str to str
        What a required parameter is, for the message when it is missing.
    needs_target : bool
        Whether a target (the slope ``r``) is required.
    for_points : bool
        Whether an operating point may be chosen by it (``objective.name``).
    for_capacity : bool
        Whether a shared capacity may be allocated by it (``capacity.objective``).
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[Mapping[str, Mapping[str, float]]] = MappingProxyType({})
    parameters: ClassVar[Mapping[str, float | None]] = MappingProxyType({})
    parameter_help: ClassVar[Mapping[str, str]] = MappingProxyType({})
    needs_target: ClassVar[bool] = False
    for_points: ClassVar[bool] = True
    for_capacity: ClassVar[bool] = False

    @classmethod
    def build(cls, *, slope: float | None, **params: Any) -> Objective:
        """The objective with its parameters, validated (``slope``: the target's ``r``, None
        without a target)."""
        raise NotImplementedError(f"objective {cls.name!r} defines no build")

    @classmethod
    def kind_of(cls, name: str) -> type[Objective]:
        """The registered objective class of ``name`` (or of an alias)."""
        kind = _REGISTRY.get(name)
        if kind is None or not kind.for_points:
            raise ValueError(f"objective must be one of {objective_names()}, got {name!r}")
        return kind

    @classmethod
    def make(cls, name: str, *, slope: float | None = None, beta: float = 1.0,
             volume: float | None = None) -> Objective:
        """Validate and build the objective ``name`` (an alias fixes its parameters:
        ``"f1"`` is ``"fbeta"`` with ``beta = 1``)."""
        kind = cls.kind_of(name)
        return kind.build(slope=slope, **objective_parameters(name, {"beta": beta,
                                                                     "volume": volume}))

    def values(self, tp: NDArray[np.float64], fp: NDArray[np.float64],
               total_positives: float) -> NDArray[np.float64]:
        """Objective value at every given tuple (larger is better)."""
        raise NotImplementedError(f"objective {self.name!r} defines no values")

    @property
    def params(self) -> dict[str, float]:
        """The objective's parameters, for reports."""
        return {}

    @property
    def volume_cap(self) -> float | None:
        """The largest flagged volume ``V`` a candidate may have (None: no limit)."""
        return None

    @property
    def linear_slope(self) -> float | None:
        """``r`` when the objective is ``TP - r FP`` (the methods' plain paths), else None."""
        return None

    @property
    def monotone(self) -> bool:
        """Whether the value rises with TP and falls with FP (what the resolution bound
        needs)."""
        return True

    #: Rounding slack of the resolution bound where the value's arithmetic is not exactly
    #: monotone.
    rounding_slack: ClassVar[float] = 0.0

    @classmethod
    def for_allocation(cls, target: Any) -> Objective:
        """The objective a shared capacity is allocated by, given the target (None without
        one); its per-group utility is ``TP - r FP`` with ``r`` its :attr:`linear_slope`
        (``TP`` when None). Only for ``for_capacity`` objectives."""
        raise ValueError(f"objective must be one of {capacity_objective_names()}, got "
                         f"{cls.name!r}")


_REGISTRY: dict[str, type[Objective]] = {}


def register_objective(kind: type[Objective]) -> type[Objective]:
    """Add an objective class (and its aliases) to the registry; usable as a decorator."""
    if not (isinstance(kind, type) and issubclass(kind, Objective)) or not kind.name:
        raise TypeError(f"an objective is a named subclass of Objective, got {kind!r}")
    for name in (kind.name, *kind.aliases):
        if name in _REGISTRY:
            raise ValueError(f"objective {name!r} is registered already")
    for name in (kind.name, *kind.aliases):
        _REGISTRY[name] = kind
    return kind


def unregister_objective(kind: type[Objective]) -> None:
    """Remove an objective class (and its aliases) from the registry."""
    for name in (kind.name, *kind.aliases):
        if _REGISTRY.get(name) is kind:
            del _REGISTRY[name]


def objective_names() -> tuple[str, ...]:
    """The names (aliases included) an operating point may be chosen by, in registry order."""
    return tuple(name for name, kind in _REGISTRY.items() if kind.for_points)


def capacity_objective_names() -> tuple[str, ...]:
    """The names a shared review capacity may be allocated by, in registry order."""
    return tuple(name for name, kind in _REGISTRY.items() if kind.for_capacity)


def objective_parameters(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters objective ``name`` reads from ``given`` (e.g. the config's
    ``objective`` section): its keys, with the defaults for keys not given and the values an
    alias fixes (``"f1"``: ``beta = 1``). Not validated (:meth:`Objective.make` does)."""
    kind = Objective.kind_of(name)
    params = {key: given.get(key, default) for key, default in kind.parameters.items()}
    params.update(kind.aliases.get(name, {}))
    return params


def parameter_owners() -> dict[str, tuple[str, float | None]]:
    """Each objective parameter key with the objective that reads it and its default:
    ``{"beta": ("fbeta", 1.0), "volume": ("precision_at_volume", None)}`` for the built-in
    ones (a key another objective reads is not listed again)."""
    owners: dict[str, tuple[str, float | None]] = {}
    for kind in dict.fromkeys(_REGISTRY.values()):
        if kind.for_points:
            for key, default in kind.parameters.items():
                owners.setdefault(key, (kind.name, default))
    return owners


def capacity_objective(name: str) -> type[Objective]:
    """The registered capacity objective class of ``name``."""
    kind = _REGISTRY.get(name)
    if kind is None or not kind.for_capacity:
        raise ValueError(f"objective must be one of {capacity_objective_names()}, got {name!r}")
    return kind


@register_objective
@dataclass(frozen=True)
class Linear(Objective):
    """``TP - r FP`` with ``r`` the target's slope."""

    name: ClassVar[str] = "linear"
    needs_target: ClassVar[bool] = True
    for_capacity: ClassVar[bool] = True
    slope: float = 1.0

    @classmethod
    def build(cls, *, slope: float | None, **params: Any) -> Objective:
        if slope is None:
            raise ValueError("the linear objective needs a target (slope r = dTP/dFP)")
        return cls(slope=float(slope))

    def values(self, tp: NDArray[np.float64], fp: NDArray[np.float64],
               total_positives: float) -> NDArray[np.float64]:
        return tp - self.slope * fp

    @property
    def params(self) -> dict[str, float]:
        return {"slope": self.slope}

    @property
    def linear_slope(self) -> float | None:
        return self.slope

    @property
    def monotone(self) -> bool:
        return self.slope >= 0

    @classmethod
    def for_allocation(cls, target: Any) -> Objective:
        if target is None:
            raise ValueError("the linear objective needs a target (slope r = dTP/dFP)")
        if not isinstance(target, Target):
            raise TypeError(
                f"target must be a Target, got {target!r}: a bare number could be a marginal "
                "precision or the slope r of TP - r FP (0.2 as a slope is a marginal precision "
                "of 0.17); pass Target(slope=r) or Target.from_marginal_precision(m)")
        return cls(slope=target.slope)


@register_objective
@dataclass(frozen=True)
class FBeta(Objective):
    """F-beta with ``P`` the total positives (``"f1"``: ``beta = 1``)."""

    name: ClassVar[str] = "fbeta"
    aliases: ClassVar[Mapping[str, Mapping[str, float]]] = MappingProxyType(
        {"f1": MappingProxyType({"beta": 1.0})})
    parameters: ClassVar[Mapping[str, float | None]] = MappingProxyType({"beta": 1.0})
    rounding_slack: ClassVar[float] = 1e-12
    beta: float = 1.0

    @classmethod
    def build(cls, *, slope: float | None, **params: Any) -> Objective:
        beta = params["beta"]
        b = float(beta)
        if b not in BOUNDS["objective.beta"]:
            raise ValueError(f"beta must be a finite number {BOUNDS['objective.beta'].text()}"
                             f", got {plain(beta)}")
        return cls(beta=b)

    def values(self, tp: NDArray[np.float64], fp: NDArray[np.float64],
               total_positives: float) -> NDArray[np.float64]:
        b2 = self.beta * self.beta
        num = (1.0 + b2) * tp
        den = num + b2 * (total_positives - tp) + fp
        out = np.ones(np.shape(tp))
        np.divide(num, den, out=out, where=den > 0)
        return out

    @property
    def params(self) -> dict[str, float]:
        return {"beta": self.beta}


@register_objective
@dataclass(frozen=True)
class PrecisionAtVolume(Objective):
    """``TP / k`` over the tuples flagging at most ``k`` (the review volume)."""

    name: ClassVar[str] = "precision_at_volume"
    parameters: ClassVar[Mapping[str, float | None]] = MappingProxyType({"volume": None})
    parameter_help: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"volume": "review volume (a number > 0 of flagged rows, rated and unrated)"})
    volume: float = 1.0

    @classmethod
    def build(cls, *, slope: float | None, **params: Any) -> Objective:
        volume = params["volume"]
        if volume is None or volume not in BOUNDS["objective.volume"]:
            raise ValueError(
                f"objective 'precision_at_volume' needs volume "
                f"{BOUNDS['objective.volume'].text()} (the review volume), got {plain(volume)}"
            )
        return cls(volume=float(volume))

    def values(self, tp: NDArray[np.float64], fp: NDArray[np.float64],
               total_positives: float) -> NDArray[np.float64]:
        return tp / self.volume

    @property
    def params(self) -> dict[str, float]:
        return {"volume": self.volume}

    @property
    def volume_cap(self) -> float | None:
        return self.volume


@register_objective
@dataclass(frozen=True)
class TruePositives(Objective):
    """``TP``: the most true positives within a shared capacity (capacity only: without a
    volume limit it would flag everything)."""

    name: ClassVar[str] = "true_positives"
    for_points: ClassVar[bool] = False
    for_capacity: ClassVar[bool] = True

    @classmethod
    def for_allocation(cls, target: Any) -> Objective:
        if target is not None:
            raise ValueError("target is the slope r of the linear objective; "
                             f"objective={cls.name!r} takes none")
        return cls()

    def values(self, tp: NDArray[np.float64], fp: NDArray[np.float64],
               total_positives: float) -> NDArray[np.float64]:
        return tp
