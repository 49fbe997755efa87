"""The decision pipeline: score streams in, one decision record per valid row out.

For every valid row (see :mod:`costlib_pipelines.io.batches`, ``for_decisions=True``):

- **threshold decision** with its group's operating point: classifier ``j`` fires iff
  ``score_j >= threshold_j`` (a null score never fires, a ``+inf`` threshold is "off"), combined
  over classifiers by the config's ``rule`` (``any`` / ``all``);
- **top-k decision** (only when the config names both a ``probability`` and a ``set_id``
  column): the rows of each set are decoded together by :func:`costlib.decoding.
  optimal_topk_ragged` with ``decoding.loss`` / ``decoding.params``; ``k`` and
  ``expected_loss`` are the set's. Rows with a null set id or a null probability get null top-k
  fields.

Which operating point a group uses (records of ``config.decision_method`` only):

- batch records (``window_start`` null) when the operating points hold any; otherwise
  (a windowed run) per group the record of its latest *complete* window (largest
  ``window_end``) and, within it, the newest pane (largest ``pane_index``: ACCUMULATING panes
  hold all rows so far). Sliding windows that overlap the start or the end of the data hold
  only part of their span; a window ``[start, end)`` is *complete* when at most
  ``decide.max_uncovered_share`` (default 0.01) of its span lies outside ``[min, max]`` event
  time that the recalibration run read (its manifest's ``event_time_range``). No complete
  window (or no recorded range) stops the run with an error. ``decide.window: latest`` takes
  the latest window whatever its coverage. The manifest's ``operating_points.window`` names
  the windows used (and which groups used each), and every decision record its
  ``operating_point_window_end``;
- status ``ok``: the group's thresholds (``operating_point_group`` = the group);
  ``fallback``: the thresholds stored in the record, which are the parent's
  (``operating_point_group`` = the record's ``fallback_group``); ``kept``: the thresholds in
  force that the recalibration kept for want of ratings (``operating_point_group`` = the
  group); ``insufficient_data``: null threshold decision;
- ``point_status`` (coverage and constraints, issue 10): ``ok``, ``coverage_limited`` and
  ``resolution_limited`` apply the record's thresholds (a coverage-limited point is the best one
  inside the rated region: the safe choice; a resolution-limited one is the lattice's best);
  ``infeasible`` (no covered point meets the constraints; the record holds the nearest point)
  gives the group a null threshold decision: decide fails closed rather than apply thresholds that
  break a constraint. Records without the field (older runs) count as ``ok``. The manifest lists
  ``groups_infeasible``, ``groups_coverage_limited`` and ``groups_resolution_limited``;
- a group with no record uses the ``"__all__"`` record if that one has thresholds
  (``operating_point_group = "__all__"``), else its threshold decision is null.

**Audit sample** (config ``audit``, issue 11; :mod:`costlib.audit._sampling`): when enabled,
every row whose threshold decision is not true (false, or null: a group without usable
thresholds) is audited iff ``u(item_id, salt) < pi`` with
``pi = min(1, max(floor, budget_share * weight))`` of its stratum (by the row's highest score);
``audit_probability`` is 1 for flagged rows and ``pi`` otherwise. The salt is ``audit.salt``,
or the run id when that is null. With ``audit.design: auto`` the probabilities are sized
before the pipeline starts from the previous decide run's per-stratum counts in the same output
(and the audited labels per stratum of the recalibrate run applied), so that the expected
audited share of unflagged rows is ``budget_share`` (:mod:`costlib_pipelines.decide.audit_sizing`);
the records carry those ``pi_h``. Disabled: every record has ``audit`` false and
``audit_probability`` null, and no id is hashed.
``decision_counts.json`` holds ``audited``, ``audit_unflagged.<stratum>``, ``audit_expected``
and ``audit_expected_variance``; the manifest's ``audit`` section the design, how it was sized
(``sizing``), salt and counts (:func:`audit_summary`).

The records must have been optimised for the config's ``rule`` and name the config's
classifiers (in any order: thresholds are re-ordered to the config's order); otherwise the run
stops with a message saying what differs. The mapping is small and goes to the workers inside
the DoFn (pickled), not as a side input. ``config.windowing`` plays no part: every row is
decided with the thresholds chosen above, whatever its event time.

Example: 10 whole days and 6 hours of an 11th, windows of 7 days sliding by 1. The window with
the largest end, ``[day 10, day 17)``, holds the 6 hours only (96% uncovered); the latest
complete one is ``[day 3, day 10)``.

Output layout (like :mod:`costlib_pipelines.recalibrate.pipeline`; see
:mod:`costlib_pipelines.io.runs`)::

    OUTPUT/LATEST
    OUTPUT/runs/<run_id>/
      decisions/part-<sha1(source)[:16]>-rg<NNNNN>.parquet   per input row group: rows decided
                                                           without a set (all rows on the fast
                                                           path)
      decisions/part-bucket-<NNNNN>.parquet   per set-id hash bucket: rows decoded in sets,
                                              sorted by (set_id, item_id)
      dead_letter/part-*.parquet              bad rows with reason, source file, row group, row
      accounting.json                         read, decided, dead_letter.<reason>
      decision_counts.json                    rows written, flagged, null, top-k rows/sets
      manifest.json                           written LAST (row accounting checked: read =
                                              decided + dead-lettered, and rows written =
                                              decided); then LATEST is replaced

Every file name depends on the input only (never on the runner or the order of work), so a
retried bundle overwrites its own file and the same input gives the same files. Decision files
are zstd Parquet whose schema is exactly ``schemas/decision.json`` (see
:func:`write_decisions`).

On the fast path (no sets) one DoFn reads, validates, decides and writes each row group of a
file (:class:`DecideFileFn`), so only small counters travel between transforms.

With ``decoding.sets_contiguous: true`` (the stream written set by set: every set one run of
rows inside one row group) there is no shuffle: :class:`DecideFileFn` decodes each row group's
sets where it reads them (:func:`decode_contiguous_sets`: runs checked, items ordered as below,
the same decoder, the same records bit for bit) and writes all of the row group's rows to its
``part-<sha1>-rg<N>`` file; one hash per set goes to :class:`CheckSetsFn`, which fails the run
(exit 2, before the manifest) if a set is in two row groups anywhere in the input.

The shuffle moves Arrow tables, not rows: each batch splits its set rows into
``decoding.buckets`` buckets by a stable hash of the set id (``pandas.util.hash_array`` of the
set id's UTF-8 bytes, the same as of the string: SipHash with a fixed key, identical across
processes and machines; Python's ``hash()`` of ``str`` is salted per process), emits
``(bucket, table)``, and after a ``GroupByKey`` each bucket's tables are concatenated and
sorted by ``(set_id, item_id, probability, group, threshold_decision, audit,
audit_probability)`` (strings compared as UTF-8) before decoding. Within a set, items are thus
ordered by item id, and ties in probability go to the earlier item id. The set rows travel as
Arrow IPC bytes, one payload per batch and bucket (:func:`split_sets`, :func:`encode_sets`):
all-null columns are left out and dictionary indices narrowed to the smallest integer type
(about 30 bytes a row instead of 64 for the benchmark's rows; the local runner copies every
shuffled byte several times). The decode stage takes the rows as they travelled
(:func:`shuffled_rows`) and puts the null columns back after sorting; no threshold decision is
computed twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam import pvalue
from apache_beam.io.filesystems import FileSystems
from numpy.typing import NDArray

from costlib.audit._sampling import AuditDesign, audit_sample, expected_audits
from costlib.audit._strata import cutoff_strata, lattice_cells, lattice_depths
from costlib.decoding import optimal_topk_ragged
from costlib.decoding._losses import get_loss
from costlib.thresholds._recalibration import ALL_GROUPS
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.decide.audit_lattice import CELLS_FILE as AUDIT_CELLS_FILE
from costlib_pipelines.decide.audit_lattice import decide_lattice, relative_cutoffs
from costlib_pipelines.decide.audit_sizing import PreviousCounts, first_run_design, sized_design
from costlib_pipelines.io.batches import ValidatedBatch, validate_batch
from costlib_pipelines.io.files import (
    InputError,
    as_stored,
    match_inputs,
    read_row_groups,
    write_bytes_atomically,
    write_json,
)
from costlib_pipelines.io.lock import hold_output
from costlib_pipelines.io.plausibility import plausibility_summary
from costlib_pipelines.io.records import arrow_schema
from costlib_pipelines.io.runs import (
    CARRIED,
    RunDirectory,
    latest_run_id,
    load_operating_points,
    read_manifest,
    verified_accounting,
)
from costlib_pipelines.recalibrate import min_risk
from costlib_pipelines.recalibrate.accounting import SumCounters, report_metrics
from costlib_pipelines.recalibrate.dead_letters import WriteDeadLettersFn, dead_letter_name
from costlib_pipelines.recalibrate.pipeline import preflight
from costlib_pipelines.runner import make_pipeline, runner_name

__all__ = [
    "DECISION_SCHEMA",
    "AuditSettings",
    "CheckSetsFn",
    "ContiguousSets",
    "DecisionThresholds",
    "GroupThresholds",
    "as_contract",
    "as_stored",
    "audit_settings",
    "build_decide",
    "decision_columns",
    "decode_contiguous_batches",
    "decode_contiguous_sets",
    "decoding_settings",
    "read_decisions",
    "run_decide",
    "select_operating_points",
    "set_buckets",
    "set_id_hashes",
    "sets_contiguous",
    "write_decisions",
]

#: Arrow schema of the decision records (``schemas/decision.json``).
DECISION_SCHEMA = arrow_schema("decision.json")

#: Column carried through the shuffle next to the decision columns (dropped before writing).
PROBABILITY = "__probability"
#: Counter prefix of rows per group and lattice cell (relative audit strata) and the run file
#: they are written to (:func:`costlib_pipelines.decide.audit_lattice.relative_cutoffs` reads it).
CELL_PREFIX = "audit_cell."
CELLS_FILE = AUDIT_CELLS_FILE


# --------------------------------------------------------------------------- operating points
@dataclass(frozen=True)
class GroupThresholds:
    """The thresholds one group decides with (``thresholds is None``: null decision)."""

    thresholds: tuple[float, ...] | None
    operating_point_group: str | None
    method: str | None
    window_end: dt.datetime | None = None  # end of the record's window (None: batch record)


NO_THRESHOLDS = GroupThresholds(None, None, None)


@dataclass(frozen=True)
class AuditSettings:
    """The audit design and the salt of a run (small, pickled into DoFns); ``sizing`` records
    how the design was chosen (:func:`costlib_pipelines.decide.audit_sizing.sized_design`)."""

    design: AuditDesign
    salt: str
    #: Only rows of groups without a usable operating point are candidates (the floor audit
    #: of ``audit.groups_without_point`` when the audit is disabled).
    only_without_point: bool = False
    sizing: dict[str, Any] = field(default_factory=lambda: {"design": "fixed"})
    #: ``audit.strata.relative_to: point``: strata are lattice depths below the group's
    #: thresholds in force (:mod:`costlib.audit._strata`) on this lattice (None: unknown, every
    #: unflagged row in stratum 0); ``lattice_record`` is the manifest's ``audit.lattice``.
    relative: bool = False
    lattice: tuple[tuple[float, ...], ...] | None = None
    lattice_record: dict[str, Any] | None = None
    #: Relative strata: depth cutoffs per group (``default_cutoffs`` for the others).
    cutoffs: dict[str, tuple[float, ...]] = field(default_factory=dict)
    default_cutoffs: tuple[float, ...] = ()
    cutoffs_record: dict[str, Any] | None = None

    def relative_strata(self, scores: NDArray[np.float64], thresholds: NDArray[np.float64],
                        rule: str, group_names: Sequence[str], codes: NDArray[np.integer]
                        ) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
        """Depth of every row below its thresholds (:func:`costlib.audit.lattice_depths`;
        ``inf`` without a lattice) and its relative stratum (its group's cutoffs)."""
        if self.lattice is None:
            depth = np.full(scores.shape[0], np.inf)
        else:
            depth = lattice_depths(scores, thresholds, self.lattice, rule)
        table = np.asarray([self.cutoffs.get(g, self.default_cutoffs) for g in group_names],
                           dtype=np.float64).reshape(len(group_names), -1)
        return depth, cutoff_strata(depth, table[codes])


def audit_settings(config: RunConfig, run_id: str, output: str | None = None,
                   operating_points: str | None = None,
                   thresholds: DecisionThresholds | None = None) -> AuditSettings | None:
    """``config.audit`` of a run; the salt defaults to the run id.

    Disabled: None, unless ``audit.groups_without_point`` is ``"floor"`` (the default): then
    a one-stratum design with ``π = floor`` for the rows of groups without a usable
    operating point only (``only_without_point``), so that such a group (e.g. on a first run,
    with nothing to keep) gets unbiased ratings instead of none.

    With ``audit.design: auto`` and ``output``, the design is sized from the counts of the
    decide run ``output``'s ``LATEST`` names and the audited labels of the recalibrate run
    ``operating_points`` (:mod:`costlib_pipelines.decide.audit_sizing`).

    With ``audit.strata.relative_to: point`` the lattice of the depths is the one of the
    recalibrate run ``operating_points`` (else the config's fixed edges with ``thresholds``
    added; :func:`costlib_pipelines.decide.audit_lattice.decide_lattice`).
    """
    audit = config.audit
    salt = audit["salt"] if audit["salt"] is not None else run_id
    if not audit["enabled"]:
        if audit.get("groups_without_point", "floor") != "floor":
            return None
        floor = float(audit["floor"])
        return AuditSettings(AuditDesign(edges=(), weights=(1.0,), floor=floor,
                                         budget_share=floor), salt, only_without_point=True)
    if output is None:
        sizing = {"design": audit["design"]}
        design = config.audit_design()
        if audit["design"] == "auto":
            design = first_run_design(design)
            sizing.update(counts_from=None, reason="no output to read previous counts from: "
                                                   "the configured weights scaled so that no "
                                                   "stratum exceeds budget_share")
    lattice, record = None, None
    by_group: dict[str, tuple[float, ...]] = {}
    default: tuple[float, ...] = ()
    source: dict[str, Any] = {}
    if config.relative_strata:
        applied = np.zeros((0, len(config.classifiers)))
        if thresholds is not None:
            applied = np.asarray([e.thresholds for e in [*thresholds.by_group.values(),
                                                         thresholds.default]
                                  if e.thresholds is not None], dtype=np.float64)
        lattice, record = decide_lattice(config, operating_points, applied)

        def in_force(group: str) -> np.ndarray:
            entry = thresholds.get(group) if thresholds is not None else None
            return np.full(len(config.classifiers), np.inf) \
                if entry is None or entry.thresholds is None else np.asarray(entry.thresholds)
        by_group, default, source = relative_cutoffs(config, output, lattice, in_force)
    if output is not None:
        recut = None
        if source.get("unflagged") is not None and sum(source["unflagged"]) > 0:
            recut = PreviousCounts(str(source["from"]), tuple(source["unflagged"]))
        design, sizing = sized_design(config, output, operating_points, recut)
    if not config.relative_strata:
        return AuditSettings(design, salt, sizing=sizing)
    if default and all(np.isinf(default)) and not by_group:
        # no previous counts: every unflagged row in the nearest stratum, audited with
        # budget_share (fixed or auto alike; fixed would spend budget_share * weights[-1])
        design = AuditDesign(edges=design.edges, weights=(1.0,) * design.n_strata,
                             floor=design.floor, budget_share=float(audit["budget_share"]))
        sizing = {**sizing, "scale": design.budget_share,
                  "reason": f"{source.get('reason', '')}: pi = budget_share for every "
                            "unflagged row"}
    return AuditSettings(design, salt, sizing=sizing, relative=True, lattice=lattice,
                         lattice_record=record, cutoffs=by_group, default_cutoffs=default,
                         cutoffs_record=source)


@dataclass(frozen=True)
class DecisionThresholds:
    """Thresholds per group, in the config's classifier order; small, pickled into DoFns.

    Parameters
    ----------
    by_group : dict of str to GroupThresholds
        Groups that have an operating point record.
    default : GroupThresholds
        For groups without a record: the ``"__all__"`` thresholds when usable, else none.
    k : int
        Number of classifiers.
    """

    by_group: dict[str, GroupThresholds]
    default: GroupThresholds
    k: int
    details: dict[str, Any] = field(default_factory=dict)

    def get(self, group: str) -> GroupThresholds:
        """The thresholds of ``group`` (the default for groups without a record)."""
        return self.by_group.get(group, self.default)

    def lookup(
        self, groups: Sequence[str]
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_], list[GroupThresholds]]:
        """Per group of ``groups``: thresholds (m, k) (``+inf`` rows where none), usable mask,
        and the :class:`GroupThresholds` entries (method, group and window of the point)."""
        entries = [self.get(g) for g in groups]
        table = np.full((len(entries), self.k), np.inf)
        usable = np.zeros(len(entries), dtype=bool)
        for i, entry in enumerate(entries):
            if entry.thresholds is not None:
                table[i] = entry.thresholds
                usable[i] = True
        return table, usable, entries


