"""Shared helpers for pipeline tests: small score streams on disk and direct costlib truth."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from costlib.sample import generate_score_stream
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._recalibration import recalibrate_grids
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.records import operating_point_records, point_settings

CLASSIFIERS = ("text_model", "image_model")


#: A raw run config with the default (auto) edges: no grid section.
AUTO_CONFIG = {
    "columns": {"weight": "weight"},
    "classifiers": list(CLASSIFIERS),
    "target": {"marginal_precision": 0.3},
    "methods": ["graph", "hull"],
    "min_rated": {"positives": 5, "negatives": 5},
}

#: A small raw run config (one method, 16 bins) for tests of inputs and plausibility.
SMALL_CONFIG = {
    "columns": {"weight": "weight"},
    "classifiers": list(CLASSIFIERS),
    "grid": {"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
    "target": {"marginal_precision": 0.3},
    "methods": ["graph"],
    "min_rated": {"positives": 5, "negatives": 5},
}


def base_config(**overrides) -> RunConfig:
    raw = {
        "columns": {"weight": "weight"},
        "classifiers": list(CLASSIFIERS),
        "rule": "any",
        "grid": {"edges": "uniform", "bins": 24, "range": [0.0, 1.0]},
        "target": {"marginal_precision": 0.3},
        "methods": ["graph", "hull", "bucket", "analytic"],
        "min_rated": {"positives": 5, "negatives": 5},
    }
    raw.update(overrides)
    return RunConfig.from_dict(raw)


def sample_frame(n: int = 30_000, seed: int = 0):
    frame = generate_score_stream(n, seed=seed)
    # Non-trivial weights (inverse rating probabilities) exercise the exact weighted sums.
    frame["weight"] = np.where(frame["item_id"] % 3 == 0, 2.5, 1.0)
    return frame


def write_files(frame, directory, *, n_files=3, row_group_size=4000, reverse=False):
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    bounds = np.linspace(0, len(frame), n_files + 1).astype(int)
    order = list(range(n_files))[::-1] if reverse else range(n_files)
    for i in order:
        a, b = bounds[i], bounds[i + 1]
        pq.write_table(table.slice(a, b - a), directory / f"part-{i}.parquet",
                       row_group_size=row_group_size)
    return str(directory / "*.parquet")


def direct_grids(frame, config: RunConfig, edges=None) -> dict[str, ThresholdGrid]:
    """Grids per group straight from ``ThresholdGrid.from_scores`` on the frame's rows.

    Unrated rows (label null) go to the grids' unrated channel; groups without a rated row get
    no grid (the pipeline gives them no operating point). With ``columns.audit_probability``
    the rows' inclusion probabilities are passed on (Horvitz–Thompson weights, audit coverage).
    """
    edges = edges if edges is not None else config.fixed_edges()
    grids = {}
    for group, rows in frame.groupby("group"):
        if not rows["label"].notna().any():
            continue
        scores = rows[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
        scores = np.where(np.isnan(scores), -np.inf, scores)
        audit = config.columns.get("audit_probability")
        grids[group] = ThresholdGrid.from_scores(
            scores, rows["label"].astype(object).to_numpy(), edges, rows["weight"].to_numpy(),
            names=config.classifiers,
            audit_probabilities=rows[audit].to_numpy(dtype=float, na_value=np.nan)
            if audit else None,
        )
    return grids


def direct_records(frame, config: RunConfig, edges=None):
    """Operating point records computed by calling costlib directly on the rows."""
    results = recalibrate_grids(
        direct_grids(frame, config, edges), config.decision, methods=config.methods,
        min_positives=config.min_positives,
        min_negatives=config.min_negatives, fallback=config.fallback,
        policy=config.policy,
    )
    records = []
    for name in sorted(results):
        records += operating_point_records(
            results[name], rule=config.rule, classifiers=config.classifiers,
            target_marginal_precision=config.target.marginal_precision, run_id="direct",
            config_digest=config.digest, settings=point_settings(config),
        )
    return records


#: The capacity fields of a record of any method but ``capacity``.
CAPACITY_NULLS = {"capacity": None, "capacity_status": None, "capacity_multiplier": None,
                  "allocated_volume": None, "allocated_utility": None, "capacity_share": None,
                  "volume_scale": None}


def coverage_fields(point_status=None, reason=None) -> dict:
    """The coverage, objective and constraint fields of a hand-made operating point record.

    Default: as a record written before these fields existed would read (no point status,
    linear objective, nothing constrained).
    """
    return {
        "volume": None, "unrated": None, "coverage": None, "point_status": point_status,
        "reason": reason, "reason_code": None, "unrestricted_thresholds": None,
        "unrestricted_tp": None,
        "unrestricted_fp": None, "unrestricted_unrated": None, "objective": "linear",
        "objective_beta": None, "objective_volume": None, "objective_value": None,
        "max_unrated_share": None, "min_precision": None, "max_volume": None,
        "max_false_positives": None, "min_recall": None, "estimated_total_positives": None,
        "estimated_recall": None, "estimated_recall_ci_low": None,
        "estimated_recall_ci_high": None, "estimated_total_positives_ci_low": None,
        "estimated_total_positives_ci_high": None, "finer_bound": None,
        "proposed_thresholds": None, **CAPACITY_NULLS, **RECALL_NULLS,
        "rated_positive_rows": None, "rated_negative_rows": None, "weight_unit": "rows",
    }


#: The recall-interval and audit-evidence fields of a record without audit data.
RECALL_NULLS = {"recall_bound": None, "recall_interval": None,
                "audit_missed_positives_found": None, "audit_missed_audited": None,
                "audit_strata_pi": None, "audit_strata_rows": None, "audit_strata_audited": None,
                "audit_strata_positives": None, "recall_warning": None,
                "audit_share_needed": None}


def comparable(records):
    """Records without the run id, sorted by (group, method)."""
    out = [{k: v for k, v in r.items() if k != "run_id"} for r in records]
    return sorted(out, key=lambda r: (r["group"], r["method"]))


def write_day_files(directory, *, rows: int, seed: int, days: int = 5,
                    split_day: int | None = None, start="2026-11-01"):
    """The demo stream over ``days`` days of event time, one Parquet file a day
    (``day<N>.parquet``, row groups of 2,000 rows) in ``directory``; day ``split_day`` in two
    halves, ``day<N>a`` and ``day<N>b`` (a file that can land late)."""
    import pandas as pd

    frame = sample_frame(rows, seed=seed)
    frame["event_time"] = (pd.Timestamp(start, tz="UTC")
                           + pd.to_timedelta(frame.index % days, unit="D")
                           + pd.to_timedelta((frame.index * 7) % 86_000, unit="s"))
    directory.mkdir(parents=True, exist_ok=True)
    for day in range(days):
        part = frame[frame.index % days == day]
        pieces = ({f"day{day}a": part.iloc[: len(part) // 2],
                   f"day{day}b": part.iloc[len(part) // 2:]}
                  if day == split_day else {f"day{day}": part})
        for name, piece in pieces.items():
            pq.write_table(pa.Table.from_pandas(piece, preserve_index=False),
                           directory / f"{name}.parquet", row_group_size=2_000)
    return frame
