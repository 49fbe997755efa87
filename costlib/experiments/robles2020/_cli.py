"""The command line of the Robles et al. (2020) reproduction: ``costlib reproduce robles2020``.

:func:`main` parses the options into a :class:`~costlib.experiments.robles2020.Config`, runs the
experiments, prints the report and, with ``--plots DIR``, writes the figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from costlib.experiments.robles2020._classifiers import CLASSIFIER_TYPES
from costlib.experiments.robles2020._datasets import DATASETS
from costlib.experiments.robles2020._experiment import Config, run
from costlib.experiments.robles2020._report import report, write_plots

__all__ = ["main"]


def _csv(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(t.strip() for t in text.split(",") if t.strip())
        bad = [t for t in items if t not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad) or 'empty list'}; choose from {', '.join(choices)}"
            )
        return items

    return parse


def main(argv: list[str]) -> int:
    """Command line: ``costlib reproduce robles2020 [options]``; prints the table.

    Parameters
    ----------
    argv : list of str
        Options (see ``--help``).

    Returns
    -------
    int
        Exit status, 0 on success.
    """
    parser = argparse.ArgumentParser(
        prog="costlib reproduce robles2020",
        description="Reproduce the protocol of Robles et al. (2020), Table 1, on data sets "
        "that come with scikit-learn (generated rare-event sets and digits).",
    )
    parser.add_argument("--quick", action="store_true",
                        help="smaller generated sets and no tuning (a few seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed of data, split and models")
    parser.add_argument("--target", type=float, default=0.5,
                        help="target marginal precision m in (0, 1); default 0.5 (TP - FP)")
    parser.add_argument("--floor-quantile", type=float, default=0.9,
                        help="rating floor: quantile of each classifier's training scores "
                        "(0 rates every row); default 0.9")
    parser.add_argument("--bins", type=int, default=64,
                        help="candidate thresholds per classifier; default 64")
    parser.add_argument("--edges", choices=("quantile", "uniform"), default="quantile")
    parser.add_argument("--folds", type=int, default=3, help="folds of the out-of-fold scores")
    parser.add_argument("--in-sample", action="store_true",
                        help="build the grid from in-sample training scores (the paper's "
                        "literal protocol) instead of out-of-fold scores")
    parser.add_argument("--buckets", type=int, default=50,
                        help="FP buckets of the bucket baseline; default 50")
    parser.add_argument("--no-tune", action="store_true", help="skip the small grid searches")
    parser.add_argument("--datasets", type=_csv(tuple(DATASETS)), default=tuple(DATASETS),
                        # argparse formats help with %: the data set names hold '%'
                        help=f"comma-separated subset of {','.join(DATASETS)}".replace("%", "%%"))
    parser.add_argument("--types", type=_csv(tuple(CLASSIFIER_TYPES)),
                        default=tuple(CLASSIFIER_TYPES),
                        help=f"comma-separated subset of {','.join(CLASSIFIER_TYPES)}")
    parser.add_argument("--verbose", action="store_true",
                        help="also print the training-side operating points")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="write PN-curve and threshold-surface figures to DIR")
    parser.add_argument("--plot-type", choices=tuple(CLASSIFIER_TYPES), default="hgb",
                        help="classifier type to plot; default hgb")
    args = parser.parse_args(argv)
    if not 0.0 < args.target < 1.0:
        parser.error("--target must be in (0, 1)")
    if not 0.0 <= args.floor_quantile < 1.0:
        parser.error("--floor-quantile must be in [0, 1)")
    if args.bins < 1 or args.folds < 2 or args.buckets < 1:
        parser.error("--bins and --buckets must be >= 1, --folds >= 2")
    config = Config(
        quick=args.quick,
        seed=args.seed,
        target=args.target,
        floor_quantile=args.floor_quantile,
        bins=args.bins,
        edges=args.edges,
        folds=args.folds,
        in_sample=args.in_sample,
        n_buckets=args.buckets,
        tune=not args.no_tune,
        datasets=args.datasets,
        types=args.types,
    )
    rep = run(config)
    print(report(rep, verbose=args.verbose))
    if args.plots is not None:
        if args.plot_type not in config.types:
            parser.error(f"--plot-type {args.plot_type} is not among --types")
        for path in write_plots(rep, args.plots, args.plot_type):
            print(f"wrote {path}")
    return 0