# --------------------------------------------------------------------------- windows
Window = tuple[dt.datetime, dt.datetime]


def _utc_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def uncovered_share(window: Window, time_range: dict[str, str]) -> float:
    """Share of the window ``[start, end)`` outside the event times read, ``[min_utc, max_utc]``.

    0 when the recalibration read events at or before the window's start and at or after its
    end; 1 when the window and the range do not overlap.
    """
    start, end = window
    low, high = _utc_time(time_range["min_utc"]), _utc_time(time_range["max_utc"])
    covered = max(dt.timedelta(0), min(end, high) - max(start, low))
    return 1.0 - covered / (end - start)


def recalibration_time_range(source: str) -> dict[str, str] | None:
    """The event-time range a windowed recalibration run read (its manifest's
    ``event_time_range``); None for a single file, or a run that did not record it."""
    if source.endswith(".parquet"):
        return None
    return read_manifest(source).get("event_time_range")


def held_windows(source: str) -> list[dict[str, Any]]:
    """The windows the window guard of a windowed recalibration run did not apply (held or
    withdrawn by a person), from its manifest, with why; ``[]`` for other sources."""
    if source.endswith(".parquet"):
        return []
    guard = read_manifest(source).get("guard")
    if not isinstance(guard, dict) or not isinstance(guard.get("windows"), list):
        return []
    return [{"window": w["window"], "state": w["state"], "violations": w["violations"]}
            for w in guard["windows"] if w["state"] in ("held", "withdrawn")]


def _window_text(window: Window) -> str:
    return f"[{window[0].isoformat()}, {window[1].isoformat()})"


def _eligible_windows(
    windows: list[Window], settings: dict[str, Any], time_range: dict[str, str] | None,
    source: str, *, fallback: bool = False,
) -> list[Window]:
    """The windows ``decide.window`` allows: all (``latest``), or the complete ones.

    ``fallback``: the groups have points in force from before the run (carried by the window
    guard), so no complete window is no error: every group keeps those.

    Raises
    ------
    InputError
        ``latest_complete`` and the event-time range is unknown, or no window is complete
        (and no ``fallback``).
    """
    if settings["window"] == "latest":
        return windows
    how = "set decide.window: latest to apply the latest window even when it is partial"
    if time_range is None:
        raise InputError(
            f"{source}: windowed operating points without the event-time range the "
            "recalibration read (a single file, or a run from before costlib recorded it), so "
            f"complete windows cannot be told from partial ones: pass the run directory of a "
            f"current recalibrate run, or {how}")
    tolerance = settings["max_uncovered_share"]
    complete = [w for w in windows if uncovered_share(w, time_range) <= tolerance]
    if not complete and not fallback:
        latest = windows[-1]
        raise InputError(
            f"{source}: no complete window: the recalibration read event times "
            f"{time_range['min_utc']} .. {time_range['max_utc']}, and every window has more "
            f"than {tolerance:.1%} of its span outside them (the latest, "
            f"{_window_text(latest)}, {uncovered_share(latest, time_range):.1%}); recalibrate "
            f"over at least one whole window, or {how}")
    return complete


