"""``costlib recalibrate``: Parquet score streams -> operating points per group.

Beam flags not declared here (``--runner``, ``--flink_master``, ``--project``, ...) are passed
through to Beam; with no ``--runner`` the pipeline runs locally on the FnApiRunner (offline).
"""

from __future__ import annotations

import argparse
import sys

from costlib.thresholds.point import capacity_objective_names, objective_names, parameter_owners
from costlib_pipelines.commands.arguments import add_follow_arguments, bounded

PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML run config (see schemas/)")
    parser.add_argument("--input", required=True, help="Parquet glob(s), comma-separated")
    parser.add_argument("--output", required=True, help="output directory (local or gs://...)")
    parser.add_argument("--run-id", default=None,
                        help="run id: 1-128 letters, digits, '.', '_' or '-' (default: UTC time "
                             "+ config hash); a re-run with an id replaces that run, never the "
                             "published one")
    add_follow_arguments(
        parser, "With --follow, --input is a landing glob (DIR/*.parquet) read as files land "
        "(needs the config's windowing): each event-time window is judged by the publish guard "
        "when the producer's DIR/_WATERMARK passes its end, and applied windows reach costlib "
        "decide at once.")
    parser.add_argument("--upgrade", action="store_true",
                        help="with --follow: replace the running job of the followed run OUTPUT "
                             "publishes by this costlib's, its state carried over in a Flink "
                             "savepoint (files read stay read, open windows keep their sums); "
                             "same --config and --input as the run (docs/worker.md)")
    parser.add_argument("--in-force", default=None, metavar="PATH",
                        help="the operating points decide applied to the rated rows (a file, "
                             "run or output directory, as decide --operating-points takes); "
                             "default: the output's published run. Their thresholds become grid "
                             "edges and thin groups keep them (config section in_force)")
    parser.add_argument("--max-unrated-share", type=bounded("coverage.max_unrated_share"),
                        default=None, metavar="S",
                        help="largest share in [0, 1] of a point's flagged volume that may be "
                             "unrated rows (0: only the rated region); overrides the config's "
                             "coverage.max_unrated_share (and so its digest)")
    choice = parser.add_argument_group(
        "objective and constraints",
        "Override the config's objective and constraints sections (the run's config and digest "
        "record the values used).",
    )
    choice.add_argument("--objective", choices=objective_names(),
                        default=None, help="what the operating point maximises")
    choice.add_argument("--beta", type=bounded("objective.beta"), default=None,
                        help="beta of --objective fbeta (an error with any other objective)")
    choice.add_argument("--volume", type=bounded("objective.volume"), default=None,
                        help="review volume of --objective precision_at_volume (an error with any "
                             "other objective)")
    choice.add_argument("--min-precision", type=bounded("constraints.min_precision"),
                        default=None, metavar="P",
                        help="constraint: precision among flagged rated rows >= P")
    choice.add_argument("--min-recall", type=bounded("constraints.min_recall"), default=None,
                        metavar="R",
                        help="constraint: estimated recall (share of all positives) >= R; "
                             "needs audit data (columns.audit_probability)")
    choice.add_argument("--max-volume", type=bounded("constraints.max_volume"),
                        default=None, metavar="V",
                        help="constraint: at most V flagged rows, rated or not (review capacity)")
    choice.add_argument("--max-false-positives", type=bounded("constraints.max_false_positives"),
                        default=None, metavar="F",
                        help="constraint: at most F false positives among the rated rows")
    shared = parser.add_argument_group(
        "shared review capacity",
        "Allocate one capacity over all groups (config section capacity; batch runs only): "
        "every group gets a record of method capacity, which decide applies. Needs "
        "decision_method: capacity in the config (refused otherwise: decide would ignore "
        "the allocation).",
    )
    shared.add_argument("--capacity", type=bounded("capacity.total"), default=None, metavar="C",
                        help="flagged rows (rated and unrated) all groups may flag next period; "
                             "overrides the config's capacity.total (and so its digest)")
    shared.add_argument("--capacity-objective", choices=capacity_objective_names(),
                        default=None, help="what the allocation maximises (capacity.objective)")
    guard = parser.add_argument_group(
        "publish guard",
        "LATEST only moves to the new run if its thresholds moved at most --max-threshold-change "
        "since the published run and rest on at least --min-rated rated rows (defaults: the "
        "config's publish section, where both are off unless set); otherwise the run is held "
        "and the command exits with 3.",
    )
    guard.add_argument("--max-threshold-change", type=bounded("publish.max_threshold_change"),
                       default=None,
                       metavar="X", help="largest allowed threshold move (absolute)")
    guard.add_argument("--min-rated", type=bounded("publish.min_rated"), default=None, metavar="N",
                       help="fewest rated rows a group's thresholds may rest on")
    guard.add_argument("--override-guard", action="store_true",
                       help="publish even if the guard finds violations (needs --override-by "
                            "and --override-reason; recorded in the manifest)")
    guard.add_argument("--override-by", default="", help="who overrides the guard")
    guard.add_argument("--override-reason", default="", help="why the guard is overridden")


