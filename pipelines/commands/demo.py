"""``costlib demo``: the main job on a built-in sample, end to end on the local runner.

1. generates a realistic rare-event score stream (3 groups, 2 classifiers, labels only for items
   some classifier scored above a rating floor; see :mod:`costlib.sample`) and writes it as
   Parquet files to ``OUTPUT/input/``;
2. writes the run config it uses to ``OUTPUT/config.yaml``;
3. runs the recalibrate pipeline (Beam, FnApiRunner) into ``OUTPUT/recalibrate/``;
4. runs the decide pipeline with the new operating points into ``OUTPUT/decide/``;
5. prints the operating points and the decisions summary, and draws the PN curve of every
   group from the run's own outputs to ``OUTPUT/plots/``.

With ``--audit-loop`` it then closes the loop once, as a team would the next day:

6. generates the next day's stream (nothing rated yet) to ``OUTPUT/day2/scores/``;
7. runs decide with an audit sample of the unflagged rows (``audit.enabled``, the default
   design) and the published points into ``OUTPUT/day2/decide/``;
8. plays the rater: joins the decisions to the stream
   (:func:`costlib_pipelines.io.ratings.attach_decisions`), labels the rows to rate (flagged or
   audited) from the generator's truth, keeps ``audit_probability`` on every row, and writes
   ``OUTPUT/day2/rated/``;
9. recalibrates on the rated day with the audit weights and a recall floor
   (``constraints.min_recall``, ``--min-recall``) into ``OUTPUT/recalibrate/`` (the published
   points are in force), and prints each group's estimated recall with its interval.
"""

from __future__ import annotations

import argparse

from costlib_pipelines.commands.arguments import bounded, integer_in

PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", default="costlib-out", help="directory for everything")
    parser.add_argument("--n-items", type=integer_in(1_000, 100_000_000), default=300_000,
                        help="items in the sample (1,000 to 100,000,000)")
    parser.add_argument("--seed", type=integer_in(0, 2**32 - 1), default=7)
    parser.add_argument("--bins", type=integer_in(4, 4096), default=None,
                        help="candidate thresholds per classifier (4 to 4096; default 128, "
                        "placed from the data: grid.edges auto)")
    parser.add_argument(
        "--target-marginal-precision", default=0.3,
        type=bounded("target.marginal_precision"),
        help="precision the next flagged items must reach (the business trade-off)",
    )
    parser.add_argument("--rule", choices=("any", "all"), default="any")
    parser.add_argument(
        "--methods", default="graph,analytic,hull,bucket", help="comma-separated methods"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip writing figures")
    parser.add_argument("--audit-loop", action="store_true",
                        help="then close the loop once: the next day decided with an audit "
                             "sample, rated by a simulated rater, recalibrated with a recall "
                             "floor (OUTPUT/day2/)")
    parser.add_argument("--min-recall", type=bounded("constraints.min_recall"), default=0.6,
                        help="with --audit-loop: the recall floor of the second "
                             "recalibration (default 0.6)")


def config_text(args: argparse.Namespace, *, audited: bool = False) -> str:
    """The demo's run config as a user would write it: the keys that matter for this stream,
    commented; every other key has its default (``costlib config --resolved`` prints them).
    ``audited``: the second day's, which decides with an audit sample and recalibrates on the
    audited rows with a recall floor."""
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    lines = [
        "# The demo's run config: every key not written here has its default;",
        "# costlib config --resolved config.yaml prints them all.",
        "columns:                 # group, item_id, label: the columns of those names",
        "  weight: weight         # rows stand for this many items",
        "  probability: probability  # a calibrated probability, for optimal top-k sets",
        "  set_id: set_id         # the sets top-k decoding picks from",
        *(["  audit_probability: audit_probability  # the audit's inclusion probability"]
          if audited else []),
        "classifiers: [text_model, image_model]  # one score column each",
        f"rule: {args.rule}                # any: flag when a classifier fires; all: every one",
        "target:",
        f"  marginal_precision: {args.target_marginal_precision:g}  # the precision the next "
        "flagged items must reach",
        f"methods: [{', '.join(methods)}]  # ways to choose thresholds, compared per group",
    ]
    if "graph" not in methods:
        lines.append(f"decision_method: {methods[0]}  # the method whose thresholds decide")
    lines += [
        "min_rated:                # a group with fewer rated rows uses the all-groups grid",
        "  positives: 20",
        "  negatives: 20",
    ]
    if args.bins is not None:
        lines.append(f"grid: {{bins: {args.bins}}}  # candidate thresholds per classifier")
    if audited:
        lines += [
            "audit:",
            "  enabled: true           # decide audits a sample of the unflagged rows",
            "  salt: demo-day2         # which rows the sample draws",
            "constraints:",
            f"  min_recall: {args.min_recall:g}         # the recall floor of the points",
            "bootstrap:",
            "  replicates: 20          # for the recall intervals",
        ]
    return "\n".join(lines) + "\n"


def _config(args: argparse.Namespace, *, audited: bool = False):
    import yaml

    from costlib_pipelines.config import RunConfig

    return RunConfig.from_dict(yaml.safe_load(config_text(args, audited=audited)),
                               source="demo")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from costlib.sample import generate_score_stream, write_score_stream
    from costlib_pipelines.commands.summary import points_lines
    from costlib_pipelines.decide.pipeline import run_decide
    from costlib_pipelines.recalibrate.pipeline import run_recalibrate

    out = Path(args.output)
    _claim_output(out)
    config = _config(args)
    stream = generate_score_stream(args.n_items, seed=args.seed)
    write_score_stream(stream, str(out / "input"), n_files=4, row_group_size=25_000)
    (out / "config.yaml").write_text(config_text(args))
    print(f"sample: {len(stream):,} items in 4 Parquet files ({out / 'input'}), "
          f"{int(stream['label'].notna().sum()):,} rated; config {out / 'config.yaml'}")

    pattern = str(out / "input" / "*.parquet")
    recal = run_recalibrate(config, pattern, str(out / "recalibrate"), args.beam_args)
    acc = recal["row_accounting"]
    run_dir = out / "recalibrate" / "runs" / recal["run_id"]
    print(f"\nrecalibrate ({recal['runner']}, {recal['seconds']} s): read {acc['read']:,} = used "
          f"{acc['used']:,} + unrated {acc['unrated']:,} + dead-lettered {acc['dead_lettered']}")
    points = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    for line in points_lines(points, config.classifiers, config.decision_method,
                             config.raw["target"], f"{run_dir}/operating_points.parquet",
                             rule=config.rule):
        print(line)
    others = sorted({p["method"] for p in points} - {config.decision_method})
    if others:
        print(f"(methods {', '.join(others)} are in the same file for comparison; "
              "TP/FP: rated true and false positives the point flags)")

    decide = run_decide(config, pattern, str(out / "recalibrate"), str(out / "decide"),
                        args.beam_args)
    decisions = ds.dataset(
        str(out / "decide" / "runs" / decide["run_id"] / "decisions"), format="parquet"
    ).to_table(columns=["group", "set_id", "threshold_decision", "topk_decision", "k"])
    flagged = pc.sum(pc.cast(decisions.column("threshold_decision"), "int64")).as_py() or 0
    selected = pc.sum(pc.cast(decisions.column("topk_decision"), "int64")).as_py() or 0
    per_set = decisions.select(["set_id", "k"]).to_pandas().groupby("set_id")["k"].first()
    print(f"\ndecide ({decide['seconds']} s): {decisions.num_rows:,} rows decided; the "
          f"{config.decision_method} thresholds above flag {flagged:,}; optimal top-k (F1) "
          f"selects {selected:,} items in {int((per_set > 0).sum()):,} of {len(per_set):,} "
          "sets (columns.set_id; the others select none)")
    print(f"outputs: {run_dir}/ and {out / 'decide' / 'runs' / decide['run_id']}/ "
          "(manifest.json in each, written last)")
    if not args.no_plots:
        _plots(run_dir, points, config, out / "plots")
        print(f"plots: {out / 'plots'}/pn_<group>.png")
    print(f"\nnext: costlib report --run {out / 'recalibrate'}   (the run as a page: "
          "thresholds, PN curves, what changed)\n"
          "      your own data: docs/own_stream.md (a minimal config, the same two commands)")
    if args.audit_loop:
        return _audit_loop(args, config, out)
    return 0


def _audit_loop(args: argparse.Namespace, config, out) -> int:
    """Steps 6-9 of the module docstring; 0, or 3 when the guard held the recalibration."""
    import datetime as dt
    import json

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from costlib.sample import generate_score_stream, write_score_stream
    from costlib.text_table import format_table
    from costlib_pipelines.commands.decide import audit_line
    from costlib_pipelines.decide.pipeline import run_decide
    from costlib_pipelines.decide.records import read_decisions
    from costlib_pipelines.io.ratings import TO_RATE, attach_decisions
    from costlib_pipelines.recalibrate.pipeline import run_recalibrate
    from costlib_pipelines.recalibrate.publish import PublishRefused

    day2 = out / "day2"
    stream = generate_score_stream(args.n_items, seed=args.seed + 1, start="2026-11-15",
                                   first_item_id=args.n_items, truth=True, rating_floor=2.0)
    truth = stream.pop("truth").to_numpy(dtype=bool)
    write_score_stream(stream, str(day2 / "scores"), n_files=2, row_group_size=25_000)
    audited = _config(args, audited=True)
    (day2 / "config.yaml").write_text(config_text(args, audited=True))
    decide = run_decide(audited, str(day2 / "scores" / "*.parquet"), str(out / "recalibrate"),
                        str(day2 / "decide"), args.beam_args)
    print(f"\nday 2: {len(stream):,} new items (none rated yet); decide ({decide['seconds']} s) "
          f"flags {decide['decision_counts'].get('threshold_flagged', 0):,}")
    print(audit_line(decide["audit"]))
    table = pa.Table.from_pandas(stream, preserve_index=False)
    joined = attach_decisions(table, read_decisions(str(day2 / "decide")),
                              undecided=decide["row_accounting"]["dead_lettered"])
    to_rate = joined.column(TO_RATE).to_numpy(zero_copy_only=False)
    labels = pa.array(np.where(to_rate, truth, False), mask=~to_rate, type=pa.bool_())
    rated = joined.set_column(joined.column_names.index("label"), "label", labels)
    (day2 / "rated").mkdir(parents=True, exist_ok=True)
    pq.write_table(rated.drop_columns([TO_RATE]), day2 / "rated" / "rated-0000.parquet",
                   row_group_size=25_000)
    print(f"rater: {int(to_rate.sum()):,} rows rated (flagged or audited), audit_probability "
          f"kept on all {rated.num_rows:,} rows -> {day2 / 'rated'}/")
    code = 0
    run_id = "day2-" + dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    try:
        run_recalibrate(audited, str(day2 / "rated" / "*.parquet"), str(out / "recalibrate"),
                        args.beam_args, run_id=run_id)
    except PublishRefused:
        code = 3
    run_dir = out / "recalibrate" / "runs" / run_id
    recal = json.loads((run_dir / "manifest.json").read_text())
    points = [p for p in pq.read_table(run_dir / "operating_points.parquet").to_pylist()
              if p["method"] == audited.decision_method]
    rows = [[p["group"], p["status"], p["point_status"], *(p["thresholds"] or [None, None]),
             p["estimated_recall"], p["estimated_recall_ci_low"], p["estimated_recall_ci_high"],
             _count(p["estimated_total_positives"]), _count(p["audit_missed_positives_found"]),
             p["audit_share_needed"]] for p in points]
    print(f"recalibrate with the audit weights and min_recall {args.min_recall:g} "
          f"({recal['seconds']} s, {'published' if code == 0 else 'held by the publish guard'}"
          f"): {run_dir}/")
    print(format_table(rows, ["group", "status", "point", "t[text_model]", "t[image_model]",
                              "est. recall", "ci low", "ci high", "P^", "found below",
                              f"audit share for ±{audited.recall['target_half_width']:g}"]))
    return code


#: Marker of a directory ``costlib demo`` owns (it overwrites its input/ and config.yaml).
DEMO_MARKER = ".costlib-demo"


def _claim_output(out) -> None:
    """Refuse a non-empty directory the demo did not create (its files would be overwritten)."""
    from costlib_pipelines.io.files import InputError

    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not (out / DEMO_MARKER).exists():
        raise InputError(f"{out}: not empty and not a costlib demo output; the demo would "
                         "overwrite its input/ and config.yaml: choose another --output")
    out.mkdir(parents=True, exist_ok=True)
    (out / DEMO_MARKER).write_text("written by costlib demo\n")


def _plots(run_dir, points, config, directory) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    from costlib.thresholds.plots import CurveSpec, draw_pn_curves

    curves = pq.read_table(run_dir / "pn_curves.parquet").to_pylist()
    slope = config.target.slope
    for group in sorted({c["group"] for c in curves}):
        specs = []
        for c in (c for c in curves if c["group"] == group):
            point = next(p for p in points if p["group"] == group and p["method"] == c["method"])
            specs.append(CurveSpec(
                label=c["method"], method=c["method"], kind=c["curve_kind"],
                curve_fp=np.array(c["fp"]), curve_tp=np.array(c["tp"]), fp=point["fp"],
                tp=point["tp"], thresholds=tuple(point["thresholds"]),
                objective=point["tp"] - slope * point["fp"],
            ))
        draw_pn_curves(specs, config.target, directory / f"pn_{group}.png",
                       title=f"PN curves — {group}")


def _count(value: float | None) -> str | None:
    """A count (or an estimated count) as an integer with thousands separators."""
    return None if value is None else f"{round(value):,}"