def _latest_records(
    records: list[dict[str, Any]], settings: dict[str, Any],
    time_range: dict[str, str] | None, source: str,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Batch records if there are any; else per group the latest eligible window and its
    newest pane, and for a group without one its carried record (:data:`CARRIED`): the points
    in force before a windowed run, when the window guard applied no window of the group.

    Returns the chosen records and what was chosen (None for batch records).
    """
    batch = [r for r in records if r["window_start"] is None and not r.get(CARRIED)]
    if batch:  # a batch run's records (they win over windowed ones, should both be given)
        return batch, None
    others = [r for r in records if r.get(CARRIED)]
    windowed = [r for r in records if not r.get(CARRIED)]
    windows = sorted({(r["window_start"], r["window_end"]) for r in windowed},
                     key=lambda w: (w[1], w[0]))
    eligible = set(_eligible_windows(windows, settings, time_range, source,
                                     fallback=bool(others))) if windows else set()
    best: dict[str, dict[str, Any]] = {}
    for record in windowed:
        if (record["window_start"], record["window_end"]) not in eligible:
            continue
        current = best.get(record["group"])
        key = (record["window_end"], record["pane_index"])
        if current is None or key > (current["window_end"], current["pane_index"]):
            best[record["group"]] = record
    carried: dict[str, str] = {}
    for record in others:
        if record["group"] not in best:
            best[record["group"]] = record
            carried[record["group"]] = record.get(CARRIED) or record["run_id"]
    used: dict[Window, list[str]] = {}
    for group, record in sorted(best.items()):
        if group not in carried:
            used.setdefault((record["window_start"], record["window_end"]), []).append(group)
    details = {
        "selection": settings["window"],
        "max_uncovered_share": settings["max_uncovered_share"],
        "event_time_range": time_range,
        "latest_window": _window_details(windows[-1], time_range) if windows else None,
        "windows_used": [{**_window_details(w, time_range), "groups": groups}
                         for w, groups in sorted(used.items(), key=lambda item: item[0][1])],
        "groups_in_force_before": carried,
    }
    return list(best.values()), details


def _window_details(window: Window, time_range: dict[str, str] | None) -> dict[str, Any]:
    share = None if time_range is None else round(uncovered_share(window, time_range), 6)
    return {"window_start": window[0].isoformat(), "window_end": window[1].isoformat(),
            "uncovered_share": share}


#: ``point_status`` of operating point records (:mod:`costlib.thresholds._operating_point`).
POINT_STATUSES = ("ok", "coverage_limited", "infeasible", "resolution_limited")


def _point_statuses(records: list[dict[str, Any]], status: str) -> list[str]:
    """Groups whose chosen record has ``point_status`` ``status``."""
    return sorted(r["group"] for r in records if r.get("point_status") == status)


def _group_thresholds(
    record: dict[str, Any], config: RunConfig, source: str
) -> GroupThresholds:
    group = record["group"]
    where = f"{source}: operating point of group {group!r} (method {record['method']!r})"
    if record["rule"] != config.rule:
        raise InputError(f"{where} was optimised for rule {record['rule']!r}, but the config's "
                         f"rule is {config.rule!r}")
    names = list(record["classifiers"])
    if sorted(names) != sorted(config.classifiers):
        raise InputError(f"{where} is for classifiers {names}, but the config has "
                         f"{list(config.classifiers)}")
    status = record["status"]
    if status == "insufficient_data" or record["thresholds"] is None:
        return NO_THRESHOLDS
    if status not in ("ok", "fallback", "kept"):
        raise InputError(f"{where} has unknown status {status!r}")
    point_status = record.get("point_status") or "ok"  # records written before issue 10: ok
    if point_status not in POINT_STATUSES:
        raise InputError(f"{where} has unknown point_status {point_status!r}")
    if point_status == "infeasible":  # fail closed: the nearest point breaks a constraint
        return NO_THRESHOLDS
    values = np.asarray(record["thresholds"], dtype=np.float64)
    if values.shape != (len(names),):
        raise InputError(f"{where} has {values.size} thresholds for {len(names)} classifiers")
    if np.isnan(values).any() or (values == -np.inf).any():
        raise InputError(f"{where} has thresholds {values.tolist()}; each must be a finite "
                         f"number or +inf (classifier off)")
    ordered = tuple(float(values[names.index(c)]) for c in config.classifiers)
    op_group = group if status != "fallback" else (record["fallback_group"] or ALL_GROUPS)
    return GroupThresholds(ordered, op_group, record["method"], record["window_end"])


def select_operating_points(
    records: list[dict[str, Any]], config: RunConfig, *, source: str = "operating points",
    event_time_range: dict[str, str] | None = None,
) -> DecisionThresholds:
    """The thresholds every group decides with (the rules are in the module docstring).

    Parameters
    ----------
    records : list of dict
        Operating point records (``schemas/operating_point.json``).
    config : RunConfig
        ``decision_method``, ``rule``, ``classifiers`` and the ``decide`` section.
    source : str
        Where the records came from (for messages).
    event_time_range : dict, optional
        ``min_utc`` / ``max_utc`` the windowed recalibration read (its manifest's
        ``event_time_range``); needed for windowed records with ``decide.window:
        latest_complete``.

    Raises
    ------
    InputError
        No record of ``config.decision_method``, two records for one group, a record that
        does not fit the config (rule, classifiers, malformed thresholds), or windowed records
        of which none is complete (or completeness cannot be told).
    """
    method = config.decision_method
    chosen = [r for r in records if r["method"] == method]
    if not chosen:
        held = sorted({r["method"] for r in records})
        raise InputError(f"{source}: no operating point for method {method!r} (the config's "
                         f"decision_method); it holds methods {held}")
    windowed = any(r["window_start"] is not None and not r.get(CARRIED) for r in chosen)
    chosen, window = _latest_records(chosen, config.decide, event_time_range, source)
    by_group: dict[str, GroupThresholds] = {}
    for record in sorted(chosen, key=lambda r: r["group"]):
        if record["group"] in by_group:
            raise InputError(f"{source}: two operating points of method {method!r} for group "
                             f"{record['group']!r} (records of several runs mixed?)")
        by_group[record["group"]] = _group_thresholds(record, config, source)
    parent = by_group.get(ALL_GROUPS, NO_THRESHOLDS)
    default = (
        GroupThresholds(parent.thresholds, ALL_GROUPS, parent.method, parent.window_end)
        if parent.thresholds is not None else NO_THRESHOLDS
    )
    details = {
        "method": method,
        "windowed": windowed,
        "window": window,
        "run_ids": sorted({r["run_id"] for r in chosen}),
        "groups": len(by_group),
        "groups_without_thresholds": sorted(g for g, t in by_group.items()
                                            if t.thresholds is None),
        "groups_infeasible": _point_statuses(chosen, "infeasible"),
        "groups_coverage_limited": _point_statuses(chosen, "coverage_limited"),
        "groups_resolution_limited": _point_statuses(chosen, "resolution_limited"),
        "default_group": default.operating_point_group,
    }
    return DecisionThresholds(by_group, default, len(config.classifiers), details)


# --------------------------------------------------------------------------- config helpers
def decoding_settings(config: RunConfig) -> dict[str, Any]:
    """``decoding`` of the config (loss, params, buckets; defaults from the schema)."""
    settings = dict(config.decoding)
    settings["params"] = dict(settings.get("params") or {})
    return settings


def with_topk(config: RunConfig) -> bool:
    """Top-k decoding runs iff the config names both a probability and a set id column."""
    return bool(config.columns.get("probability")) and bool(config.columns.get("set_id"))


def sets_contiguous(config: RunConfig) -> bool:
    """Top-k runs and the config declares every set one run inside one row group
    (``decoding.sets_contiguous``): sets are decoded where they are read, not shuffled."""
    return with_topk(config) and bool(config.decoding.get("sets_contiguous", False))


def decide_columns(config: RunConfig) -> list[str]:
    """Input columns the decide pipeline reads."""
    cols = config.columns
    names = [cols["group"], cols["item_id"], *config.classifiers]
    names += [cols[c] for c in ("probability", "set_id") if cols.get(c)]
    settings = min_risk.decide_settings(config)
    extra = [] if settings is None else settings.input_columns()
    return names + [c for c in extra if c not in names]


# --------------------------------------------------------------------------- per batch
#: Low-cardinality string columns: dictionary-encoded in memory and in the Parquet files.
DICTIONARY_COLUMNS = ("group", "set_id", "loss", "operating_point_method",
                      "operating_point_group", "operating_point_window_end")

#: Type of ``operating_point_window_end``.
WINDOW_END_TYPE = DECISION_SCHEMA.field("operating_point_window_end").type

#: :data:`DECISION_SCHEMA` with the :data:`DICTIONARY_COLUMNS` dictionary-encoded.
COMPACT_SCHEMA = pa.schema([
    f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in DICTIONARY_COLUMNS else f
    for f in DECISION_SCHEMA
])


def _as_string(array: pa.Array) -> pa.Array:
    if pa.types.is_string(array.type):
        return array
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    return array.cast(pa.string())


def _dictionary(
    indices: NDArray[np.integer], values: Sequence[Any], null: NDArray[np.bool_] | None = None,
    value_type: pa.DataType | None = None,
) -> pa.DictionaryArray:
    """A dictionary-encoded array (``null`` marks null rows; no values: all null)."""
    if not values:
        null = np.ones(indices.size, dtype=bool)
        indices = np.zeros(indices.size, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(indices.astype(np.int32, copy=False), pa.int32(),
                 mask=None if null is None or not null.any() else null),
        pa.array(list(values), value_type or pa.string()),
    )


def _distinct_codes(values: Sequence[Any]) -> tuple[list[Any], NDArray[np.int32]]:
    """Sorted distinct non-null values, and each value's index among them (0 for None)."""
    distinct = sorted({v for v in values if v is not None})
    index = np.array([distinct.index(v) if v is not None else 0 for v in values],
                     dtype=np.int32)
    return distinct, index


def decision_columns(
    batch: ValidatedBatch, thresholds: DecisionThresholds, rule: str, loss: str,
    audit: AuditSettings | None = None,
) -> pa.Table:
    """Decision records of a batch's valid rows (top-k fields null).

    The threshold decision is the comparison ``score >= threshold`` per classifier combined by
    ``rule``; rows whose group has no usable operating point get null. The columns are those of
    ``schemas/decision.json`` in its order, with the columns of :data:`DICTIONARY_COLUMNS`
    dictionary-encoded (cheap to build and to write; the files store
    them as plain Parquet strings, see :func:`write_decisions`).

    Audit fields (:func:`decision_table_and_audit`): without ``audit``, ``audit`` false and
    ``audit_probability`` null on every row.
    """
    return decision_table_and_audit(batch, thresholds, rule, loss, audit)[0]


#: Type of the ``set_id`` column of the decision columns (:data:`COMPACT_SCHEMA`).
SET_ID_TYPE = pa.dictionary(pa.int32(), pa.string())


def set_id_dictionary(values: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    """Set ids as the decision columns hold them: string values, ``int32`` indices, every
    dictionary value once (one code per set: what the set-run check of
    :func:`decode_contiguous_sets` and the set grouping of the shuffle count on).

    Ids read from a file's dictionary pages (:meth:`DecideFileFn.process`) are taken as they
    are when their dictionary holds distinct, non-null strings (what Arrow's writer and most
    others write; only the dictionary is checked, not a string per row); anything else (ids
    stored as integers or plain strings, or a dictionary that repeats a value) is
    dictionary-encoded from its strings.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type == SET_ID_TYPE:
        dictionary = values.dictionary
        if dictionary.null_count == 0 and pc.count_distinct(dictionary).as_py() == len(
                dictionary):
            return values
    return pc.dictionary_encode(_as_string(values))


def decision_table_and_audit(
    batch: ValidatedBatch, thresholds: DecisionThresholds, rule: str, loss: str,
    audit: AuditSettings | None = None,
) -> tuple[pa.Table, Counter]:
    """:func:`decision_columns` and the audit counters of the batch.

    With ``audit``, :func:`costlib.audit.audit_sample` of the rows' item ids (as strings),
    scores and flags, where a row counts as flagged iff its threshold decision is true: rows
    with a null threshold decision (no usable operating point) are audit candidates like
    unflagged rows, since audit rows are the only unbiased ratings such a group can get. The
    counters are ``audited`` and, per stratum ``h``, ``audit_unflagged.h`` (unflagged rows);
    empty without ``audit``. Ids are hashed only when ``audit`` is given.
    """
    n = batch.group_codes.size
    codes = batch.group_codes
    table, usable, entries = thresholds.lookup(batch.group_names)
    scores = batch.scores
    flagged = scores[:, 0] >= table[codes, 0]
    for j in range(1, scores.shape[1]):
        fired = scores[:, j] >= table[codes, j]
        flagged = (flagged | fired) if rule == "any" else (flagged & fired)
    no_point = None if usable.all() else ~usable[codes]
    item_ids = _as_string(batch.item_ids)
    if audit is not None and audit.only_without_point:
        audited, audit_probability, counters = _floor_audit_columns(
            item_ids, scores, flagged, no_point, audit)
    else:
        candidates = flagged if no_point is None else flagged & ~no_point
        bands, depth_counters = scores, Counter()
        if audit is not None and audit.relative:
            _depth, stratum = audit.relative_strata(scores, table[codes], rule,
                                                   batch.group_names, codes)
            bands = stratum[:, None].astype(np.float64)
            depth_counters = _cell_counters(scores, audit.lattice, codes, batch.group_names)
        audited, audit_probability, counters = _audit_columns(
            item_ids, bands, candidates, audit)
        counters.update(depth_counters)
    op_values, op_index = _distinct_codes([e.operating_point_group for e in entries])
    method_values = sorted({e.method for e in entries if e.method is not None})
    window_ends = _window_ends(entries, codes, usable, no_point)
    set_ids = (
        _dictionary(np.zeros(n, dtype=np.int32), []) if batch.set_ids is None
        else set_id_dictionary(batch.set_ids)
    )
    columns = {
        "group": _dictionary(codes, batch.group_names),
        "set_id": set_ids,
        "item_id": item_ids,
        "threshold_decision": pa.array(flagged, pa.bool_(), mask=no_point),
        "topk_decision": pa.nulls(n, pa.bool_()),
        "k": pa.nulls(n, pa.int64()),
        "expected_loss": pa.nulls(n, pa.float64()),
        "loss": _dictionary(np.zeros(n, dtype=np.int32), [loss]),
        "operating_point_method": _dictionary(np.zeros(n, dtype=np.int32), method_values,
                                              no_point),
        "operating_point_group": _dictionary(op_index[codes], op_values, no_point),
        "operating_point_window_end": window_ends,
        "audit": audited,
        "audit_probability": audit_probability,
        "min_risk_decision": pa.nulls(n, pa.bool_()),  # filled by min_risk.with_min_risk
        "expected_cost": pa.nulls(n, pa.float64()),
    }
    table = pa.Table.from_arrays([columns[f.name] for f in COMPACT_SCHEMA],
                                 schema=COMPACT_SCHEMA)
    return table, counters


def _floor_audit_columns(
    item_ids: pa.Array, scores: NDArray[np.float64], flagged: NDArray[np.bool_],
    no_point: NDArray[np.bool_] | None, audit: AuditSettings,
) -> tuple[pa.Array, pa.Array, Counter]:
    """The floor audit of groups without a usable point (``audit.only_without_point``).

    Candidates are the rows with a null threshold decision (``no_point``), each audited with
    ``π = floor``; ``audit_probability`` is ``π`` on them, 1 on flagged rows of other groups
    and null elsewhere (unflagged rows of groups with a point: not audit-eligible). Counters:
    ``audited`` and ``audit_unflagged.0`` (the candidates).
    """
    n = flagged.size
    if no_point is None:  # every row's group has a point: flagged rows p = 1, others null
        return (pa.array(np.zeros(n, dtype=bool)),
                pa.array(np.ones(n), mask=~flagged if not flagged.all() else None),
                Counter({"audited": 0, "audit_unflagged.0": 0}))
    sample = audit_sample(item_ids, scores, ~no_point, audit.salt, audit.design)
    probability = np.where(no_point, sample.audit_probability, 1.0)
    null = ~no_point & ~flagged
    counters = Counter({"audit_unflagged.0": int(np.count_nonzero(no_point)),
                        "audited": int(np.count_nonzero(sample.audit))})
    return (pa.array(sample.audit), pa.array(probability, mask=null if null.any() else None),
            counters)


def _cell_counters(scores: NDArray[np.float64], lattice, codes: NDArray[np.integer],
                   group_names: Sequence[str]) -> Counter:
    """Rows per group and lattice cell (:func:`costlib.audit._strata.lattice_cells`):
    ``audit_cell.<group>.<c_1>,...,<c_k>``; the next run places its share cutoffs on them
    (:func:`costlib_pipelines.decide.audit_lattice.relative_cutoffs`). Empty without a lattice."""
    out: Counter = Counter()
    if lattice is None or scores.shape[0] == 0:
        return out
    cells = lattice_cells(scores, lattice)
    keyed = np.column_stack([codes, cells])
    found, counts = np.unique(keyed, axis=0, return_counts=True)
    for row, count in zip(found.tolist(), counts.tolist(), strict=True):
        out[f"{CELL_PREFIX}{group_names[row[0]]}.{','.join(map(str, row[1:]))}"] = int(count)
    return out


def _audit_columns(
    item_ids: pa.Array, scores: NDArray[np.float64], flagged: NDArray[np.bool_],
    audit: AuditSettings | None,
) -> tuple[pa.Array, pa.Array, Counter]:
    """``audit``, ``audit_probability`` columns and audit counters (see
    :func:`decision_table_and_audit`); ``scores`` are what the strata are cut on
    (:meth:`AuditSettings.bands`)."""
    n = flagged.size
    if audit is None:
        return pa.array(np.zeros(n, dtype=bool)), pa.nulls(n, pa.float64()), Counter()
    sample = audit_sample(item_ids, scores, flagged, audit.salt, audit.design)
    unflagged = np.bincount(sample.stratum[~flagged], minlength=audit.design.n_strata)
    counters = Counter({f"audit_unflagged.{h}": int(c) for h, c in enumerate(unflagged)})
    counters["audited"] = int(np.count_nonzero(sample.audit))
    return pa.array(sample.audit), pa.array(sample.audit_probability), counters


def _window_ends(
    entries: Sequence[GroupThresholds], codes: NDArray[np.integer], usable: NDArray[np.bool_],
    no_point: NDArray[np.bool_] | None,
) -> pa.Array:
    """``operating_point_window_end`` of every row: its group's window end, null for batch
    operating points and where the group has no thresholds (all null in one step for batch)."""
    ends = [e.window_end if e.thresholds is not None else None for e in entries]
    if all(e is None for e in ends):
        return pa.nulls(codes.size, COMPACT_SCHEMA.field("operating_point_window_end").type)
    values, index = _distinct_codes(ends)
    has_end = np.array([e is not None for e in ends], dtype=bool)
    null = no_point if np.array_equal(has_end, usable) else ~has_end[codes]
    return _dictionary(index[codes], values, null, WINDOW_END_TYPE)


def as_contract(table: pa.Table) -> pa.Table:
    """Decision columns with dictionary columns decoded: exactly :data:`DECISION_SCHEMA`."""
    return table.cast(DECISION_SCHEMA)


def write_decisions(path: str, table: pa.Table) -> None:
    """Write decision records atomically as Parquet (zstd).

    The file schema is :data:`DECISION_SCHEMA` (dictionary columns are written as Parquet
    strings with dictionary pages, and no Arrow schema is stored, so readers get ``string``);
    column statistics are kept for ``group`` and ``threshold_decision`` only (statistics of the
    other columns cost ~30% of the write time and help no query we know of). Where rows carry
    top-k fields (set buckets), ``k`` and ``expected_loss`` get dictionary pages too: they are
    the same on all rows of a set, so the indices run-length encode (writes ~25% faster, files
    ~7% smaller); files without them are written exactly as before.
    """
    dictionary = list(DICTIONARY_COLUMNS)
    if "k" in table.column_names and table.column("k").null_count < table.num_rows:
        dictionary += ["k", "expected_loss"]
    sink = io.BytesIO()
    pq.write_table(
        table, sink, compression="zstd", store_schema=False, use_dictionary=dictionary,
        write_statistics=["group", "threshold_decision"],
    )
    write_bytes_atomically(path, sink.getvalue())


def _value_buckets(values: pa.Array, n_buckets: int) -> NDArray[np.int64]:
    """Bucket of each value (SipHash of its UTF-8 string, mod ``n_buckets``).

    The strings go to pandas as ``bytes`` (their UTF-8 encoding, a zero-copy cast in Arrow):
    the same hashes as of ``str`` objects, without encoding each one (2-3x faster).
    """
    return (set_id_hashes(values) % np.uint64(n_buckets)).astype(np.int64)


def set_id_hashes(values: pa.Array) -> NDArray[np.uint64]:
    """SipHash (fixed key: the same in every process) of each set id's UTF-8 bytes, as
    ``pandas.util.hash_array`` gives for the ids as Python ``str``; no Python strings made."""
    distinct = _as_string(values).cast(pa.binary()).to_numpy(zero_copy_only=False)
    return pd.util.hash_array(distinct, categorize=False)


def _as_dictionary(array: pa.Array | pa.ChunkedArray) -> pa.DictionaryArray:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        return array
    return pc.dictionary_encode(_as_string(array))


def set_buckets(set_ids: pa.Array | pa.ChunkedArray, n_buckets: int) -> NDArray[np.int64]:
    """Bucket of every row's set id: a stable hash (the same in every process) mod buckets.

    Only the distinct set ids of the array are hashed (``pandas.util.hash_array``, SipHash with
    a fixed key, of the id as a UTF-8 string); a dictionary-encoded array is hashed through its
    dictionary without re-encoding. Null set ids get bucket 0 (callers pass set rows only).
    """
    encoded = _as_dictionary(set_ids)
    bucket_of = _value_buckets(encoded.dictionary, n_buckets)
    indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    return bucket_of[indices] if bucket_of.size else np.zeros(indices.size, dtype=np.int64)


def _compact_dictionary(array: pa.DictionaryArray, *, sort: bool = False) -> pa.DictionaryArray:
    """``array`` with only the dictionary values its rows use (sorted by value with ``sort``),
    as ``int32`` indices.

    With ``sort`` the result depends only on the row values, not on the dictionary ``array``
    arrived with: what the bucket files need to be identical for any split of the input.
    """
    indices = array.indices
    if array.null_count == len(array):  # no value used (an all-null column)
        return pa.DictionaryArray.from_arrays(pa.nulls(len(array), pa.int32()),
                                              array.dictionary.slice(0, 0))
    valid = None if array.null_count == 0 else indices.is_valid().to_numpy(
        zero_copy_only=False)
    codes = (indices if valid is None else indices.fill_null(0)).to_numpy(
        zero_copy_only=False)
    used = np.flatnonzero(np.bincount(codes if valid is None else codes[valid],
                                      minlength=len(array.dictionary)))
    values = array.dictionary.take(pa.array(used))
    if sort and len(values) > 1:
        by_value = pc.sort_indices(values).to_numpy()
        values = values.take(pa.array(by_value))
        used = used[by_value]
    position = np.zeros(max(len(array.dictionary), 1), dtype=np.int32)
    position[used] = np.arange(used.size, dtype=np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(position[codes], pa.int32(), mask=None if valid is None else ~valid), values)


def _bucket_type(n_buckets: int) -> type:
    """The smallest integer type for bucket numbers (numpy radix-sorts 8 and 16 bit ints)."""
    return np.int8 if n_buckets <= 127 else np.int16 if n_buckets <= 32767 else np.int64


#: Dictionary columns with more values than this are compacted per bucket before the shuffle.
SMALL_DICTIONARY = 256


def split_sets(table: pa.Table, rows: NDArray[np.intp], n_buckets: int):
    """``(bucket, table)`` of ``table``'s ``rows`` per set-id bucket present, in bucket order.

    One ``take`` orders the rows by bucket (stable: batch order within a bucket); every part
    is a zero-copy slice of it. The set-id dictionary is split with the rows: each set id
    belongs to one bucket, so ordering the dictionary values by bucket gives every part the
    values of its own bucket only (a slice of the reordered dictionary). Other dictionary
    columns keep their dictionary when small (at most :data:`SMALL_DICTIONARY` values) and are
    compacted to the values their part uses otherwise.
    """
    set_ids = _as_dictionary(table.column("set_id"))
    value_bucket = _value_buckets(set_ids.dictionary, n_buckets).astype(_bucket_type(n_buckets))
    codes = set_ids.indices.fill_null(0).to_numpy(zero_copy_only=False)
    bucket = value_bucket[codes[rows]] if value_bucket.size else np.zeros(rows.size, np.int8)
    by_bucket = np.argsort(bucket, kind="stable")  # radix sort of small integers
    rows = rows[by_bucket]
    value_order = np.argsort(value_bucket, kind="stable")
    new_code = np.empty(value_order.size, dtype=np.int64)
    new_code[value_order] = np.arange(value_order.size)
    sorted_values = set_ids.dictionary.take(pa.array(value_order))
    value_starts = np.concatenate([[0], np.cumsum(np.bincount(value_bucket,
                                                              minlength=n_buckets))])
    row_starts = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=n_buckets))])
    row_codes = new_code[codes[rows]]
    column = table.schema.get_field_index("set_id")
    large = [  # dictionary columns compacted per part
        (i, spec.name) for i, spec in enumerate(table.schema)
        if pa.types.is_dictionary(spec.type) and spec.name != "set_id"
        and max((len(c.dictionary) for c in table.column(i).chunks), default=0)
        > SMALL_DICTIONARY
    ]
    taken = table.take(pa.array(rows))
    for b in np.flatnonzero(np.diff(row_starts)).tolist():
        start, stop = int(row_starts[b]), int(row_starts[b + 1])
        low, high = int(value_starts[b]), int(value_starts[b + 1])
        part = taken.slice(start, stop - start)
        part = part.set_column(column, "set_id", pa.DictionaryArray.from_arrays(
            pa.array(row_codes[start:stop] - low, _index_type(high - low)),
            sorted_values[low:high]))
        for i, name in large:
            part = part.set_column(i, name, _compact_dictionary(part.column(i).combine_chunks()))
        yield int(b), part


#: The top-k fields of a decision record (set after decoding, so not in the shuffle).
TOPK_FIELDS = ("topk_decision", "k", "expected_loss")

#: Columns of the set rows after the shuffle: the decision columns without the top-k fields,
#: then the probability (:func:`decode_shuffled` returns exactly this schema).
SHUFFLE_SCHEMA = pa.schema([f for f in COMPACT_SCHEMA if f.name not in TOPK_FIELDS]
                           + [pa.field(PROBABILITY, pa.float64())])


def _index_type(size: int) -> pa.DataType:
    """The narrowest signed integer type that indexes a dictionary of ``size`` values."""
    return pa.int8() if size <= 2**7 else pa.int16() if size <= 2**15 else pa.int32()


def _narrowed(table: pa.Table) -> pa.Table:
    """``table`` without its all-null columns and with dictionary indices in the narrowest
    integer type (:func:`_index_type`): the same rows in fewer bytes.

    An all-null column costs its full width in an IPC stream (a double column 8.1 bytes a
    row), and a dictionary index 4; the FnApiRunner copies every shuffled byte several times
    (data plane, grouping buffer, re-encoding), so what is not sent is the cheapest to move.
    :func:`decode_shuffled` restores both from :data:`SHUFFLE_SCHEMA`.
    """
    fields, columns = [], []
    for spec, column in zip(table.schema, table.columns, strict=True):
        if column.null_count == len(column):
            continue
        if pa.types.is_dictionary(spec.type):
            size = max((len(chunk.dictionary) for chunk in column.chunks), default=0)
            narrow = pa.dictionary(_index_type(size), spec.type.value_type)
            if narrow != spec.type:
                spec, column = spec.with_type(narrow), column.cast(narrow)
        fields.append(spec)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def encode_sets(table: pa.Table) -> bytes:
    """Set rows as Arrow IPC stream bytes for the shuffle (parts of :func:`split_sets`).

    Pickling a sliced Arrow table would carry the buffers of the whole batch; the IPC stream
    holds only the rows of the slice, and Beam moves bytes without pickling them. All-null
    columns are left out and dictionary indices narrowed (:func:`_narrowed`).
    """
    table = _narrowed(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _check_shuffled(table: pa.Table) -> None:
    """Refuse a table that is not set rows of :func:`encode_sets`.

    Raises
    ------
    ValueError
        ``table`` holds a column :data:`SHUFFLE_SCHEMA` does not know, or one of another type
        (dictionary columns may have any index type).
    """
    unknown = sorted(set(table.column_names) - set(SHUFFLE_SCHEMA.names))
    if unknown:
        raise ValueError(f"shuffled set rows hold columns {unknown} that are not decision "
                         f"columns")
    for name, column in zip(table.column_names, table.columns, strict=True):
        want = SHUFFLE_SCHEMA.field(name).type
        if column.type != want and not (
                pa.types.is_dictionary(column.type) and pa.types.is_dictionary(want)
                and column.type.value_type == want.value_type):
            raise ValueError(f"shuffled set rows: column {name!r} has type {column.type}, "
                             f"expected {want}")


def _restored(table: pa.Table) -> pa.Table:
    """Set rows of :func:`encode_sets` in :data:`SHUFFLE_SCHEMA`: columns left out come back
    null, dictionary indices as ``int32`` (:func:`_check_shuffled` first)."""
    _check_shuffled(table)
    columns = []
    for spec in SHUFFLE_SCHEMA:
        if spec.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, spec.type))
            continue
        column = table.column(spec.name)
        columns.append(column if column.type == spec.type else column.cast(spec.type))
    return pa.Table.from_arrays(columns, schema=SHUFFLE_SCHEMA)


def shuffled_rows(payloads: Sequence[bytes]) -> pa.Table:
    """The set rows of :func:`encode_sets` payloads, concatenated, as they travelled.

    When every payload has the same schema (usually all of a bucket's), the table is the
    payloads' own: columns left out stay out and dictionary indices narrow, which
    :func:`decode_sets` takes as they are (no copy, no column of nulls to sort). Otherwise
    every payload is restored to :data:`SHUFFLE_SCHEMA` (:func:`_restored`), one cast per
    column and schema.

    Raises
    ------
    ValueError
        A payload is not set rows (:func:`_check_shuffled`).
    """
    same_schema: list[list[pa.Table]] = []
    for payload in payloads:
        table = pa.ipc.open_stream(pa.py_buffer(payload)).read_all()
        for tables in same_schema:
            if tables[0].schema.equals(table.schema):
                tables.append(table)
                break
        else:
            _check_shuffled(table)
            same_schema.append([table])
    if not same_schema:
        return SHUFFLE_SCHEMA.empty_table()
    if len(same_schema) == 1:
        return pa.concat_tables(same_schema[0])
    return pa.concat_tables([_restored(pa.concat_tables(tables)) for tables in same_schema])


def decode_shuffled(payloads: Sequence[bytes]) -> pa.Table:
    """The set rows of :func:`encode_sets` payloads, concatenated, in :data:`SHUFFLE_SCHEMA`
    (:func:`shuffled_rows`, restored).

    Raises
    ------
    ValueError
        A payload is not set rows (:func:`_check_shuffled`).
    """
    return _restored(shuffled_rows(payloads))


def _sort_codes(array: pa.DictionaryArray) -> NDArray[np.int64]:
    """Codes of a dictionary array whose dictionary is sorted (nulls: after every value).

    Comparing them orders rows exactly as comparing their strings (UTF-8 byte order) with
    nulls last, Arrow's default.
    """
    codes = array.indices.fill_null(len(array.dictionary)).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64)


def _string_prefixes(strings: pa.Array, width: int) -> NDArray[np.uint64] | None:
    """The first ``width`` (<= 8) bytes of every string as a big-endian integer, shorter
    strings padded with zero bytes: comparing prefixes orders strings by their first
    ``width`` bytes. None for an array with nulls or of another type than ``string``."""
    if strings.type != pa.string() or strings.null_count:
        return None
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)[
        strings.offset:strings.offset + n + 1].astype(np.int64)
    buffer = strings.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    prefix = np.zeros(n, dtype=np.uint64)
    if data.size == 0:
        return prefix
    start, end, last = offsets[:-1], offsets[1:], data.size - 1
    for j in range(width):
        position = start + j
        byte = data[np.minimum(position, last)].astype(np.uint64)
        byte[position >= end] = 0
        prefix = (prefix << np.uint64(8)) | byte
    return prefix


#: Bits of the sort key of :func:`set_order` that hold the set code (the rest: item bytes).
SET_BITS = 16


def set_order(keys: pa.Table) -> NDArray[np.intp]:
    """Row order by all columns of ``keys``, ascending, nulls last (like Arrow's sort).

    ``keys`` holds ``set`` (int codes >= 0 in set-id order, no nulls), ``item`` (string),
    then any tie-breaking columns; rows equal in every key keep their order (a stable sort).
    Fast path: one integer sort of ``set code << 48 | first 6 bytes of the item``; runs of
    rows that tie on that key (items of a set sharing their first 6 bytes, or repeated items)
    are then ordered by Arrow's sort over all keys and the row number, run by run (the order
    between runs is already right). Without such runs one integer sort is paid; with only
    such runs the cost is about Arrow's sort alone.
    """
    sort_keys = [(name, "ascending") for name in keys.column_names]
    sets = keys.column("set").to_numpy()
    width = (64 - SET_BITS) // 8
    prefix = None
    if sets.size and sets.max() < 2**SET_BITS:
        prefix = _string_prefixes(keys.column("item").combine_chunks(), width)
    if prefix is None:
        return pc.sort_indices(keys, sort_keys=sort_keys).to_numpy()
    key = (sets.astype(np.uint64) << np.uint64(64 - SET_BITS)) | prefix
    order = np.argsort(key)  # not stable (about 3x faster): rows that tie are ordered below
    key = key[order]
    same = key[1:] == key[:-1]
    if not same.any():
        return order
    tied = np.zeros(order.size, dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    run = np.cumsum(np.concatenate([[True], ~same]))[tied]  # run number of every tied row
    rows = order[tied]
    # by run, every key, then row number: what a stable sort gives rows equal in every key
    row = "row" + "_" * max(len(name) for name in keys.column_names)  # not a key's name
    sub = keys.take(pa.array(rows)).set_column(0, "set", pa.array(run)).append_column(
        row, pa.array(rows))
    order[tied] = rows[pc.sort_indices(sub, sort_keys=[*sort_keys, (row, "ascending")])
                       .to_numpy()]
    return order


def _sorted_sets(table: pa.Table) -> tuple[pa.Table, NDArray[np.int64]]:
    """Set rows sorted as :func:`decode_sets` describes, and the offsets of the sets.

    All-null columns are left out (they read the same in any order; :func:`decode_sets` puts
    them back), and dictionary columns with one value and no null are not sorted either. The
    chunks of every dictionary column share one dictionary first (``unify_dictionaries``), so
    joining them copies indices only; each dictionary column is then compacted to the values
    used, sorted (:func:`_compact_dictionary`), and every column taken once in the sorted
    order (no copy of the unsorted rows).
    """
    n = table.num_rows
    present = {name: column for name, column in zip(table.column_names, table.columns,
                                                    strict=True)
               if name not in TOPK_FIELDS and column.null_count < n}
    for name in DICTIONARY_COLUMNS:
        if name in present and not pa.types.is_dictionary(present[name].type):
            present[name] = pc.dictionary_encode(present[name])
    unified = pa.table(present).unify_dictionaries()
    columns, constant = {}, {}
    for name, column in zip(unified.column_names, unified.columns, strict=True):
        if not pa.types.is_dictionary(column.type):
            columns[name] = column
            continue
        array = column.combine_chunks()
        if len(array.dictionary) == 1 and array.null_count == 0:  # e.g. the loss: same order
            constant[name] = pa.DictionaryArray.from_arrays(np.zeros(n, np.int32),
                                                            array.dictionary)
        else:
            columns[name] = _compact_dictionary(array, sort=True)
    set_rank = _sort_codes({**columns, **constant}["set_id"])
    keys = {"set": set_rank, "item": columns["item_id"], "p": columns[PROBABILITY]}
    for key, name in (("group", "group"), ("decision", "threshold_decision"),
                      ("audit", "audit"), ("audit_probability", "audit_probability")):
        if name in columns:  # an all-null or constant column orders nothing
            keys[key] = _sort_codes(columns[name]) if name == "group" else columns[name]
    order = set_order(pa.table(keys))
    sorted_sets = set_rank[order]
    starts = np.flatnonzero(sorted_sets[1:] != sorted_sets[:-1]) + 1
    offsets = np.concatenate([[0], starts, [sorted_sets.size]]).astype(np.int64)
    take = pa.array(order)
    return pa.table({**{name: column.take(take) for name, column in columns.items()},
                     **constant}), offsets


def decode_sets(table: pa.Table, loss: str, params: dict[str, Any]) -> pa.Table:
    """Sort set rows by (set_id, item_id, ...) and decode every set; returns decision records.

    ``table`` holds decision columns plus :data:`PROBABILITY` (string or dictionary-encoded
    string columns with any index type, any number of chunks; a column of
    :data:`SHUFFLE_SCHEMA` that is missing is null, as in :func:`shuffled_rows`); every row
    has a set id and a probability. Rows are
    ordered by ``(set_id, item_id, probability, group, threshold_decision, audit,
    audit_probability)`` (strings in UTF-8 byte order, nulls last; the last two only order
    repeated items, so that every column of the output is the same whatever order the rows
    arrived in); set id and group are compared through their codes in sorted dictionaries,
    and item ids mostly through integer prefixes (:func:`set_order`). The sets, each now
    contiguous, go to one :func:`costlib.decoding.optimal_topk_ragged` call (which decodes the
    sets of each size together). The dictionary columns of the result hold the values used,
    sorted, so the output does not depend on how the rows were split into batches.
    """
    if table.num_rows == 0:
        return COMPACT_SCHEMA.empty_table()
    table, offsets = _sorted_sets(table)
    result = optimal_topk_ragged(table.column(PROBABILITY).to_numpy(), offsets, loss, **params)
    sizes = np.diff(offsets)
    columns = {
        "topk_decision": pa.array(result.selected, pa.bool_()),
        "k": pa.array(np.repeat(result.k, sizes).astype(np.int64)),
        "expected_loss": pa.array(np.repeat(result.expected_loss, sizes), pa.float64()),
    }
    n = table.num_rows
    return pa.Table.from_arrays(
        [columns[f.name] if f.name in columns else table.column(f.name)
         if f.name in table.column_names else pa.nulls(n, f.type) for f in COMPACT_SCHEMA],
        schema=COMPACT_SCHEMA)


# --------------------------------------------------------------------------- contiguous sets
@dataclass(frozen=True)
class ContiguousSets:
    """A batch decided with its sets decoded in place (:func:`decode_contiguous_sets`).

    ``table`` holds every row of the batch in input order, the set rows with their top-k
    fields; ``hashes`` the :func:`set_id_hashes` of the batch's sets, one per set (for the
    check that no set spans two row groups, :class:`CheckSetsFn`).
    """

    table: pa.Table
    counts: Counter
    hashes: NDArray[np.uint64]


def _group_sort_codes(groups: pa.Array | pa.ChunkedArray) -> NDArray[np.int64]:
    """Codes of the group column that compare as its strings do (UTF-8 byte order, nulls
    last): what :func:`_sorted_sets` gets from a sorted dictionary."""
    array = _as_dictionary(groups)
    rank = np.empty(len(array.dictionary), dtype=np.int64)
    rank[pc.array_sort_indices(array.dictionary).to_numpy()] = np.arange(rank.size)
    codes = array.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.where(codes >= 0, rank[np.maximum(codes, 0)], rank.size)


def _order_in_runs(
    table: pa.Table, rows: NDArray[np.intp], starts: NDArray[np.intp], run: NDArray[np.int64],
    p: NDArray[np.float64],
) -> NDArray[np.intp] | None:
    """Order of the set rows ``rows`` of ``table`` (runs starting at ``starts``, ``run`` the
    run of every one of them) that sorts every run as :func:`decode_sets` sorts a set, or
    None when every run is in that order already.

    A run whose item ids strictly increase (UTF-8 byte order, as Arrow sorts strings) is in
    order whatever the other keys hold: one vectorised comparison of neighbouring items finds
    them, and only the other runs are sorted (:func:`set_order` on item id, probability,
    group, threshold decision, audit, audit probability, by run first, so every set stays in
    its run). Streams written set by set usually list a set's items in order: no sort at all.
    """
    items = _as_string(table.column("item_id").combine_chunks())
    if rows.size != table.num_rows:
        items = items.take(pa.array(rows))
    if rows.size < 2:
        return None
    # null where an item is null: such a pair is sorted below like any other out of order
    increasing = pc.less(items[:-1], items[1:]).fill_null(False).to_numpy(zero_copy_only=False)
    increasing[starts[1:] - 1] = True  # pairs across two runs order nothing
    if increasing.all():
        return None
    unordered = np.zeros(starts.size, dtype=bool)
    unordered[run[np.flatnonzero(~increasing)]] = True
    sub = np.flatnonzero(unordered[run])  # positions (in ``rows``) of the runs to sort
    take = pa.array(rows[sub])
    keys = pa.table({
        "set": run[sub],
        "item": items.take(pa.array(sub)),
        "p": p[sub],
        "group": _group_sort_codes(table.column("group").combine_chunks())[rows[sub]],
        "decision": table.column("threshold_decision").take(take),
        "audit": table.column("audit").take(take),
        "audit_probability": table.column("audit_probability").take(take),
    })
    order = np.arange(rows.size)
    order[sub] = sub[set_order(keys)]  # by run first: every set stays in its run
    return order


def decode_contiguous_sets(
    table: pa.Table, probabilities: NDArray[np.float64], in_set: NDArray[np.bool_],
    loss: str, params: dict[str, Any], *, source: str, row_group: int,
    valid_rows: NDArray[np.intp] | None = None, column: str = "set_id",
) -> ContiguousSets:
    """Decode the sets of one batch where they are (``decoding.sets_contiguous``).

    The rows ``in_set`` (a set id and a probability) must hold each set id in one run of
    consecutive rows: with ``r`` runs of equal set ids and ``d`` distinct ids, ``r == d``
    (vectorised over the set-id codes). Inside every run the items are ordered exactly as
    :func:`decode_sets` orders a set (:func:`_order_in_runs`: item id, probability, group,
    threshold decision, audit, audit probability), and all runs go to one
    :func:`costlib.decoding.optimal_topk_ragged` call: so each set gets the decisions, ``k``
    and expected loss, bit for bit, that the shuffle path gives it (the decoder's result for
    a set does not depend on the sets beside it). The top-k fields are written back in the
    batch's row order; no other column is copied.

    Raises
    ------
    InputError
        A set id in more than one run, naming the file, row group, set-id ``column`` (of the
        input), the set id and the rows (of the row group, ``valid_rows`` mapping the batch's
        rows to them) where its runs start.
    """
    return decode_contiguous_batches(
        [ContiguousBatch(table, probabilities, in_set, source, row_group, valid_rows, column)],
        loss, params)[0]


@dataclass(frozen=True)
class ContiguousBatch:
    """The arguments of :func:`decode_contiguous_sets` for one batch (``in_set`` has a row)."""

    table: pa.Table
    probabilities: NDArray[np.float64]
    in_set: NDArray[np.bool_]
    source: str
    row_group: int
    valid_rows: NDArray[np.intp] | None = None
    column: str = "set_id"


@dataclass(frozen=True)
class _SetRuns:
    """A batch's set rows (``rows``), its runs (``starts``, ``sizes``; one set each), their
    probabilities in decoding order and that order (None: as they are)."""

    rows: NDArray[np.intp]
    starts: NDArray[np.intp]
    sizes: NDArray[np.intp]
    values: NDArray[np.float64]
    order: NDArray[np.intp] | None
    hashes: NDArray[np.uint64]


def _set_runs(part: ContiguousBatch) -> _SetRuns:
    """The runs of a batch's set rows, checked (one run per set id) and ordered."""
    table, rows = part.table, np.flatnonzero(part.in_set)
    set_ids = _as_dictionary(table.column("set_id"))
    codes = set_ids.indices.fill_null(0).to_numpy(zero_copy_only=False)[rows]
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1])
    run_codes = codes[starts]
    runs_of = np.bincount(run_codes, minlength=len(set_ids.dictionary))
    if (runs_of > 1).any():
        code = int(np.flatnonzero(runs_of > 1)[0])
        where = rows[starts[run_codes == code]]
        if part.valid_rows is not None:
            where = part.valid_rows[where]
        shown = ", ".join(str(int(r)) for r in where[:5]) + (", ..." if where.size > 5 else "")
        raise InputError(
            f"{part.source}: row group {part.row_group}: column {part.column}: set "
            f"{set_ids.dictionary[code].as_py()!r} is not contiguous: its rows form "
            f"{int(runs_of[code])} separate runs (starting at rows {shown}), but the config "
            f"declares decoding.sets_contiguous: true (every set's rows consecutive in one row "
            f"group); write the stream set by set, or set decoding.sets_contiguous: false to "
            f"gather sets with a shuffle")
    sizes = np.diff(np.append(starts, rows.size))
    run = np.repeat(np.arange(starts.size, dtype=np.int64), sizes)
    p = part.probabilities[rows]
    order = _order_in_runs(table, rows, starts, run, p)
    return _SetRuns(rows, starts, sizes, p if order is None else p[order], order,
                    set_id_hashes(set_ids.dictionary)[run_codes])