def run(args: argparse.Namespace) -> int:
    from costlib_pipelines.commands.progress import Progress
    from costlib_pipelines.commands.summary import anomaly_lines, points_lines, scores_outside
    from costlib_pipelines.config import load_config
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.io.accounting import audit_warning
    from costlib_pipelines.io.plausibility import Plausibility
    from costlib_pipelines.io.runs import read_operating_points
    from costlib_pipelines.recalibrate.pipeline import run_recalibrate
    from costlib_pipelines.recalibrate.publish import Override

    override = None
    if args.override_guard:
        if not (args.override_by.strip() and args.override_reason.strip()):
            raise UsageError("--override-guard needs --override-by NAME and --override-reason "
                             "TEXT (both are recorded in the manifest)")
        override = Override(by=args.override_by, reason=args.override_reason)
    elif args.override_by or args.override_reason:
        raise UsageError("--override-by/--override-reason only apply with --override-guard")
    config = load_config(args.config)
    objective = args.objective or config.objective["name"]
    for key, (needs, _) in parameter_owners().items():
        flag, value = f"--{key}", getattr(args, key)
        if value is not None and objective != needs:
            whence = "--objective" if args.objective else f"objective.name in {args.config}"
            raise UsageError(f"{flag} {value:g} applies to --objective {needs} only, but the "
                             f"objective is {objective} ({whence}); add --objective {needs} or "
                             f"drop {flag}")
    overrides = {f"{section}.{key}": value for section, key, value in (
        ("coverage", "max_unrated_share", args.max_unrated_share),
        ("objective", "name", args.objective), ("objective", "beta", args.beta),
        ("objective", "volume", args.volume),
        ("constraints", "min_precision", args.min_precision),
        ("constraints", "max_volume", args.max_volume),
        ("constraints", "max_false_positives", args.max_false_positives),
        ("constraints", "min_recall", args.min_recall),
        ("capacity", "total", args.capacity),
        ("capacity", "objective", args.capacity_objective),
    ) if value is not None}
    source = args.config
    if overrides:
        source = f"{args.config} with command-line flags"
        config = config.with_overrides(overrides, source=source)
    config.check_recalibrate(source)
    if args.upgrade and not args.follow:
        raise UsageError("--upgrade replaces a followed run's streaming job: add --follow")
    if args.follow:
        return _start_follow(args, config, override)
    from costlib_pipelines.recalibrate.publish import PublishRefused

    try:
        with Progress("costlib recalibrate") as progress:
            manifest = run_recalibrate(
                config, args.input, args.output, args.beam_args, run_id=args.run_id,
                max_threshold_change=args.max_threshold_change, min_rated=args.min_rated,
                override=override, progress=progress, in_force=args.in_force,
            )
    except PublishRefused as held:  # a held run's records are complete: say why recall is
        if held.run_dir is not None and config.windowing is None:  # unsure, then exit 3
            _print_recall_warnings(f"{held.run_dir}/operating_points.parquet",
                                   config.decision_method)
        raise
    if manifest["status"] == "submitted":  # a template launch: only the job graph was written
        print(f"run {manifest['run_id']}: job graph written; the job checks its row "
              "accounting, applies the publish guard and writes its manifest when it ends")
        return 0
    acc = manifest["row_accounting"]
    reasons = ", ".join(f"{k}={v}" for k, v in acc["dead_letter_reasons"].items()) or "none"
    print(
        f"run {manifest['run_id']}: read {acc['read']:,} rows = used {acc.get('used', 0):,} "
        f"+ unrated {acc.get('unrated', 0):,} + dead-lettered {acc['dead_lettered']:,} "
        f"({reasons}); {manifest['seconds']} s on {manifest['runner']}"
    )
    negative_regret = {k.rsplit(".", 1)[1].replace("_", " "): v for k, v in acc.items()
                       if k.startswith("min_risk.negative_regret.") and v}
    if negative_regret:
        print(f"min_risk: {sum(negative_regret.values()):,} row(s) with a negative cost regret "
              "(e.g. an amount below the review cost: never worth flagging for cost) weigh 0 in "
              "the grids (" + ", ".join(f"{kind} {n:,}" for kind, n in negative_regret.items())
              + ")")
    outside = scores_outside(manifest.get("plausibility") or {},
                              Plausibility.from_config(config))
    if outside:
        print(f"plausibility: {outside}")
    for line in anomaly_lines(manifest.get("plausibility") or {}, acc["read"]):
        print(line)
    warning = audit_warning(acc)
    if warning:
        print(f"warning: {warning}")
    in_force = manifest.get("in_force") or {}
    if args.in_force is not None and in_force.get("published") is False:
        print(f"note: --in-force {args.in_force}: {in_force['published_reason']}; the points "
              "are taken as the thresholds in force (what decide --allow-unpublished applied)")
    run_dir = f"{args.output.rstrip('/')}/runs/{manifest['run_id']}"
    if config.windowing is not None:
        _print_windowed(manifest, run_dir)
        _print_guard_off(manifest["guard"])
        return 0
    print(f"operating points: {run_dir}/operating_points.parquet (and .jsonl); manifest.json "
          "written last")
    points = f"{run_dir}/operating_points.parquet"
    for line in points_lines(read_operating_points(points), config.classifiers,
                             config.decision_method, config.raw["target"], points,
                             rule=config.rule):
        print(line)
    _print_recall_warnings(points, config.decision_method)
    capacity = manifest.get("capacity")
    if capacity:
        print(f"capacity: {capacity['total_volume']:,.1f} of {capacity['capacity']:,.1f} rows "
              f"allocated over {capacity['groups_allocated']} groups, lambda "
              f"{_lambda(capacity['multiplier'])}, utility {capacity['total_utility']:,.2f} "
              f"(equal split {capacity.get('equal_utility', float('nan')):,.2f}, "
              f"traffic-proportional {capacity.get('proportional_utility', float('nan')):,.2f}); "
              f"{run_dir}/capacity.json")
        for why in (capacity.get("unused_why"), capacity.get("bound_why")):
            if why:
                print(f"capacity: {why}")
        _print_capacity_reasons(points)
    guard = manifest["guard"]
    for note in guard.get("notes") or []:
        if note != warning:  # printed above
            print(f"{'warning' if note.startswith('volume:') else 'note'}: {note}")
    if guard["override"]:
        print(f"published despite {len(guard['violations'])} guard violation(s), overridden by "
              f"{guard['override']['by']}: {guard['override']['reason']}")
        from costlib_pipelines.recalibrate.publish import infeasible_overrides

        for line in infeasible_overrides(read_operating_points(points),
                                         config.decision_method):
            print(f"warning: {line}")
    _print_guard_off(guard)
    return 0


