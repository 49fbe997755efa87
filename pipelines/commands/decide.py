"""``costlib decide``: threshold and optimal top-k decisions for a Parquet score stream.

``costlib decide --config C --input GLOB --operating-points PATH --output DIR [Beam flags]``

Arguments this command does not declare are Beam flags and go to the pipeline unchanged
(``--runner=FlinkRunner --flink_master=...``, ``--runner=DataflowRunner --project=...``,
``--direct_running_mode=multi_processing``); with none, the pipeline runs in process on the
``FnApiRunner``. See :mod:`costlib_pipelines.decide.pipeline` for what is decided and the output
layout.
"""

from __future__ import annotations

import argparse
from typing import Any

from costlib_pipelines.commands.arguments import add_follow_arguments

#: Unknown arguments are Beam flags (see :func:`costlib_pipelines.commands.cli.main`).
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib decide``."""
    parser.allow_abbrev = False  # never swallow a Beam flag as an abbreviation of ours
    parser.add_argument("--config", required=True, help="run config (YAML)")
    parser.add_argument(
        "--input", required=True, help="Parquet score stream: glob(s), comma-separated"
    )
    parser.add_argument(
        "--operating-points", required=True,
        help="recalibrate output directory (uses LATEST), run directory, or "
             "operating_points.parquet; a run (or its file) must be its output's published "
             "run (see --allow-unpublished)",
    )
    parser.add_argument(
        "--allow-unpublished", action="store_true",
        help="apply a run directory or file that is not the published run of its output "
             "(a held run, an earlier one): refused without this flag; the manifest records "
             "\"published\": false")
    parser.add_argument("--output", required=True, help="output directory")
    parser.add_argument("--run-id", default=None,
                        help="run id: 1-128 letters, digits, '.', '_' or '-' (default: "
                             "timestamp-digest)")
    add_follow_arguments(
        parser, "With --follow, --input is a landing glob (DIR/*.parquet): every file that "
        "lands is decided on its own, with the points --operating-points names when it is "
        "decided, into OUTPUT/files/<name>-<digest>/ (what costlib decide writes for that file).")


def audit_line(audit: dict[str, Any]) -> str | None:
    """A decide manifest's ``audit`` section in one line (None: nothing was audited)."""
    if audit.get("enabled"):
        proposal = (audit.get("proposal") or {}).get("unflagged")
        return (f"audit: {audit.get('audited', 0):,} unflagged rows sent to audit (expected "
                f"{audit.get('expected', 0):,.1f} under the {audit.get('design', 'fixed')} "
                "design" + (f"; {proposal:,} rows of proposed moves promoted" if proposal
                            else "")
                + "): rate them like flagged rows and keep audit_probability for recalibrate")
    floor = audit.get("groups_without_point") or {}
    if floor.get("candidates"):
        return (f"audit of groups without a point: {floor['audited']:,} of "
                f"{floor['candidates']:,} rows (probability {floor['probability']:g})")
    return None


def _first(names: list[str], n: int = 5) -> str:
    """The first ``n`` names, and how many more."""
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