def decode_contiguous_batches(parts: Sequence[ContiguousBatch], loss: str,
                              params: dict[str, Any]) -> list[ContiguousSets]:
    """:func:`decode_contiguous_sets` of several batches, their sets decoded in one
    :func:`costlib.decoding.optimal_topk_ragged` call (the decoder's result for a set does not
    depend on the sets beside it, so every batch gets the same bits as alone; sets of one size
    are decoded together, and with ragged sizes a few batches together pay the decoder's
    per-size overhead once). Every batch must have a set row.
    """
    runs = [_set_runs(part) for part in parts]
    values = np.concatenate([r.values for r in runs])
    starts = np.concatenate([r.starts + base for r, base in zip(
        runs, np.cumsum([0, *(r.rows.size for r in runs)])[:-1].tolist(), strict=True)])
    result = optimal_topk_ragged(values, np.append(starts, values.size), loss, **params)
    out, row_at, set_at = [], 0, 0
    for part, r in zip(parts, runs, strict=True):
        n_rows, n_sets = r.rows.size, r.starts.size
        out.append(_with_topk_fields(
            part, r, result.selected[row_at:row_at + n_rows], result.k[set_at:set_at + n_sets],
            result.expected_loss[set_at:set_at + n_sets]))
        row_at, set_at = row_at + n_rows, set_at + n_sets
    return out


