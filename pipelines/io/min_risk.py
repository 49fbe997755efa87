"""Per-row costs in the pipelines: minimum-risk decisions and cost-weighted recalibration.

Config section ``min_risk`` (null: off). Each of ``fn``, ``fp``, ``tp``, ``tn`` (costs of a
missed positive, a false alarm, a caught positive and a correct pass; ``tp``/``tn`` default 0)
is a number or ``{column: NAME, scale: S}``, the row's value of a numeric column times ``S``::

    min_risk:
      fn: {column: amount}     # a missed fraud costs its amount
      fp: 5.0                  # a false alarm costs a review
      tp: 5.0                  # a caught fraud is reviewed too
      weight_rated_rows: false

**decide** (needs ``columns.probability``): every decided row gets ``min_risk_decision``, the
Bayes minimum-risk decision of :func:`costlib.costs.bayes_minimum_risk` under its own
costs (flag iff ``p·C_TP + (1-p)·C_FP < p·C_FN + (1-p)·C_TN``, i.e. ``p > t_i = (C_FP - C_TN)
/ (C_FP - C_TN + C_FN - C_TP)``), and ``expected_cost``, the expected cost of that decision.
Both are null when the row's probability is null or one of its costs is null, NaN or infinite;
``decision_counts.json`` counts ``min_risk_flagged``, ``min_risk_null.no_probability`` and
``min_risk_null.invalid_cost`` (the threshold and top-k decisions of such rows are unaffected,
no row is dropped). Without the section both fields are null on every record.

**recalibrate** with ``weight_rated_rows: true``: each rated row enters the threshold grid with
its weight (``columns.weight``, audit ``w/p``) times its *regret* - a positive row ``C_FN -
C_TP`` (what catching it saves), a negative row ``C_FP - C_TN`` (what flagging it wastes) - and
an unrated row times ``C_FP - C_TN`` (the likely class of an unrated row of a rare event). The
grid's TP and FP are then amounts of money rather than counts, and the operating point that
maximises ``TP - r·FP`` with ``target: {slope: 1}`` maximises the net amount saved; with counts
it maximises caught items at the target trade-off, whatever their amounts.

A **negative regret** (a fraud of 3 whose review costs 5: ``C_FN - C_TP < 0``) means the row is
never worth flagging for its cost: it enters the grid with weight 0 (it moves no threshold)
and is counted in the run's row accounting, ``min_risk.negative_regret.rated_positive``,
``.rated_negative`` and ``.unrated`` (the manifest's ``row_accounting``, the command's summary).
Zero-weight rows are no evidence either: ``min_rated`` does not count them. A regret that is
null or non-finite (a missing amount) stops the run with an error naming the file, row group
and column (exit 2): the row's cost is unknown, not small.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from costlib.costs import bayes_minimum_risk, expected_costs
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.batches import ValidatedBatch
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.schema import SchemaError

__all__ = ["NEGATIVE_REGRET", "CostSpec", "MinRiskSettings", "cost_weighted", "with_min_risk"]

COST_NAMES = ("fn", "fp", "tp", "tn")

#: Accounting counters of rows given weight 0 for a negative regret (+ ``rated_positive``,
#: ``rated_negative`` or ``unrated``).
NEGATIVE_REGRET = "min_risk.negative_regret."


@dataclass(frozen=True)
class CostSpec:
    """One cost: a constant ``value``, or ``column`` times ``scale``."""

    name: str
    value: float = 0.0
    column: str | None = None
    scale: float = 1.0

    @classmethod
    def parse(cls, name: str, raw: Any) -> CostSpec:
        if isinstance(raw, bool) or raw is None:
            raise ConfigError(f"min_risk.{name}: expected a number or {{column: NAME}}, "
                              f"got {raw!r}")
        if isinstance(raw, int | float):
            if not np.isfinite(raw):
                raise ConfigError(f"min_risk.{name}: must be finite, got {raw!r}")
            return cls(name, value=float(raw))
        if isinstance(raw, dict) and isinstance(raw.get("column"), str):
            scale = raw.get("scale", 1.0)
            if isinstance(scale, bool) or not isinstance(scale, int | float) or not np.isfinite(
                    scale):
                raise ConfigError(f"min_risk.{name}.scale: must be a finite number, got "
                                  f"{scale!r}")
            return cls(name, column=raw["column"], scale=float(scale))
        raise ConfigError(f"min_risk.{name}: expected a number or {{column: NAME, scale: S}}, "
                          f"got {raw!r}")

    def values(self, table: pa.Table, rows: NDArray[np.intp], where: str) -> NDArray[np.float64]:
        """The cost of the given rows of a raw input batch (NaN where the column is null)."""
        if self.column is None:
            return np.full(rows.size, self.value)
        if self.column not in table.column_names:
            raise SchemaError(f"{where}: column {self.column!r} (min_risk.{self.name}) is "
                              "missing")
        arr = table.column(self.column).combine_chunks()
        if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
                or pa.types.is_decimal(arr.type) or pa.types.is_null(arr.type)):
            raise SchemaError(f"{where}: column {self.column!r} (min_risk.{self.name}) must be "
                              f"numeric, got {arr.type}")
        values = arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        return np.asarray(values, dtype=np.float64).take(rows) * self.scale


@dataclass(frozen=True)
class MinRiskSettings:
    """The validated ``min_risk`` section."""

    fn: CostSpec
    fp: CostSpec
    tp: CostSpec
    tn: CostSpec
    weight_rated_rows: bool = False

    @classmethod
    def from_config(cls, config: RunConfig) -> MinRiskSettings | None:
        """None when the section is absent or null; ConfigError naming the key otherwise."""
        raw = config.raw.get("min_risk")
        if raw is None:
            return None
        specs = {name: CostSpec.parse(name, raw.get(name, 0.0)) for name in COST_NAMES}
        return cls(**specs, weight_rated_rows=bool(raw.get("weight_rated_rows", False)))

    def input_columns(self) -> list[str]:
        """Input columns the costs come from (deduplicated, in fn/fp/tp/tn order)."""
        names = [s.column for s in (self.fn, self.fp, self.tp, self.tn) if s.column]
        return list(dict.fromkeys(names))

    def costs(
        self, table: pa.Table, rows: NDArray[np.intp], where: str
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Per-row cost matrices (n, 2, 2) of the given rows and a mask of rows whose four
        costs are finite."""
        fn, fp, tp, tn = (s.values(table, rows, where) for s in (self.fn, self.fp, self.tp,
                                                                  self.tn))
        costs = np.empty((rows.size, 2, 2))
        costs[:, 0, 0], costs[:, 0, 1], costs[:, 1, 0], costs[:, 1, 1] = tn, fp, fn, tp
        ok: NDArray[np.bool_] = np.asarray(np.isfinite(costs).all(axis=(1, 2)))
        return costs, ok


