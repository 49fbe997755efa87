"""The partial grids one batch gives (``AggregateBatchesFn.histograms``) against brute force.

Truth: ``ThresholdGrid.from_scores`` on each group's rows (and on all rows), and the rated rows
counted directly from the labels. Covers unweighted batches (rated rows read off the partial
counts), weighted ones (counted per row), batches with and without unrated rows.
"""

import numpy as np
import pyarrow as pa
import pytest
from pipeline_data import base_config, sample_frame

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._recalibration import ALL_GROUPS
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.recalibrate.aggregating import AggregateBatchesFn


def _truth(frame, config, weighted):
    """(grid, rated rows) per group and for all groups, straight from the rows."""
    edges = config.fixed_edges()
    out = {}
    for group, rows in [*frame.groupby("group"), (ALL_GROUPS, frame)]:
        scores = rows[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
        scores = np.where(np.isnan(scores), -np.inf, scores)
        grid = ThresholdGrid.from_scores(
            scores, rows["label"].astype(object).to_numpy(), edges,
            rows["weight"].to_numpy() if weighted else None, names=config.classifiers)
        out[group] = (grid, int(rows["label"].notna().sum()))
    return out


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("all_rated", [False, True])
def test_partials_and_rated_rows_equal_the_rows(weighted, all_rated):
    frame = sample_frame(3000, seed=11)
    if all_rated:  # rate every row some classifier scored (the others are dead letters)
        frame = frame[frame[["text_model", "image_model"]].notna().any(axis=1)].copy()
        frame["label"] = frame["label"].fillna(False).astype(bool)
    assert frame["label"].isna().any() != all_rated
    config = base_config(columns={"weight": "weight" if weighted else None})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    batch = validate_batch(table, config, source="mem", row_group=0)
    assert batch.dead_letters is None  # every row valid: the truth below uses them all
    fn = AggregateBatchesFn(config, None, windowed=False, with_bootstrap=False)
    outputs = dict(fn.histograms(batch, config.fixed_edges()))
    expected = _truth(frame, config, weighted)
    assert set(outputs) == set(expected)
    for group, (shape, counts, rated, audited, positive_rows, negative_rows) in outputs.items():
        assert shape == tuple(e.size + 1 for e in config.fixed_edges())
        grid, rated_rows = expected[group]
        assert rated == rated_rows, group
        assert audited == 0
        # rows of evidence, one each whatever the weight, counted from the labels directly
        labels = (frame if group == ALL_GROUPS else frame[frame["group"] == group])["label"]
        w = (frame if group == ALL_GROUPS else frame[frame["group"] == group])["weight"]
        entered = labels.notna() & ((w > 0) if weighted else True)
        assert positive_rows == int((entered & (labels == True)).sum()), group  # noqa: E712
        assert negative_rows == int((entered & (labels == False)).sum()), group  # noqa: E712
        assert (positive_rows, negative_rows) == (grid.positive_rows, grid.negative_rows)
        assert counts.channels == (2 if all_rated else 3)
        assert counts.to_grid(config.fixed_edges(), names=config.classifiers) == grid, group


def test_partials_with_audit_data_equal_the_rows_census_and_design_included():
    """With an audit column the partials carry every channel of the library grid: the
    Horvitz–Thompson variance, the design and the census of rows rated with p = 1."""
    from test_pipeline_audit_estimation import AUDIT, audited_frame

    frame = audited_frame(4000, seed=3)
    config = base_config(columns=AUDIT)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    batch = validate_batch(table, config, source="mem", row_group=0)
    assert batch.dead_letters is None  # unscored audit rows count in P̂ (scores -inf)
    fn = AggregateBatchesFn(config, None, windowed=False, with_bootstrap=False)
    outputs = dict(fn.histograms(batch, config.fixed_edges()))
    edges = config.fixed_edges()
    for group, rows in [*frame.groupby("group"), (ALL_GROUPS, frame)]:
        scores = rows[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
        grid = ThresholdGrid.from_scores(
            np.where(np.isnan(scores), -np.inf, scores), rows["label"].astype(object).to_numpy(),
            edges, rows["weight"].to_numpy(), names=config.classifiers,
            audit_probabilities=rows["audit_p"].to_numpy())
        got = outputs[group][1].to_grid(edges, names=config.classifiers,
                                        audited_rows=grid.audited_rows)
        assert outputs[group][4:] == (grid.positive_rows, grid.negative_rows), group
        assert got.census is not None and grid.census is not None
        assert got == grid, group
        certain = rows["label"].notna().to_numpy() & (rows["audit_p"].to_numpy() == 1)
        assert got.census[:2].sum() == pytest.approx(rows["weight"].to_numpy()[certain].sum())