def _with_topk_fields(part: ContiguousBatch, runs: _SetRuns, chosen: NDArray[np.bool_],
                      set_k: NDArray[np.intp], set_loss: NDArray[np.float64]) -> ContiguousSets:
    """The batch's table with the top-k fields of its decoded sets, its counts and hashes."""
    table, rows, n = part.table, runs.rows, part.table.num_rows
    selected = np.zeros(n, dtype=bool)
    selected[rows if runs.order is None else rows[runs.order]] = chosen
    k = np.zeros(n, dtype=np.int64)
    k[rows] = np.repeat(set_k, runs.sizes)
    expected = np.zeros(n)
    expected[rows] = np.repeat(set_loss, runs.sizes)
    null = None if rows.size == n else ~part.in_set
    fields = {
        "topk_decision": pa.array(selected, pa.bool_(), mask=null),
        "k": pa.array(k, pa.int64(), mask=null),
        "expected_loss": pa.array(expected, pa.float64(), mask=null),
    }
    for name, column in fields.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    counts = _counts(table)
    counts["topk_rows"] = int(rows.size)
    counts["topk_selected"] = int(np.count_nonzero(chosen))
    counts["topk_sets"] = int(runs.starts.size)
    return ContiguousSets(table, counts, runs.hashes)


# --------------------------------------------------------------------------- DoFns
def _counts(table: pa.Table, sets: int = 0) -> Counter:
    decision = table.column("threshold_decision")
    counts = Counter(
        rows_written=table.num_rows,
        threshold_flagged=int(pc.sum(decision).as_py() or 0),
        threshold_null=decision.null_count,
    )
    if sets:
        counts["topk_rows"] = table.num_rows
        counts["topk_selected"] = int(pc.sum(table.column("topk_decision")).as_py() or 0)
        counts["topk_sets"] = sets
    return counts