def _print_capacity_reasons(path: str, first: int = 10) -> None:
    """What holds each group where the allocation left it (the ``capacity`` records'
    ``reason``), for the first ``first`` groups."""
    from costlib_pipelines.io.runs import read_operating_points

    reasons = [(r["group"], r["reason"]) for r in read_operating_points(path)
               if r["method"] == "capacity" and r.get("reason")]
    for group, reason in sorted(reasons)[:first]:
        print(f"  {group}: {reason}")
    if len(reasons) > first:
        print(f"  ... {len(reasons) - first} more group(s): the capacity records' reason in "
              f"{path}")


def _print_recall_warnings(path: str, method: str) -> None:
    """One line per group whose recall interval (decision method) is wider than
    ``recall.max_width``: the record's ``recall_warning`` (interval, evidence, the audit a
    target width needs)."""
    from costlib_pipelines.io.runs import read_operating_points

    for record in read_operating_points(path):
        if record["method"] == method and record.get("recall_warning"):
            estimate = record.get("estimated_recall")
            shown = "-" if estimate is None else f"{estimate:.3f}"
            print(f"recall: group {record['group']}: estimate {shown}, "
                  f"{record['recall_warning']}")


#: Printed when the run was published with both guard settings off (their defaults).
GUARD_OFF = ("publish guard off (publish.max_threshold_change, publish.min_rated unset): "
             "published without checks on threshold moves or rated rows; see 'Rating backlog' "
             "in docs/safe_operations.md")