def decide_settings(config: RunConfig) -> MinRiskSettings | None:
    """:meth:`MinRiskSettings.from_config` for decide, which needs ``columns.probability``."""
    settings = MinRiskSettings.from_config(config)
    if settings is not None and not config.columns.get("probability"):
        raise ConfigError("min_risk: decisions by minimum risk need columns.probability")
    return settings


def with_min_risk(
    decisions: pa.Table, settings: MinRiskSettings | None, raw: pa.Table,
    batch: ValidatedBatch,
) -> tuple[pa.Table, Counter[str]]:
    """Fill ``min_risk_decision`` and ``expected_cost`` of a batch's decision table.

    ``decisions`` has one row per valid row of ``batch`` (``batch.valid_rows`` index ``raw``,
    the batch as read). Without settings the table is returned unchanged (null fields).
    """
    if settings is None:
        return decisions, Counter()
    where = f"{batch.source}: row group {batch.row_group}"
    costs, ok = settings.costs(raw, batch.valid_rows, where)
    n = costs.shape[0]
    p = batch.probabilities if batch.probabilities is not None else np.full(n, np.nan)
    has_p = ~np.isnan(p)
    use = ok & has_p
    decision = np.zeros(n, dtype=bool)
    cost = np.zeros(n)
    if use.any():
        idx = np.flatnonzero(use)
        risk = expected_costs(p[idx], costs[idx])
        chosen = bayes_minimum_risk(p[idx], costs[idx])
        decision[idx] = chosen == 1
        cost[idx] = risk[np.arange(idx.size), chosen]
    null = ~use
    schema = decisions.schema
    for name, values in (("min_risk_decision", pa.array(decision, pa.bool_(), mask=null)),
                         ("expected_cost", pa.array(cost, pa.float64(), mask=null))):
        decisions = decisions.set_column(schema.get_field_index(name), name, values)
    counts: Counter[str] = Counter(min_risk_flagged=int((decision & use).sum()))
    counts["min_risk_null.no_probability"] = int((~has_p).sum())
    counts["min_risk_null.invalid_cost"] = int((has_p & ~ok).sum())
    return decisions, counts


def cost_weighted(
    batch: ValidatedBatch, raw: pa.Table, settings: MinRiskSettings | None
) -> ValidatedBatch:
    """The batch with every valid row's weight multiplied by its regret (see module doc).

    Unchanged unless ``settings.weight_rated_rows``. Rows with a negative regret get weight 0
    and are counted in the batch's accounting (:data:`NEGATIVE_REGRET` ``+ kind``). Raises
    :class:`InputError` naming the file, row group and cost column when a used row's regret is
    null or non-finite.
    """
    if settings is None or not settings.weight_rated_rows:
        return batch
    where = f"{batch.source}: row group {batch.row_group}"
    costs, _ = settings.costs(raw, batch.valid_rows, where)
    positive_regret = costs[:, 1, 0] - costs[:, 1, 1]
    negative_regret = costs[:, 0, 1] - costs[:, 0, 0]
    positive = batch.rated & batch.labels
    regret = np.where(positive, positive_regret, negative_regret)
    bad = ~np.isfinite(regret)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        row = int(batch.valid_rows[first])
        names = ("fn", "tp") if positive[first] else ("fp", "tn")
        columns = _columns_of(settings, names)
        raise InputError(
            f"{where}: {int(bad.sum())} row(s) have a null or non-finite cost regret "
            f"(C_{names[0].upper()} - C_{names[1].upper()}) for min_risk.weight_rated_rows, "
            f"first at row {row} (columns {columns}); fill the cost or drop the row"
        )
    below = regret < 0
    accounting = batch.accounting
    if below.any():
        regret = np.where(below, 0.0, regret)
        accounting = accounting.copy()
        for kind, mask in (("rated_positive", positive), ("rated_negative",
                                                          batch.rated & ~batch.labels),
                           ("unrated", ~batch.rated)):
            count = int(np.count_nonzero(below & mask))
            if count:
                accounting[NEGATIVE_REGRET + kind] += count
    weights = regret if batch.weights is None else batch.weights * regret
    return dataclasses.replace(batch, weights=weights, accounting=accounting)


def _columns_of(settings: MinRiskSettings, names: Sequence[str]) -> list[str]:
    specs = {s.name: s for s in (settings.fn, settings.fp, settings.tp, settings.tn)}
    return [specs[n].column or f"constant {specs[n].value:g}" for n in names]