#: Set rows (``decoding.sets_contiguous``) whose sets are decoded together: the row groups of
#: a file are gathered until they hold this many (sets of ragged sizes are decoded size by
#: size, and each size costs some 200 numpy calls however few sets it has).
DECODE_ROWS = 400_000


class DecideFileFn(beam.DoFn):
    """Input path -> per row group: read, validate, decide; writes rows without a set.

    Reading, validation and the threshold decisions of a row group happen in one call, so no
    PCollection ever holds a whole batch: Beam samples the elements of every PCollection for
    size estimates by encoding them, which for Arrow batches (pickled) costs about as much as
    the decisions themselves. Outputs are small: main ``(bucket, bytes)`` of rows to decode in
    sets (top-k path only), tagged ``"counters"`` (row accounting of the batch, and counts of
    the rows written) and ``"dead_letters"`` (``(source, row_group, table)`` of bad rows).

    With ``decoding.sets_contiguous`` the sets are decoded here, the sets of a few row groups
    of the file together (:data:`DECODE_ROWS`, :func:`decode_contiguous_batches`), every row
    is written to its row group's file (on a writer thread, :meth:`write_behind`), and the
    sets' hashes go out tagged ``"set_hashes"`` for :class:`CheckSetsFn`.
    """

    def __init__(self, thresholds: DecisionThresholds, config: RunConfig, directory: str,
                 audit: AuditSettings | None = None):
        self.thresholds = thresholds
        self.config = config
        self.audit = audit
        self.columns = decide_columns(config)
        settings = decoding_settings(config)
        self.loss = settings["loss"]
        self.params = dict(settings["params"])
        self.buckets = int(settings["buckets"])
        self.topk = with_topk(config)
        self.contiguous = sets_contiguous(config)
        self.writer: ThreadPoolExecutor | None = None  # made on the first write behind
        self.writing: list[tuple[Future, int]] = []  # writes in flight and their rows
        self.directory = directory
        self.min_risk = min_risk.decide_settings(config)

    def process(self, path: str):
        # the group (and set id) columns come as dictionary arrays straight from the file's
        # dictionary pages (validation and the decision columns would dictionary-encode them
        # anyway); dead letters get the columns back as the file stores them
        dictionary = [self.config.columns["group"]]
        if self.topk:  # set ids too: distinct values checked (:func:`set_id_dictionary`)
            dictionary.append(self.config.columns["set_id"])
        pending: list[tuple[ValidatedBatch, ContiguousBatch]] = []  # sets not decoded yet
        for row_group, table in read_row_groups(path, self.columns, dictionary=dictionary):
            batch = validate_batch(table, self.config, source=path, row_group=row_group,
                                   for_decisions=True)
            report_metrics(batch.accounting)
            yield pvalue.TaggedOutput("counters", batch.accounting)
            if batch.dead_letters is not None:
                yield pvalue.TaggedOutput("dead_letters", (
                    path, row_group, as_stored(batch.dead_letters, path, dictionary)))
            yield from self.decide(batch, table, pending)
            if sum(int(part.in_set.sum()) for _, part in pending) >= DECODE_ROWS:
                yield from self.decode_pending(pending)
        yield from self.decode_pending(pending)

    def decide(self, batch: ValidatedBatch, raw: pa.Table | None = None,
               pending: list[tuple[ValidatedBatch, ContiguousBatch]] | None = None):
        """Threshold decisions of a batch; set rows out as ``(bucket, bytes)``, others written.

        With ``decoding.sets_contiguous`` a batch with set rows is appended to ``pending``
        (decoded and written by :meth:`decode_pending`), or decoded at once without it.
        """
        table, audit_counters = decision_table_and_audit(
            batch, self.thresholds, self.config.rule, self.loss, self.audit)
        if raw is not None and self.min_risk is not None:
            table, risk_counters = min_risk.with_min_risk(table, self.min_risk, raw, batch)
            yield pvalue.TaggedOutput("counters", risk_counters)
        if audit_counters:
            yield pvalue.TaggedOutput("counters", audit_counters)
        counts = None
        if self.topk:
            in_set = ~(np.isnan(batch.probabilities) | table.column("set_id").is_null()
                       .to_numpy(zero_copy_only=False))
            if in_set.any() and self.contiguous:
                part = ContiguousBatch(table, batch.probabilities, in_set, batch.source,
                                       batch.row_group, batch.valid_rows,
                                       self.config.columns["set_id"])
                if pending is None:
                    yield from self.decode_pending([(batch, part)])
                else:
                    pending.append((batch, part))
                return
            if in_set.any():
                yield from self.shuffle_sets(table, batch.probabilities, in_set)
                table = table.filter(pa.array(~in_set))
        if table.num_rows:
            path = f"{self.directory}/{dead_letter_name(batch.source, batch.row_group)}"
            if self.contiguous:  # the longest writes: behind the next row group's work
                self.write_behind(path, table)
            else:
                write_decisions(path, table)
            yield pvalue.TaggedOutput("counters", counts or _counts(table))

    def decode_pending(self, pending: list[tuple[ValidatedBatch, ContiguousBatch]]):
        """Decode the sets of the ``pending`` batches together (:func:`decode_contiguous_
        batches`), write every batch's rows behind (:meth:`write_behind`), and empty
        ``pending``: the sets' hashes and the counts of every batch out."""
        if not pending:
            return
        decoded = decode_contiguous_batches([part for _, part in pending], self.loss,
                                            self.params)
        for (batch, _), result in zip(pending, decoded, strict=True):
            yield from self.set_hashes(batch, result.hashes)
            self.write_behind(
                f"{self.directory}/{dead_letter_name(batch.source, batch.row_group)}",
                result.table)
            yield pvalue.TaggedOutput("counters", result.counts)
        pending.clear()

    def write_behind(self, path: str, table: pa.Table) -> None:
        """Write ``table`` on the writer thread (Parquet encoding releases the GIL) while the
        next row groups are read and decoded. Writes queue up to :data:`DECODE_ROWS` rows in
        flight (older ones are waited for first; one set of gathered row groups is written
        while the next is read and decoded), and ``finish_bundle`` waits for all (re-raising
        a failed write), as in :class:`DecodeBucketFn`."""
        while self.writing and sum(rows for _, rows in self.writing) + table.num_rows > (
                DECODE_ROWS):
            self.writing.pop(0)[0].result()
        if self.writer is None:
            self.writer = ThreadPoolExecutor(max_workers=1)
        self.writing.append((self.writer.submit(write_decisions, path, table), table.num_rows))

    def wait_for_write(self) -> None:
        """Wait for the writes in flight, if any (re-raising the first error)."""
        writing, self.writing = self.writing, []
        for future, _ in writing:
            future.result()

    def start_bundle(self):
        self.writing = []

    def finish_bundle(self):
        self.wait_for_write()

    def teardown(self):
        if self.writer is not None:
            self.writer.shutdown()

    def set_hashes(self, batch: ValidatedBatch, hashes: NDArray[np.uint64]):
        """``(shard, (source, row group, hash bytes))`` per hash shard present, tagged
        ``"set_hashes"``: the batch's sets for :class:`CheckSetsFn`."""
        shard = (hashes % np.uint64(self.buckets)).astype(np.int64)
        order = np.argsort(shard, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(shard, minlength=self.buckets))])
        hashes = hashes[order]
        for b in np.flatnonzero(np.diff(bounds)).tolist():
            yield pvalue.TaggedOutput("set_hashes", (int(b), (
                batch.source, batch.row_group,
                hashes[bounds[b]:bounds[b + 1]].tobytes())))

    def shuffle_sets(self, table: pa.Table, probabilities: NDArray[np.float64],
                     in_set: NDArray[np.bool_]):
        """``(bucket, bytes)`` per set-id bucket present (:func:`split_sets`)."""
        sets = _narrowed(table.drop_columns(list(TOPK_FIELDS)).append_column(
            PROBABILITY, pa.array(probabilities)))  # top-k fields are set after decoding
        for bucket, part in split_sets(sets, np.flatnonzero(in_set), self.buckets):
            yield bucket, encode_sets(part)


