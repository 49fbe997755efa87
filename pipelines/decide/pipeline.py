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
- ``point_status`` (coverage and constraints): ``ok``, ``coverage_limited`` and
  ``resolution_limited`` apply the record's thresholds (a coverage-limited point is the best one
  inside the rated region: the safe choice; a resolution-limited one is the lattice's best);
  ``infeasible`` (no covered point meets the constraints; the record holds the nearest point)
  gives the group a null threshold decision: decide fails closed rather than apply thresholds that
  break a constraint, except for a point that misses ``min_recall`` only
  (:func:`~costlib_pipelines.io.recall_floor.misses_only_min_recall`): its thresholds, the
  highest recall the rated region allows, are applied (the guard held the run; a person
  published it), since flagging nothing would answer a request for more recall with none.
  Records without the field (older runs) count as ``ok``. The manifest lists
  ``groups_infeasible``, ``groups_below_min_recall`` (applied all the same),
  ``groups_coverage_limited`` and ``groups_resolution_limited``;
- a group with no record uses the ``"__all__"`` record if that one has thresholds
  (``operating_point_group = "__all__"``), else its threshold decision is null.

**Audit sample** (config ``audit``; :mod:`costlib.audit._sampling`): when enabled,
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
(``sizing``), salt and counts (:func:`.audit_columns.audit_summary`).

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
:func:`.records.write_decisions`).

On the fast path (no sets) one DoFn reads, validates, decides and writes each row group of a
file (:class:`.transforms.DecideFileFn`), so only small counters travel between transforms.

With ``decoding.sets_contiguous: true`` (the stream written set by set: every set one run of
rows inside one row group) there is no shuffle: :class:`.transforms.DecideFileFn` decodes each
row group's sets where it reads them (:func:`.contiguous.decode_contiguous_sets`: runs checked,
items ordered as below, the same decoder, the same records bit for bit) and writes all of the row
group's rows to its ``part-<sha1>-rg<N>`` file; one hash per set goes to
:class:`.transforms.CheckSetsFn`, which fails the run (exit 2, before the manifest) if a set is
in two row groups anywhere in the input.

