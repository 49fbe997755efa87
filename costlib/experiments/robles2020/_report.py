"""The report of the Robles et al. (2020) reproduction: Table 1, the summary, and figures.

:func:`table_rows` lays the hold-out results out as the paper's Table 1, :func:`summary` gives
the mean change of precision, recall and F1 of the best proposed method (:data:`PROPOSED`)
against the average single classifier, :func:`report` is the printed text and
:func:`write_plots` draws the PN curves and threshold surfaces of one classifier type.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from costlib.experiments.robles2020._classifiers import CLASSIFIER_TYPES
from costlib.experiments.robles2020._experiment import Reproduction
from costlib.experiments.robles2020._results import METHOD_LABELS, MethodResult
from costlib.text_table import format_table

__all__ = ["PROPOSED", "report", "summary", "table_rows", "write_plots"]

PROPOSED = ("analytic", "graph")


def _fmt(value: float) -> str:
    return "-" if value != value else f"{value:.4f}"


def table_rows(rep: Reproduction) -> list[list[str]]:
    """Rows of the paper's Table 1 layout (Dataset, Ensemble, Classifier, P, R, F1)."""
    rows: list[list[str]] = []
    last_ds, last_type = None, None
    for res in rep.results:
        for r in res.rows:
            ds = res.dataset if res.dataset != last_ds else ""
            ens = (
                CLASSIFIER_TYPES[res.clf_type].label
                if (res.dataset, res.clf_type) != (last_ds, last_type)
                else ""
            )
            last_ds, last_type = res.dataset, res.clf_type
            rows.append([ds, ens, r.label, _fmt(r.precision), _fmt(r.recall), _fmt(r.f1)])
    return rows


def _f1_or_zero(r: MethodResult) -> float:
    return 0.0 if r.f1 != r.f1 else r.f1


def summary(rep: Reproduction, methods: Sequence[str] | None = None) -> dict[str, float]:
    """Mean change (in points) of precision, recall and F1 against the mean single classifier.

    Parameters
    ----------
    rep : Reproduction
    methods : sequence of str, optional
        Method keys to choose from per experiment (the one with the highest hold-out F1 is
        used); default the paper's proposed methods, analytic and graph.

    Returns
    -------
    dict
        ``precision``, ``recall``, ``f1`` (mean differences x 100) and ``n`` experiments, with
        ``n_precision`` the number where both precisions are defined.
    """
    methods = tuple(methods or PROPOSED)
    d_p: list[float] = []
    d_r: list[float] = []
    d_f: list[float] = []
    for res in rep.results:
        best = max(
            (res.row(METHOD_LABELS[m]) for m in methods), key=_f1_or_zero
        )  # max keeps the first on ties: analytic before graph
        singles = res.rows[-2:]
        p_single = [s.precision for s in singles if s.precision == s.precision]
        if best.precision == best.precision and p_single:
            d_p.append(best.precision - float(np.mean(p_single)))
        d_r.append(best.recall - float(np.mean([s.recall for s in singles])))
        d_f.append(_f1_or_zero(best) - float(np.mean([_f1_or_zero(s) for s in singles])))
    return {
        "precision": 100 * float(np.mean(d_p)) if d_p else float("nan"),
        "recall": 100 * float(np.mean(d_r)),
        "f1": 100 * float(np.mean(d_f)),
        "n": len(d_r),
        "n_precision": len(d_p),
    }


def _signed(value: float) -> str:
    return "n/a" if value != value else f"{value:+.1f}"


def report(rep: Reproduction, *, verbose: bool = False) -> str:
    """The printed report: data sets, Table 1, the summary and (verbose) the training side."""
    cfg = rep.config
    lines = [
        "Robles et al. (2020), Table 1 protocol: two classifiers of one type on disjoint PCA "
        "feature subsets, union rule,",
        f"rating floor = {cfg.floor_quantile:g} quantile of each classifier's training scores, "
        f"target marginal precision m = {cfg.target:g} "
        f"(TP - {cfg.target / (1 - cfg.target):.4g} FP), {cfg.bins} {cfg.edges} edges per "
        f"classifier, "
        + ("in-sample" if cfg.in_sample else f"{cfg.folds}-fold out-of-fold")
        + f" training scores, {cfg.n_buckets} FP buckets, seed {cfg.seed}"
        + (", --quick" if cfg.quick else "")
        + ".",
        "",
    ]
    ds_rows = []
    for ds in rep.datasets:
        ds_rows.append(
            [ds.name, ds.description, f"{ds.y.size:,}", f"{int(ds.y.sum())}",
             f"{100 * ds.prevalence:.2f}%", str(ds.n_components)]
        )
    lines.append(
        format_table(ds_rows, ["Dataset", "Source", "Rows", "Positives", "Prevalence", "PCA"])
    )
    lines += ["", "Table 1 (hold-out H, 25%):", ""]
    lines.append(
        format_table(
            table_rows(rep), ["Dataset", "Ensemble", "Classifier", "Precision", "Recall", "F1"]
        )
    )
    best = summary(rep)
    lines += [
        "",
        "Summary: best proposed method (analytic or graph, higher hold-out F1) vs. the average "
        f"of the two single classifiers over {best['n']} experiments: precision "
        f"{_signed(best['precision'])} points (over {best['n_precision']} with both defined), "
        f"recall {_signed(best['recall'])} points, F1 {_signed(best['f1'])} points "
        "(paper: precision +5.1%, recall -1.6%, F1 +1.5%).",
    ]
    per_method = []
    for key, label in METHOD_LABELS.items():
        s = summary(rep, [key])
        per_method.append(
            [label, _signed(s["precision"]), _signed(s["recall"]), _signed(s["f1"])]
        )
    lines += ["", "Mean change per method vs. the average single classifier (points):", ""]
    lines.append(format_table(per_method, ["Method", "Precision", "Recall", "F1"]))
    if verbose:
        lines += ["", "Training side (rated out-of-fold scores on T):", ""]
        detail = []
        for res in rep.results:
            for key, p in res.points.items():
                detail.append(
                    [res.dataset, CLASSIFIER_TYPES[res.clf_type].label, key,
                     f"{res.n_rated}/{res.n_train}",
                     f"{res.rated_positives}/{res.train_positives}",
                     p.thresholds[0], p.thresholds[1], p.tp, p.fp, p.objective]
                )
        lines.append(
            format_table(
                detail,
                ["Dataset", "Ensemble", "Method", "Rated", "Rated pos", "t1", "t2", "TP", "FP",
                 "TP - r FP"],
            )
        )
    lines += ["", f"Run time {rep.seconds:.1f} s."]
    return "\n".join(lines)


def write_plots(rep: Reproduction, directory: Path, type_key: str) -> list[Path]:
    """PN curves and threshold surfaces for every data set, for one classifier type."""
    from costlib.thresholds.plots._plots import plot_pn_curves, plot_threshold_surfaces

    written: list[Path] = []
    for res in rep.results:
        if res.clf_type != type_key:
            continue
        stem = f"robles2020_{res.dataset.replace('%', 'pct')}_{type_key}"
        pn = directory / f"{stem}_pn.png"
        surfaces = directory / f"{stem}_surfaces.png"
        plot_pn_curves(res.points, pn, title=f"{res.dataset}, {CLASSIFIER_TYPES[type_key].label}")
        plot_threshold_surfaces(res.grid, res.points, surfaces)
        written += [pn, surfaces]
    return written