class DecodeBucketFn(beam.DoFn):
    """``(bucket, [IPC bytes])`` -> the bucket's sets decoded, written to ``part-bucket-N``.

    A bucket's file is written on a second thread while the next bucket is decoded (Parquet
    encoding releases the GIL: on 2 free cores the writes, ~0.2 s per 1M rows, hide behind
    the decoding). At most one write is in flight, and ``finish_bundle`` waits for the last,
    so a bundle commits only once its files exist; a failed write re-raises there and fails
    the bundle.
    """

    def __init__(self, config: RunConfig, directory: str):
        settings = decoding_settings(config)
        self.loss = settings["loss"]
        self.params = dict(settings["params"])
        self.directory = directory

    def setup(self):
        self.writer = ThreadPoolExecutor(max_workers=1)

    def start_bundle(self):
        self.writing: Future | None = None

    def process(self, element):
        bucket, payloads = element
        decided = decode_sets(shuffled_rows(list(payloads)), self.loss, self.params)
        self.wait_for_write()
        self.writing = self.writer.submit(
            write_decisions, f"{self.directory}/part-bucket-{bucket:05d}.parquet", decided)
        yield _counts(decided, sets=len(decided.column("set_id").combine_chunks().dictionary))

    def wait_for_write(self) -> None:
        """Wait for the write in flight, if any (re-raising its error)."""
        writing, self.writing = self.writing, None
        if writing is not None:
            writing.result()

    def finish_bundle(self):
        self.wait_for_write()

    def teardown(self):
        self.writer.shutdown()


class CheckSetsFn(beam.DoFn):
    """``(shard, [(source, row group, set hashes)])`` -> ``Counter(topk_sets_checked=n)``;
    stops the run when a set id is in two row groups (``decoding.sets_contiguous``).

    Every batch decoded in place sends one :func:`set_id_hashes` value per set, sharded by
    hash (``decoding.buckets`` shards, checked in parallel). A hash seen in two row groups is
    confirmed on the set ids themselves (the two row groups' ``set_id`` columns are read
    again): a true split raises :class:`InputError` naming the set and both row groups; a
    64-bit hash collision of two different ids is no error. The check sees every set of the
    run, whatever file, bundle or worker it was decoded in, and the run's manifest is written
    only after it passed: a split set makes the run fail (exit 2), never publishes two
    half-sets.
    """

    def __init__(self, config: RunConfig):
        self.config = config

    def process(self, element):
        _shard, parts = element
        parts = sorted(parts)  # a deterministic message whatever order the parts came in
        hashes = [np.frombuffer(data, dtype=np.uint64) for _, _, data in parts]
        values = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        origin = np.repeat(np.arange(len(parts)), [h.size for h in hashes])
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        for i in np.flatnonzero(ordered[1:] == ordered[:-1]).tolist():
            first, second = parts[origin[order[i]]], parts[origin[order[i + 1]]]
            shared = self.shared_set_ids(first[:2], second[:2], ordered[i])
            if shared:
                raise InputError(
                    f"set {shared[0]!r} (column {self.config.columns['set_id']}) is in two row "
                    f"groups: {first[0]} row group {first[1]} and {second[0]} row group "
                    f"{second[1]}, but the config declares decoding.sets_contiguous: true "
                    f"(every set's rows consecutive in one row group); the sets were decoded "
                    f"in parts, so the run stops before its manifest: write the stream set by "
                    f"set, or set decoding.sets_contiguous: false to gather sets with a shuffle")
        yield Counter(topk_sets_checked=int(values.size))

    def shared_set_ids(self, first: tuple[str, int], second: tuple[str, int],
                       value: np.uint64) -> list[str]:
        """Set ids with hash ``value`` in both row groups (``(source, row group)``)."""
        if first == second:  # one row group holds each of its sets once (runs checked)
            return []
        found = []
        for source, row_group in (first, second):
            column = self.config.columns["set_id"]
            ids = next(read_row_groups(source, [column], start=row_group,
                                       stop=row_group + 1))[1].column(column)
            distinct = _as_dictionary(ids.drop_null()).dictionary
            found.append({v for v, h in zip(distinct.to_pylist(), set_id_hashes(distinct),
                                            strict=True) if h == value})
        return sorted(found[0] & found[1])