def _print_guard_off(guard: dict) -> None:
    if guard.get("off"):
        print(f"warning: {GUARD_OFF}")


def _lambda(value: float | str) -> str:
    """The capacity's multiplier as printed (``inf`` when no allocation fits)."""
    return value if isinstance(value, str) else f"{value:.4g}"


def _print_windowed(manifest: dict, run_dir: str) -> None:
    """What a windowed run wrote, and what the guard per window decided."""
    window = manifest["windowing"]
    times = manifest.get("event_time_range") or {}
    print(f"operating points: {manifest['windows']} event-time windows of "
          f"{window['size_days']:g} days every {window['period_days']:g} days (event times "
          f"{times.get('min_utc', '?')} .. {times.get('max_utc', '?')}), in {run_dir}/windows/"
          "<start>_<end>/operating_points.parquet (and .jsonl); manifest.json written last")
    guard = manifest["guard"]
    states = guard["window_states"]
    against = guard["compared_with_run"] or "nothing: first run"
    print(f"publish guard per window (compared with {against}): "
          f"{states['applied']} applied, {states['held']} held, "
          f"{states['not_eligible']} not eligible (decide.window {guard['eligible_windows']}); "
          "costlib decide applies each group's latest applied window")
    if guard["override"]:
        print(f"held windows applied by override of {guard['override']['by']}: "
              f"{guard['override']['reason']}")


def _start_follow(args: argparse.Namespace, config, override) -> int:
    """``--follow``: publish the live run and submit the streaming job."""
    from costlib_pipelines.commands.progress import Progress
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.follow.recalibrate_stream import start_follow
    from costlib_pipelines.runner import stop_instructions

    if override is not None or args.capacity is not None:
        raise UsageError("--follow judges every window with the guard as it closes: "
                         "--override-guard and --capacity apply to batch runs only (release a "
                         "held window with costlib publish --window)")
    if args.upgrade:
        return _upgrade_follow(args, config)
    with Progress("costlib recalibrate --follow") as progress:
        started = start_follow(
            config, args.input, args.output, args.beam_args, run_id=args.run_id,
            in_force=args.in_force, max_threshold_change=args.max_threshold_change,
            min_rated=args.min_rated, poll_seconds=args.poll_seconds,
            settle_seconds=args.settle_seconds, progress=progress)
    print(f"run {started['run_id']}: following {args.input}; its windows are judged as "
          f"{args.input.rsplit('/', 1)[0]}/_WATERMARK passes their end (costlib status "
          f"--output {args.output})")
    print(stop_instructions(started["job"]))
    return 0


def _upgrade_follow(args: argparse.Namespace, config) -> int:
    """``--follow --upgrade``: the followed run's job replaced, its state carried over."""
    from costlib_pipelines.commands.exit_codes import ENGINE_FAILED
    from costlib_pipelines.commands.progress import Progress
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.follow.upgrade import UpgradeFailed, upgrade_follow
    from costlib_pipelines.runner import stop_instructions

    given = [flag for flag, value in (("--run-id", args.run_id), ("--in-force", args.in_force))
             if value is not None]
    if given:
        raise UsageError(f"--upgrade continues the run OUTPUT publishes, with its thresholds in "
                         f"force: drop {' and '.join(given)}")
    try:
        with Progress("costlib recalibrate --follow --upgrade") as progress:
            done = upgrade_follow(
                config, args.input, args.output, args.beam_args,
                max_threshold_change=args.max_threshold_change, min_rated=args.min_rated,
                poll_seconds=args.poll_seconds, settle_seconds=args.settle_seconds,
                progress=progress)
    except UpgradeFailed as exc:
        print(f"costlib recalibrate: upgrade failed: {exc}", file=sys.stderr)
        return ENGINE_FAILED
    stream = done["stream"]
    print(f"run {done['run_id']} upgraded: Flink job {done['from_job']} stopped with savepoint "
          f"{done['savepoint']}; job {done['job']['flink_job_id']} restored it and runs "
          f"({stream.get('files_read', 0)} file(s) read and watermark "
          f"{stream.get('watermark_utc')} carried over, none read again)")
    print(stop_instructions(done["job"]))
    return 0
