"""Validating one Arrow batch of the score stream: usable rows, unrated rows, dead letters.

Pure pyarrow + numpy (no Beam), so the same code runs in a DoFn, in a benchmark loop and in
tests. Every row of a batch ends up in exactly one bucket: ``used`` (rated and valid: it enters
the threshold grids), ``unrated`` (valid, label null) or a dead-letter reason. The first failing
check decides the reason, in this order:

``missing_group`` (recalibrate; ``costlib decide`` with ``decide.null_group: dead_letter``: by
default decide decides such a row with the all-groups points, writes its ``group`` as
``"__all__"`` and counts it, :data:`NULL_GROUP_DECIDED`), ``reserved_group`` (the group is
``"__all__"``, the name of the all-groups grid), ``missing_item_id``, ``missing_event_time``
(windowed mode only), ``implausible_event_time`` (windowed mode,
``plausibility.event_times_outside_range: dead_letter``), ``invalid_score`` (NaN or +-inf),
``invalid_weight`` (null, NaN, inf or negative), ``invalid_probability`` (decide only: NaN or
outside [0, 1]), ``label_without_score`` (rated, but no classifier scored the row, and it is not
an audit-sample row: with ``0 < p < 1`` such a row is used, a label no threshold can flag that
counts in ``P̂``), ``missing_audit_probability`` (``columns.audit_probability`` configured, the
row is rated and its p is null), ``invalid_audit_probability`` (p NaN, p outside (0, 1] on a
rated row or outside [0, 1] on an unrated row), ``score_outside_range``
(``plausibility.scores_outside_range: dead_letter``). (``invalid_label``, a numeric label other
than 0 or 1, is checked with the labels, before ``label_without_score``; how labels are read:
:mod:`costlib_pipelines.io.labels`.)

Audit probabilities (``columns.audit_probability``, see :mod:`costlib.audit._weights`): a
valid rated row enters the grids with weight ``w / p``; a valid unrated row with ``0 < p < 1`` is
represented by the audit sample (counted ``unrated`` and ``audit.represented``, but not a
coverage gap); an unrated row with p null, 0 or 1 is an unrated gap.

Plausibility checks (config section ``plausibility``, see
:class:`~costlib_pipelines.io.plausibility.Plausibility`) also count the
rows that fail them in extra counters ``plausibility.*`` next to the buckets (they are not
buckets: a counted row stays used or unrated unless the check dead-letters it). A check counts
the rows that fail it among the rows no earlier check dead-lettered.

Schema problems (a missing column, a column of the wrong type) are not row problems: they raise
:class:`~costlib_pipelines.io.schema.SchemaError` naming the file and column, and stop the run
(:mod:`costlib_pipelines.io.schema`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from costlib.thresholds.loop import ALL_GROUPS
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.labels import read_labels
from costlib_pipelines.io.plausibility import PLAUSIBILITY, Plausibility
from costlib_pipelines.io.schema import check_schema

__all__ = ["AUDIT", "NULL_GROUP_DECIDED", "REASONS", "ValidatedBatch", "validate_batch"]

#: ``decide.null_group`` when the config does not say (the schema's default).
NULL_GROUP_DEFAULT = "all_groups"

#: Decision count of the rows without a group that ``costlib decide`` decided with the
#: all-groups points (``decide.null_group: all_groups``); their ``group`` is ``"__all__"``.
NULL_GROUP_DECIDED = "null_group_decided_with_all_groups"

#: Dead-letter reasons (new reasons are appended: the order of the checks is in the module doc).
REASONS = (
    "missing_group",
    "missing_item_id",
    "missing_event_time",
    "invalid_score",
    "invalid_weight",
    "invalid_probability",
    "label_without_score",
    "reserved_group",
    "implausible_event_time",
    "score_outside_range",
    "missing_audit_probability",
    "invalid_audit_probability",
    "invalid_label",
)

#: Prefix of the audit counters (extra counters, not buckets): ``audit.audited`` = used rows
#: with p < 1 (the rated audit sample), ``audit.represented`` = unrated rows with 0 < p < 1
#: (represented by the audit sample, not coverage gaps).
AUDIT = "audit."


@dataclass
class ValidatedBatch:
    """The valid rows of one batch, as numpy arrays, and what happened to every row.

    ``scores`` has shape (n_valid, k) with ``-inf`` for null (did not score); ``rated`` marks
    rows with a label; ``labels`` is meaningful where ``rated``. ``group_codes`` index
    ``group_names``. ``audit_probabilities`` (NaN = null) when ``columns.audit_probability``
    is configured, else None.
    """

    source: str
    row_group: int
    n_read: int
    group_codes: NDArray[np.intp]
    group_names: list[str]
    scores: NDArray[np.float64]
    rated: NDArray[np.bool_]
    labels: NDArray[np.bool_]
    weights: NDArray[np.float64] | None
    item_ids: pa.Array
    event_times_us: NDArray[np.int64] | None
    probabilities: NDArray[np.float64] | None
    set_ids: pa.Array | None
    valid_rows: NDArray[np.intp]
    dead_letters: pa.Table | None
    accounting: Counter = field(default_factory=Counter)
    audit_probabilities: NDArray[np.float64] | None = None

    def rated_rows(self):
        """``(row indices, group codes, scores, labels, weights)`` of the rated valid rows.

        Selected with one index and ``take`` (several times faster than boolean masks).
        """
        rows = np.flatnonzero(self.rated)
        return (
            rows,
            self.group_codes.take(rows),
            self.scores.take(rows, axis=0),
            self.labels.take(rows),
            None if self.weights is None else self.weights.take(rows),
        )


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    if not isinstance(col, pa.ChunkedArray):
        return col
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()  # one chunk: no copy


def _nulls(arr: pa.Array) -> NDArray[np.bool_] | None:
    """Null mask, or None when the column has no null (Arrow keeps the count: no pass)."""
    if arr.null_count == 0:
        return None
    return arr.is_null().to_numpy(zero_copy_only=False)


def _floats(arr: pa.Array) -> NDArray[np.float64]:
    """Values as float64 with NaN where null (callers keep the null mask separately).

    A float64 column is not cast (a cast copies), and nulls are filled in Arrow before the
    zero-copy view (``to_numpy`` of an array with nulls is ~4x slower than both)."""
    if pa.types.is_null(arr.type):
        return np.full(len(arr), np.nan)
    if not pa.types.is_float64(arr.type):
        arr = arr.cast(pa.float64())
    if arr.null_count:
        arr = arr.fill_null(np.nan)
    return arr.to_numpy(zero_copy_only=False)


def validate_batch(
    table: pa.Table,
    config: RunConfig,
    *,
    source: str,
    row_group: int,
    windowed: bool = False,
    for_decisions: bool = False,
    plausibility: Plausibility | None = None,
) -> ValidatedBatch:
    """Split a batch into valid rows, unrated rows and dead letters (see the module doc).

    ``plausibility`` defaults to :meth:`Plausibility.from_config` (``now`` = the call's time);
    DoFns resolve it once so that every batch of a run uses the same event-time range.

    Raises
    ------
    SchemaError
        The batch's schema breaks the contract.
    InputError
        A plausibility check set to ``error`` failed (naming file, row group and column).
    """
    check_schema(table.schema, source, config, windowed=windowed, for_decisions=for_decisions)
    if plausibility is None:
        plausibility = Plausibility.from_config(config)
    cols = config.columns
    n = table.num_rows
    reason = np.full(n, -1, dtype=np.int8)  # index into REASONS, -1 = valid
    accounting: Counter = Counter(read=n)
    where = f"{source}: row group {row_group}"

    def flag(mask: NDArray[np.bool_] | None, name: str) -> None:
        if mask is not None and mask.any():
            reason[(reason < 0) & mask] = REASONS.index(name)

    group = _column(table, cols["group"])
    null_group = _nulls(group)
    # decide.null_group all_groups: a row without a group is decided with the all-groups
    # points, as a group without a record of its own is (counted, not dead-lettered)
    to_all = (for_decisions and null_group is not None and bool(null_group.any())
              and config.decide.get("null_group", NULL_GROUP_DEFAULT) == "all_groups")
    if not to_all:
        flag(null_group, "missing_group")
    encoded = group if pa.types.is_dictionary(group.type) else pc.dictionary_encode(group)
    group_names = [str(g) for g in encoded.dictionary.to_pylist()]
    indices = encoded.indices
    group_codes = (indices.fill_null(0) if indices.null_count else indices).to_numpy(
        zero_copy_only=False).astype(np.intp)
    if ALL_GROUPS in group_names:
        reserved = [i for i, name in enumerate(group_names) if name == ALL_GROUPS]
        reserved_rows = np.isin(group_codes, reserved)
        flag(reserved_rows if null_group is None else reserved_rows & ~null_group,
             "reserved_group")
    if to_all:
        assert null_group is not None
        if ALL_GROUPS not in group_names:
            group_names.append(ALL_GROUPS)
        group_codes[null_group] = group_names.index(ALL_GROUPS)
        accounting[NULL_GROUP_DECIDED] = int(null_group.sum())
    item_ids = _column(table, cols["item_id"])
    flag(_nulls(item_ids), "missing_item_id")
    event_times = None
    if windowed:
        times = _column(table, cols["event_time"])
        flag(_nulls(times), "missing_event_time")
        # In the column's own unit, then floored to microseconds (a cast to "us" refuses to
        # drop nanoseconds, and truncation would round times before 1970 the wrong way).
        per_us = {"s": 1e-6, "ms": 1e-3, "us": 1, "ns": 1000}[times.type.unit]
        raw = times.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        event_times = raw * int(1 / per_us) if per_us < 1 else raw // per_us
        _check_event_times(event_times, reason, plausibility, accounting,
                           f"{where}: column '{cols['event_time']}'")

    k = len(config.classifiers)
    scores = np.empty((n, k))
    unscored = None  # rows no classifier scored (only computed when some score is null)
    outside: dict[str, tuple[NDArray[np.bool_], NDArray[np.bool_]]] = {}
    for j, name in enumerate(config.classifiers):
        arr = _column(table, name)
        values = _floats(arr)
        null = _nulls(arr)
        finite = np.isfinite(values)
        flag(~finite if null is None else ~null & ~finite, "invalid_score")
        if plausibility.score_range is not None:  # NaN (null) compares False
            low, high = plausibility.score_range
            below, above = values < low, values > high
            if below.any() or above.any():
                outside[name] = (below, above)
        scores[:, j] = values  # (values may be a read-only view of the Arrow buffer)
        if null is not None:
            scores[null, j] = -np.inf
        if j == 0:
            unscored = null
        elif unscored is not None:
            unscored = unscored & null if null is not None else None

    weights = None
    if cols.get("weight") and not for_decisions:
        warr = _column(table, cols["weight"])
        w = _floats(warr)
        flag(~(np.isfinite(w) & (w >= 0)), "invalid_weight")  # null -> NaN -> invalid
        weights = w

    probabilities = set_ids = None
    if for_decisions and cols.get("probability"):
        parr = _column(table, cols["probability"])
        p = _floats(parr)
        pnull = _nulls(parr)
        out_of_range = ~((p >= 0) & (p <= 1))
        flag(out_of_range if pnull is None else ~pnull & out_of_range, "invalid_probability")
        probabilities = p if pnull is None else np.where(pnull, np.nan, p)
    if for_decisions and cols.get("set_id"):
        set_ids = _column(table, cols["set_id"])

    audit_arr = audit = None
    if cols.get("audit_probability") and not for_decisions:
        audit_arr = _column(table, cols["audit_probability"])
        audit = _floats(audit_arr)  # checked below, once rated rows are known
    if for_decisions:
        rated = np.zeros(n, dtype=bool)
        labels = np.zeros(n, dtype=bool)
    else:
        # bool, 0/1 integers, 0.0/1.0 floats (NaN: not rated), strings with label_positive
        rated, labels, invalid = read_labels(
            _column(table, cols["label"]), column=cols["label"], where=where,
            positive=cols.get("label_positive"))
        flag(invalid, "invalid_label")
        if unscored is not None:
            # an audit-sample row (0 < p < 1) no classifier scored is a positive or negative
            # no threshold can flag: it belongs in P-hat
            sampled = np.zeros(n, dtype=bool)
            if audit is not None:
                with np.errstate(invalid="ignore"):
                    sampled = (audit > 0) & (audit < 1)
            flag(rated & unscored & ~sampled, "label_without_score")
    if audit_arr is not None:
        _check_audit_probabilities(audit_arr, audit, rated, flag)
    if outside:
        _check_scores(outside, reason, plausibility, accounting, where)

    valid = reason < 0
    valid_rows = np.flatnonzero(valid)
    if for_decisions:
        accounting["decided"] = int(valid.sum())
    else:
        accounting["used"] = int((valid & rated).sum())
        accounting["unrated"] = int((valid & ~rated).sum())
        if audit is not None:
            accounting[f"{AUDIT}audited"] = int((valid & rated & (audit < 1)).sum())
            accounting[f"{AUDIT}represented"] = int(
                (valid & ~rated & (audit > 0) & (audit < 1)).sum())
            accounting.update(_audited_per_stratum(valid & rated & (audit < 1), scores,
                                                   labels, config))
    dead_letters = None
    if not valid.all():
        bad = np.flatnonzero(~valid)
        for code, count in zip(*np.unique(reason[bad], return_counts=True), strict=True):
            accounting[f"dead_letter.{REASONS[code]}"] = int(count)
        dead_letters = table.take(pa.array(bad)).append_column(
            "dead_letter_reason", pa.array([REASONS[c] for c in reason[bad]], pa.string())
        )
        dead_letters = dead_letters.append_column(
            "source_file", pa.array([source] * bad.size, pa.string())
        ).append_column(
            "row_group", pa.array(np.full(bad.size, row_group), pa.int64())
        ).append_column("row_in_row_group", pa.array(bad.astype(np.int64)))

    if valid.all():  # the common case: no copies
        def pick(a):
            return a
    else:
        take = pa.array(valid_rows)

        def pick(a):
            return a.take(take) if isinstance(a, pa.Array) else a[valid_rows]

    return ValidatedBatch(
        source=source,
        row_group=row_group,
        n_read=n,
        group_codes=pick(group_codes),
        group_names=group_names,
        scores=pick(scores),
        rated=pick(rated),
        labels=pick(labels),
        weights=None if weights is None else pick(weights),
        item_ids=pick(item_ids),
        event_times_us=None if event_times is None else pick(event_times),
        probabilities=None if probabilities is None else pick(probabilities),
        set_ids=None if set_ids is None else pick(set_ids),
        valid_rows=valid_rows,
        dead_letters=dead_letters,
        accounting=accounting,
        audit_probabilities=None if audit is None else pick(audit),
    )


def _audited_per_stratum(audited: NDArray[np.bool_], scores: NDArray[np.float64],
                         labels: NDArray[np.bool_], config: RunConfig) -> dict[str, int]:
    """Audited rows (rated, p < 1) per stratum of the config's audit design, by label:
    ``audit.stratum.<h>.positives`` / ``.negatives`` (only nonzero counts; unweighted). A
    decide run with ``audit.design: auto`` reads them from the recalibration it applies
    (:mod:`costlib_pipelines.decide.audit_sizing`)."""
    if not audited.any() or config.relative_strata:  # relative strata: see audit_sizing
        return {}
    design = config.audit_design()
    stratum = design.strata(scores[audited])
    positive = labels[audited]
    out = {}
    for name, mask in (("positives", positive), ("negatives", ~positive)):
        for h, count in enumerate(np.bincount(stratum[mask], minlength=design.n_strata)):
            if count:
                out[f"{AUDIT}stratum.{h}.{name}"] = int(count)
    return out


def _check_audit_probabilities(arr: pa.Array, p: NDArray[np.float64], rated: NDArray[np.bool_],
                               flag) -> None:
    """Flag bad rows of the audit probability column ``arr`` (``p``: its values as float64,
    NaN = null) via ``flag``.

    A rated row needs p in (0, 1] (null: ``missing_audit_probability``, otherwise
    ``invalid_audit_probability``); an unrated row may have p null or in [0, 1] (NaN or
    outside: ``invalid_audit_probability``).
    """
    null = _nulls(arr)
    if null is None:
        null = np.zeros(p.size, dtype=bool)
    if pa.types.is_null(arr.type):
        null = np.ones(p.size, dtype=bool)
    flag(rated & null, "missing_audit_probability")
    ok = np.where(rated, (p > 0) & (p <= 1), (p >= 0) & (p <= 1))  # NaN compares False
    flag(~null & ~ok, "invalid_audit_probability")


def _apply(action: str, failed: NDArray[np.bool_], reason: NDArray[np.int8], name: str,
           message: str) -> None:
    """Dead-letter ``failed`` rows as ``name``, or raise ``InputError`` (``message``)."""
    if action == "error":
        raise InputError(message)
    if action == "dead_letter":
        reason[failed] = REASONS.index(name)


def _check_event_times(times_us: NDArray[np.int64], reason: NDArray[np.int8],
                       settings: Plausibility, accounting: Counter, where: str) -> None:
    """Count (and act on) event times outside ``settings.event_time_range_us``."""
    start, end = settings.event_time_range_us
    open_rows = reason < 0
    before = open_rows & (times_us < start)
    after = open_rows & (times_us > end)
    n_before, n_after = int(before.sum()), int(after.sum())
    if not n_before + n_after:
        return
    accounting[f"{PLAUSIBILITY}event_time_outside_range"] += n_before + n_after
    if n_before:
        accounting[f"{PLAUSIBILITY}event_time_before_range"] += n_before
    if n_after:
        accounting[f"{PLAUSIBILITY}event_time_after_range"] += n_after
    failed = before | after
    example = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
        microseconds=int(times_us[np.flatnonzero(failed)[0]]))
    low, high = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(t))
                 for t in (start, end))
    _apply(settings.event_times_outside_range, failed, reason, "implausible_event_time",
           f"{where}: {n_before + n_after:,} event time(s) outside the plausible range "
           f"[{low:%Y-%m-%d %H:%M}, {high:%Y-%m-%d %H:%M}] UTC (e.g. {example:%Y-%m-%d %H:%M:%S}; "
           "epoch seconds in a millisecond column?); plausibility.event_times_outside_range "
           "is 'error'")


def _check_scores(outside: Mapping[str, tuple[NDArray[np.bool_], NDArray[np.bool_]]],
                  reason: NDArray[np.int8], settings: Plausibility, accounting: Counter,
                  where: str) -> None:
    """Count (and act on) rows with a score outside ``settings.score_range``."""
    open_rows = reason < 0
    failed = np.zeros(reason.size, dtype=bool)
    for name, (below, above) in outside.items():
        for side, mask in (("below", below), ("above", above)):
            count = int((open_rows & mask).sum())
            if count:
                accounting[f"{PLAUSIBILITY}score_{side}_range.{name}"] += count
                failed |= mask
    failed &= open_rows
    total = int(failed.sum())
    if not total:
        return
    accounting[f"{PLAUSIBILITY}score_outside_range"] += total
    low, high = settings.score_range
    columns = ", ".join(f"'{name}'" for name in outside)
    _apply(settings.scores_outside_range, failed, reason, "score_outside_range",
           f"{where}: column(s) {columns}: {total:,} row(s) with a score outside the plausible "
           f"range [{low:g}, {high:g}]; plausibility.scores_outside_range is 'error'")