def build_decide(
    pipeline: beam.Pipeline,
    paths: Sequence[str],
    config: RunConfig,
    thresholds: DecisionThresholds,
    run: RunDirectory,
    audit: AuditSettings | None = None,
) -> None:
    """Add the decide transforms to ``pipeline`` (outputs go to ``run``'s directory)."""
    decisions_dir = run.path("decisions")
    decided = (
        pipeline
        | "Paths" >> beam.Create(list(paths))  # Create reshuffles: files spread over workers
        | "Decide" >> beam.ParDo(
            DecideFileFn(thresholds, config, decisions_dir, audit)
        ).with_outputs("counters", "dead_letters", "set_hashes", main="sets")
    )
    _ = decided.dead_letters | "WriteDeadLetters" >> beam.ParDo(
        WriteDeadLettersFn(run.path("dead_letter"))
    )
    counters = [decided.counters]
    if sets_contiguous(config):  # sets decoded in "Decide"; only their hashes travel
        counters.append(
            decided.set_hashes
            | "ShardSetHashes" >> beam.GroupByKey()
            | "CheckSets" >> beam.ParDo(CheckSetsFn(config))
        )
    elif with_topk(config):
        counters.append(
            decided.sets
            | "ShuffleSets" >> beam.GroupByKey()
            | "Decode" >> beam.ParDo(DecodeBucketFn(config, decisions_dir))
        )
    # One keyed combine for the row accounting and the decision counts (their keys are
    # disjoint): far fewer transforms, and so less fixed cost per run, than CombineGlobally.
    (
        counters
        | "AllCounters" >> beam.Flatten()
        | "OneKey" >> beam.Map(_keyed_by_none)
        | "SumCounters" >> beam.CombinePerKey(SumCounters())
        | "WriteCounters" >> beam.Map(_write_counters, run.path("accounting.json"),
                                      run.path("decision_counts.json"), audit)
    )


def _keyed_by_none(counter: Counter) -> tuple[None, Counter]:
    return None, counter


def _is_row_accounting(key: str) -> bool:
    return key in ("read", "decided") or key.startswith(("dead_letter.", "plausibility."))


def _write_counters(keyed: tuple[None, dict[str, int]], accounting_path: str,
                    counts_path: str, audit: AuditSettings | None = None) -> None:
    """Row accounting (read, decided, dead_letter.*) and decision counts to their files.

    With ``audit`` the decision counts also hold ``audited`` (0 when no row was) and
    ``audit_expected`` / ``audit_expected_variance`` (:func:`audit_summary`).
    """
    totals = keyed[1]
    write_json(accounting_path, {k: v for k, v in totals.items() if _is_row_accounting(k)})
    cells: dict[str, dict[str, int]] = {}
    for key, value in totals.items():
        if key.startswith(CELL_PREFIX):
            group, cell = key[len(CELL_PREFIX):].rsplit(".", 1)
            cells.setdefault(group, {})[cell] = int(value)
    if audit is not None and audit.relative and audit.lattice is not None:
        write_json(counts_path.rsplit("/", 1)[0] + "/" + CELLS_FILE,
                   {"lattice": [list(e) for e in audit.lattice],
                    "cells": {g: dict(sorted(v.items())) for g, v in sorted(cells.items())}})
    counts = {k: v for k, v in totals.items()
              if not _is_row_accounting(k) and not k.startswith(CELL_PREFIX)}
    if audit is not None:
        summary = audit_summary(counts, audit)
        summary = summary.get("groups_without_point", summary)
        counts["audited"] = summary["audited"]
        counts["audit_expected"] = summary["expected"]
        counts["audit_expected_variance"] = summary["variance"]
    write_json(counts_path, dict(sorted(counts.items())))


def audit_summary(counts: dict[str, Any], audit: AuditSettings | None) -> dict[str, Any]:
    """The manifest's ``audit`` section, from the integer counters of the run.

    ``expected = sum_h N_h pi_h`` and ``variance = sum_h N_h pi_h (1 - pi_h)`` over the
    ``N_h`` unflagged rows of stratum ``h`` (:func:`costlib.audit.expected_audits`):
    the mean and variance of the audited count under the design, computed from integer counts so the
    numbers do not depend on the order in which bundles were summed.
    """
    if audit is None:
        return {"enabled": False}
    design = audit.design
    if audit.only_without_point:
        candidates = int(counts.get("audit_unflagged.0", 0))
        return {"enabled": False, "groups_without_point": {
            "salt": audit.salt, "probability": design.floor, "candidates": candidates,
            "audited": int(counts.get("audited", 0)),
            "expected": round(candidates * design.floor, 6),
            "variance": round(candidates * design.floor * (1 - design.floor), 6)}}
    probabilities = design.probabilities()
    unflagged = [int(counts.get(f"audit_unflagged.{h}", 0)) for h in range(design.n_strata)]
    expected, variance = expected_audits(unflagged, probabilities)
    bounds = [-np.inf, *design.edges, np.inf]
    relative = {}
    if audit.relative:
        relative = {"relative_to": "point", "lattice": audit.lattice_record,
                    "cutoffs": {"by_group": {g: [_json_bound(v) for v in c]
                                             for g, c in sorted(audit.cutoffs.items())},
                                "default": [_json_bound(v) for v in audit.default_cutoffs],
                                **(audit.cutoffs_record or {})}}
    return {
        "enabled": True,
        **relative,
        "salt": audit.salt,
        "design": audit.sizing.get("design", "fixed"),
        "sizing": audit.sizing,
        "floor": design.floor,
        "budget_share": audit.sizing.get("budget_share", design.budget_share),
        "audited": int(counts.get("audited", 0)),
        "unflagged": int(sum(unflagged)),
        "expected": round(expected, 6),
        "variance": round(variance, 6),
        "strata": [
            {"lower": _json_bound(bounds[h]), "upper": _json_bound(bounds[h + 1]),
             "weight": design.weights[h], "probability": float(probabilities[h]),
             "unflagged": unflagged[h]}
            for h in range(design.n_strata)
        ],
    }


def _json_bound(value: float) -> float | str:
    return value if np.isfinite(value) else ("inf" if value > 0 else "-inf")


def run_decide(
    config: RunConfig,
    inputs: str | Sequence[str],
    operating_points: str,
    output: str,
    beam_args: Sequence[str] = (),
    run_id: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the decide pipeline to completion and write the manifest; returns the manifest.

    Before any score is read the runner must be known and the run takes ``output``'s lock
    (:mod:`costlib_pipelines.io.lock`); ``progress`` receives a line per phase.

    Parameters
    ----------
    config : RunConfig
        Columns, classifiers, rule, decision_method and decoding settings.
    inputs : str or sequence of str
        Globs of the Parquet score stream (comma-separated allowed).
    operating_points : str
        A recalibrate output directory (its LATEST run), a run directory, or an
        ``operating_points.parquet`` file.
    output : str
        Output directory; the run goes to ``output/runs/<run_id>/``.
    beam_args : sequence of str
        Beam flags; none = ``FnApiRunner`` in process.
    run_id : str, optional
        Explicit run id (a re-run with the same id replaces that run).

    Returns
    -------
    dict
        The manifest (also written to ``manifest.json``).

    Raises
    ------
    InputError
        Missing inputs or operating points, an incomplete run, operating points that do not
        fit the config, or an unreadable file / schema mismatch (naming the file and column).
    ConfigError
        An unknown decoding loss or bad loss parameters.
    RuntimeError
        The row accounting or the written rows do not add up.
    """
    started = time.time()
    say = progress or (lambda _message: None)
    runner = runner_name(beam_args)
    settings = decoding_settings(config)
    try:
        get_loss(settings["loss"], **settings["params"])
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"decoding.loss / decoding.params: {exc}") from exc
    records, source = load_operating_points(operating_points, windows="usable")
    thresholds = select_operating_points(records, config, source=source,
                                         event_time_range=recalibration_time_range(source))
    if thresholds.details.get("window") is not None:
        thresholds.details["window"]["held_windows"] = held_windows(source)
    run = RunDirectory(output, _digest(config, thresholds), run_id)
    with hold_output(run.output, run_id=run.run_id, command="decide"):
        run.check_replaceable()
        paths = match_inputs(inputs)
        say(f"checking {len(paths)} input file(s)")
        input_files = preflight(paths, config, windowed=False, for_decisions=True)
        run.prepare()
        # The decide transforms carry untyped objects (Arrow IPC bytes, Counters): Beam's
        # construction-time type inference costs ~0.07 s CPU a run and picks the same coders.
        pipeline = make_pipeline(beam_args, type_check=False)
        audit = audit_settings(config, run.run_id, run.output, source, thresholds)
        build_decide(pipeline, paths, config, thresholds, run, audit)
        say(f"running the pipeline on {runner} (run {run.run_id})")
        pipeline.run().wait_until_finish()
        counters, accounting = verified_accounting(run, input_files, config)
        counts = run.read_json("decision_counts.json", {}) or {}
        if counts.get("rows_written", 0) != accounting.get("decided", 0):
            raise RuntimeError(f"decided {accounting.get('decided', 0)} rows but wrote "
                               f"{counts.get('rows_written', 0)} decision records")
        if sets_contiguous(config) and counts.get("topk_sets_checked", 0) != counts.get(
                "topk_sets", 0):
            raise RuntimeError(f"decoded {counts.get('topk_sets', 0)} sets in place but "
                               f"checked {counts.get('topk_sets_checked', 0)} for splits")
        manifest = {
            "status": "complete",
            "run_id": run.run_id,
            "command": "decide",
            "config_digest": config.digest,
            "config": config.raw,
            "inputs": input_files,
            "plausibility": plausibility_summary(counters),
            "operating_points": {"source": source, **thresholds.details},
            "topk": with_topk(config),
            "decoding": settings,
            "row_accounting": accounting,
            "decision_counts": counts,
            "audit": audit_summary(counts, audit),
            "outputs": run.outputs(),
            "runner": runner,
            "started_utc": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
            "finished_utc": dt.datetime.now(dt.UTC).isoformat(),
            "seconds": round(time.time() - started, 3),
        }
        run.commit(manifest)
    return manifest


def _digest(config: RunConfig, thresholds: DecisionThresholds) -> str:
    """Digest of the config and the thresholds in use (ends generated run ids)."""
    text = config.digest + repr(sorted(thresholds.by_group.items())) + repr(thresholds.default)
    return hashlib.sha256(text.encode()).hexdigest()


def read_decisions(path: str) -> pa.Table:
    """All decision records of a decide run (output dir: its LATEST run; or a run dir)."""
    path = path.rstrip("/")
    latest = latest_run_id(path)
    if latest is not None:
        path = f"{path}/runs/{latest}"
    read_manifest(path)  # refuses an incomplete run
    files = sorted(
        m.path for r in FileSystems.match([f"{path}/decisions/*.parquet"])
        for m in r.metadata_list
    )
    tables = [pq.read_table(FileSystems.open(f)) for f in files]
    return pa.concat_tables(tables) if tables else DECISION_SCHEMA.empty_table()