The shuffle moves Arrow tables, not rows: each batch splits its set rows into
``decoding.buckets`` buckets by a stable hash of the set id (``pandas.util.hash_array`` of the
set id's UTF-8 bytes, the same as of the string: SipHash with a fixed key, identical across
processes and machines; Python's ``hash()`` of ``str`` is salted per process), emits
``(bucket, table)``, and after a ``GroupByKey`` each bucket's tables are concatenated and
sorted by ``(set_id, item_id, probability, group, threshold_decision, audit,
audit_probability)`` (strings compared as UTF-8) before decoding. Within a set, items are thus
ordered by item id, and ties in probability go to the earlier item id. The set rows travel as
Arrow IPC bytes, one payload per batch and bucket (:func:`.sets.split_sets`,
:func:`.sets.encode_sets`): all-null columns are left out and dictionary indices narrowed to the
smallest integer type (about 30 bytes a row instead of 64 for the benchmark's rows; the local
runner copies every shuffled byte several times). The decode stage takes the rows as they
travelled (:func:`.sets.shuffled_rows`) and puts the null columns back after sorting; no
threshold decision is computed twice.

This module holds the pipeline (:func:`build_decide`), :func:`run_decide` (``costlib decide``)
and the counter files; the parts are modules of their own: :mod:`.selection` (which operating
point a group uses), :mod:`.records` (the columns read, the decision records built, written and
read back), :mod:`.audit_columns` (the audit sample: settings, columns, summary), :mod:`.sets`
(top-k sets through the shuffle), :mod:`.contiguous` (sets decoded in place) and
:mod:`.transforms` (the DoFns).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import apache_beam as beam

from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.audit_columns import (
    CELL_PREFIX,
    AuditSettings,
    audit_settings,
    audit_summary,
)
from costlib_pipelines.decide.audit_lattice import CELLS_FILE
from costlib_pipelines.decide.records import decoding_settings, sets_contiguous, with_topk
from costlib_pipelines.decide.transforms import CheckSetsFn, DecideFileFn, DecodeBucketFn
from costlib_pipelines.io.accounting import SumCounters
from costlib_pipelines.io.dead_letters import WriteDeadLettersFn
from costlib_pipelines.io.files import InputError, match_inputs, write_json
from costlib_pipelines.io.lock import hold_output, record_job
from costlib_pipelines.io.min_risk import decide_settings as min_risk_settings
from costlib_pipelines.io.plausibility import plausibility_summary
from costlib_pipelines.io.preflight import preflight
from costlib_pipelines.io.published_points import (
    DecisionThresholds,
    held_windows,
    recalibration_time_range,
    select_operating_points,
)
from costlib_pipelines.io.runs import (
    RunDirectory,
    load_operating_points,
    points_publication,
    verified_accounting,
)
from costlib_pipelines.pause import pause_point
from costlib_pipelines.runner import job_name_flags, make_pipeline, run_to_end, runner_name

__all__ = [
    "build_decide",
    "run_decide",
]


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


def run_decide(
    config: RunConfig,
    inputs: str | Sequence[str],
    operating_points: str,
    output: str,
    beam_args: Sequence[str] = (),
    run_id: str | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    allow_unpublished: bool = False,
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
        ``operating_points.parquet`` file. A run directory or a file of a run must be its
        output's published run (``LATEST``) unless ``allow_unpublished``; a file outside any
        run (hand-made points) is accepted, its publication unknown
        (:func:`~costlib_pipelines.io.runs.points_publication`). The manifest's
        ``operating_points`` records ``published`` (true, false or null), ``run_id`` and
        ``published_reason``.
    output : str
        Output directory; the run goes to ``output/runs/<run_id>/``.
    beam_args : sequence of str
        Beam flags; none = ``FnApiRunner`` in process.
    run_id : str, optional
        Explicit run id (a re-run with the same id replaces that run).
    allow_unpublished : bool
        Apply operating points of a run that is not the published one (a held run, an earlier
        run): ``costlib decide --allow-unpublished``.

    Returns
    -------
    dict
        The manifest (also written to ``manifest.json``).

    Raises
    ------
    InputError
        Missing inputs or operating points, an incomplete run, operating points of a run that
        is not published (without ``allow_unpublished``), operating points that do not
        fit the config, or an unreadable file / schema mismatch (naming the file and column).
    ConfigError
        min_risk without columns.probability (before any output exists).
    RuntimeError
        The row accounting or the written rows do not add up.
    """
    started = time.time()
    say = progress or (lambda _message: None)
    runner = runner_name(beam_args)
    settings = decoding_settings(config)  # loss and params: checked with the config
    min_risk_settings(config)  # a config error before any output directory exists
    records, source = load_operating_points(operating_points, windows="usable")
    publication = points_publication(source)
    if publication["published"] is False and not allow_unpublished:
        raise InputError(
            f"--operating-points {operating_points}: {publication['reason']}; decide applies "
            "only a published run: pass the recalibrate output directory (its LATEST), publish "
            "the run after review (costlib publish), or pass --allow-unpublished to apply it "
            "anyway (recorded in the manifest)")
    thresholds = select_operating_points(records, config, source=source,
                                         event_time_range=recalibration_time_range(source))
    if thresholds.details.get("window") is not None:
        thresholds.details["window"]["held_windows"] = held_windows(source)
    run = RunDirectory(output, _digest(config, thresholds), run_id)
    with hold_output(run.output, run_id=run.run_id, command="decide") as lock:
        run.check_replaceable()
        pause_point("decide.locked")
        paths = match_inputs(inputs)
        say(f"checking {len(paths)} input file(s)")
        input_files = preflight(paths, config, windowed=False, for_decisions=True)
        run.prepare()
        # The decide transforms carry untyped objects (Arrow IPC bytes, Counters): Beam's
        # construction-time type inference costs ~0.07 s CPU a run and picks the same coders.
        pipeline = make_pipeline(job_name_flags(beam_args, "decide", run.run_id),
                                 type_check=False)
        audit = audit_settings(config, run.run_id, run.output, source, thresholds)
        build_decide(pipeline, paths, config, thresholds, run, audit)
        say(f"running the pipeline on {runner} (run {run.run_id})")
        run_to_end(pipeline, runner, record_job=partial(record_job, lock), log_dir=run.run_dir)
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
            "operating_points": {"source": source, "published": publication["published"],
                                 "run_id": publication["run_id"],
                                 "published_reason": publication["reason"],
                                 "allow_unpublished": allow_unpublished,
                                 **thresholds.details},
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
        pause_point("decide.commit")
        run.commit(manifest)
    return manifest


def _digest(config: RunConfig, thresholds: DecisionThresholds) -> str:
    """Digest of the config and the thresholds in use (ends generated run ids)."""
    text = config.digest + repr(sorted(thresholds.by_group.items())) + repr(thresholds.default)
    return hashlib.sha256(text.encode()).hexdigest()
