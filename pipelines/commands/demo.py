"""``costlib demo``: the main job on a built-in generated sample.

Generates a multi-group, two-classifier rare-event score stream (see :mod:`costlib.sample`),
builds one threshold grid per group and the all-groups grid from the rated rows, chooses the
operating point of every method per group, prints them, and writes the operating points as JSON
lines and the figures (PN curves, threshold surfaces) to ``--output``.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", default="costlib-out", help="directory for results and plots")
    parser.add_argument("--n-items", type=int, default=300_000, help="items in the sample")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bins", type=int, default=64, help="quantile edges per classifier")
    parser.add_argument(
        "--target-marginal-precision", type=float, default=0.3,
        help="precision the next flagged items must reach (the business trade-off)",
    )
    parser.add_argument("--rule", choices=("any", "all"), default="any")
    parser.add_argument(
        "--methods", default="graph,analytic,hull,bucket", help="comma-separated methods"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip writing figures")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from costlib.edges import quantile_edges
    from costlib.grid import ThresholdGrid
    from costlib.operating_point import optimize
    from costlib.sample import generate_score_stream, rated_arrays
    from costlib.text_table import format_table

    classifiers = ("text_model", "image_model")
    stream = generate_score_stream(args.n_items, classifiers=classifiers, seed=args.seed)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)

    scores = rated_arrays(stream, classifiers)[0]
    edges = [quantile_edges(scores[:, j], args.bins) for j in range(len(classifiers))]
    grids = {}
    for group, frame in stream.groupby("group", sort=True):
        s, y, w, _ = rated_arrays(frame, classifiers)
        grids[str(group)] = ThresholdGrid.from_scores(s, y, edges, w, names=classifiers)
    grids["ALL"] = sum(grids.values(), ThresholdGrid.empty(edges, names=classifiers))

    print(
        f"sample: {len(stream):,} items, {int(stream['label'].notna().sum()):,} rated, "
        f"{len(grids) - 1} groups; target marginal precision {args.target_marginal_precision}, "
        f"rule '{args.rule}'"
    )
    rows = []
    records = []
    for group, grid in grids.items():
        points = {
            m: optimize(
                grid, target_marginal_precision=args.target_marginal_precision,
                rule=args.rule, method=m,
            )
            for m in methods
        }
        for m, p in points.items():
            rows.append(
                [group, m, *p.thresholds, p.tp, p.fp, p.precision,
                 p.marginal_precision_left, p.marginal_precision_right, p.objective]
            )
            records.append({"group": group, **p.summary()})
        if not args.no_plots:
            from costlib.threshold_plots import plot_pn_curves, plot_threshold_surfaces

            plot_pn_curves(points, out / f"pn_{group}.png", title=f"PN curves — {group}")
            plot_threshold_surfaces(grid, points, out / f"surfaces_{group}.png")
    header = ["group", "method", *[f"t[{c}]" for c in classifiers], "TP", "FP", "precision",
              "mp_left", "mp_right", "TP-r*FP"]
    print(format_table(rows, header))
    with open(out / "operating_points.jsonl", "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec, default=float) + "\n")
    plots = "" if args.no_plots else f" and plots in {out}/"
    print(f"wrote {out / 'operating_points.jsonl'}{plots}")
    return 0