def run(args: argparse.Namespace) -> int:
    """Run the decide pipeline and print a summary; returns 0.

    Config and input errors propagate (``costlib_pipelines.commands.cli.main`` prints them in one
    line and returns 2).
    """
    from costlib_pipelines.commands.progress import Progress
    from costlib_pipelines.commands.summary import anomaly_lines, scores_outside
    from costlib_pipelines.config import load_config
    from costlib_pipelines.decide.pipeline import run_decide
    from costlib_pipelines.io.batches import NULL_GROUP_DECIDED
    from costlib_pipelines.io.plausibility import Plausibility

    config = load_config(args.config)
    if args.follow:
        return _start_follow(args, config)
    with Progress("costlib decide") as progress:
        manifest = run_decide(
            config, args.input, args.operating_points, args.output,
            beam_args=list(getattr(args, "beam_args", []) or []), run_id=args.run_id,
            progress=progress, allow_unpublished=args.allow_unpublished,
        )
    accounting = manifest["row_accounting"]
    counts = manifest["decision_counts"]
    reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(accounting["dead_letter_reasons"].items()))
    print(f"run {manifest['run_id']} ({manifest['runner']}, {manifest['seconds']:.1f} s): "
          f"read {accounting['read']:,} rows, decided {accounting['decided']:,}, "
          f"dead-lettered {accounting['dead_lettered']:,}" + (f" ({reasons})" if reasons else ""))
    outside = scores_outside(manifest.get("plausibility") or {},
                             Plausibility.from_config(config), decide=True)
    if outside:
        print(f"plausibility: {outside}")
    for line in anomaly_lines(manifest.get("plausibility") or {}, accounting["read"]):
        print(line)
    points = manifest["operating_points"]
    runs = points.get("run_id") or ", ".join(points.get("run_ids") or [])
    print(f"applied the {points['method']} points (decision_method, rule "
          f"{manifest['config']['rule']}) of run {runs} for {points['groups']} group(s): "
          f"{points['source']}")
    if points.get("capacity_ignored"):
        print(f"warning: the points hold a shared-capacity allocation (method capacity), but "
              f"the config's decision_method is {points['method']!r}: its thresholds were "
              "applied and the allocation was not; set decision_method: capacity to apply it")
    print(f"threshold decisions: {counts.get('threshold_flagged', 0):,} flagged, "
          f"{counts.get('threshold_null', 0):,} without an operating point")
    without_group = counts.get(NULL_GROUP_DECIDED, 0)
    if without_group:
        print(f"warning: {without_group:,} rows without a group were decided with the "
              "all-groups points (their group is written as __all__; decide.null_group: "
              "dead_letter dead-letters them instead)")
    below = points.get("groups_below_min_recall") or []
    if below:
        print(f"warning: {len(below)} group(s) miss min_recall: no covered point meets it, so "
              "they are decided with their nearest point, the highest recall the rated region "
              f"allows (the run was published by a person): {_first(below)}")
    without = points.get("groups_without_thresholds") or []
    if without:
        print(f"{len(without)} group(s) whose point flags nothing: {_first(without)}")
    if points["published"] is False:
        print("warning: applied operating points that are not published "
              f"(--allow-unpublished): {points['published_reason']}")
    elif points["published"] is None:
        print(f"note: {points['published_reason']}")
    window = manifest["operating_points"].get("window")
    if window:  # a windowed recalibration: which window(s) the thresholds came from
        used = ", ".join(f"[{w['window_start']}, {w['window_end']}) for {len(w['groups'])} "
                         "group(s)" for w in window["windows_used"])
        print(f"windows used ({window['selection']}): {used}")
        for held in window.get("held_windows") or []:
            print(f"window {held['window']} is {held['state']} (publish guard: "
                  f"{'; '.join(held['violations']) or 'withdrawn by a person'}): not applied; "
                  "its groups keep their last applied window")
        carried = window.get("groups_in_force_before") or {}
        if carried:
            print(f"{len(carried)} group(s) without an applied window keep the points in force "
                  f"before the run (from run(s) {', '.join(sorted(set(carried.values())))})")
    line = audit_line(manifest.get("audit") or {})
    if line:
        print(line)
    if manifest["topk"]:
        print(f"top-k ({manifest['decoding']['loss']}): {counts.get('topk_sets', 0):,} sets, "
              f"{counts.get('topk_selected', 0):,} of {counts.get('topk_rows', 0):,} rows "
              f"selected")
    print(f"wrote {args.output.rstrip('/')}/runs/{manifest['run_id']}/")
    return 0


def _start_follow(args: argparse.Namespace, config) -> int:
    """``--follow``: submit the streaming job that decides each landed file."""
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.follow.decide_stream import start_follow_decide
    from costlib_pipelines.runner import stop_instructions

    if args.run_id is not None or args.allow_unpublished:
        raise UsageError("--follow names each file's run itself and applies published points "
                         "only: drop --run-id and --allow-unpublished")
    started = start_follow_decide(
        config, args.input, args.operating_points, args.output,
        list(getattr(args, "beam_args", []) or []), poll_seconds=args.poll_seconds,
        settle_seconds=args.settle_seconds)
    print(f"following {args.input} on {started['runner']}: each landed file is decided into "
          f"{started['output']}/files/<name>-<digest>/")
    if started["job"] is not None:
        print(stop_instructions(started["job"]))
    return 0
