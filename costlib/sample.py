"""A generated rare-event score stream: several groups, several classifiers, rated positives only.

The generator mimics what trust-and-safety data looks like: a small prevalence of bad items,
k classifiers that each look at a different aspect of an item (their errors are only partly
shared), classifiers that do not score every item, and human labels only for items some
classifier scored above a low *rating floor* (plus nothing else: true and false negatives are
never observed).

Model, per item: ``y ~ Bernoulli(prevalence_g)``; for classifier ``j`` a latent
``z_j = separation_j * y + sqrt(rho) * u + sqrt(1 - rho) * e_j`` with shared ``u`` and
independent ``e_j`` (standard normal); score ``s_j = sigmoid(z_j - 2)``; a classifier scores the
item with probability ``coverage_j``. The item is rated (its label known) iff some classifier
scored it at or above ``rating_floor``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from costlib._messages import plain

__all__ = ["generate_score_stream", "rated_arrays", "write_score_stream"]


def generate_score_stream(
    n_items: int = 200_000,
    *,
    groups: Sequence[str] = ("market_a", "market_b", "market_c"),
    classifiers: Sequence[str] = ("text_model", "image_model"),
    prevalence: Sequence[float] | float = (0.006, 0.003, 0.012),
    separation: Sequence[float] | float = (3.2, 2.8),
    coverage: Sequence[float] | float = (0.95, 0.8),
    correlation: float = 0.2,
    rating_floor: float = 0.5,
    start: str = "2026-11-01",
    days: int = 14,
    set_size: int = 20,
    seed: int = 0,
    first_item_id: int = 0,
    truth: bool = False,
) -> pd.DataFrame:
    """Generate a score stream (see the module docstring for the model).

    The same arguments give the same rows (one ``numpy.random.default_rng(seed)`` draws them
    all, in a fixed order).

    Parameters
    ----------
    n_items : int
        Rows, one per scored item.
    groups : sequence of str
        Group names; each item belongs to one, uniformly at random. Scores shift a little from
        group to group, so each group's best thresholds differ.
    classifiers : sequence of str
        Score column names, ``k`` of them.
    prevalence : float or sequence of float
        ``P(y = 1)`` per group (one value: every group).
    separation : float or sequence of float
        Per classifier, how far the positives' latent score sits above the negatives' (in
        standard deviations of the latent noise; one value: every classifier).
    coverage : float or sequence of float
        Per classifier, the probability that it scores an item at all (NaN otherwise).
    correlation : float
        ``rho`` in ``[0, 1)``: the share of the latent noise all classifiers share.
    rating_floor : float
        An item is rated (its label known) iff some classifier scored it at or above this.
    start : str
        First day of the stream (UTC); event times are uniform over ``days`` days from it.
    days : int
        Days the event times span.
    set_size : int
        Items per set (``set_id``) within a group, for top-k decoding.
    seed : int
        Seed of the random generator.
    first_item_id : int
        Item ids are ``first_item_id, first_item_id + 1, ...`` (another day of the same
        stream gets other ids).
    truth : bool
        Add a ``truth`` column (bool, every item's ``y``): the labels a simulated rater returns
        for the rows it is asked to rate (``costlib demo --audit-loop``); a real stream has
        none.

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` (str), ``item_id`` (int64), ``event_time`` (UTC timestamp), one float
        column per classifier (NaN = did not score), ``label`` (nullable boolean, NA = not
        rated), ``weight`` (float, 1.0), ``probability`` (approximately calibrated P(bad)) and
        ``set_id`` (str; items come in sets of ``set_size`` within a group). Rows are in
        event-time order.

    Raises
    ------
    ValueError
        ``correlation`` outside ``[0, 1)``.
    """
    rng = np.random.default_rng(seed)
    k = len(classifiers)
    n_groups = len(groups)
    prevalences = np.broadcast_to(np.asarray(prevalence, dtype=float), (n_groups,))
    separations = np.broadcast_to(np.asarray(separation, dtype=float), (k,))
    coverages = np.broadcast_to(np.asarray(coverage, dtype=float), (k,))
    if not 0 <= correlation < 1:
        raise ValueError(f"correlation must be in [0, 1), got {plain(correlation)}")

    group_index = rng.integers(0, n_groups, size=n_items)
    y = rng.random(n_items) < prevalences[group_index]
    shared = rng.standard_normal(n_items)
    scores = np.empty((n_items, k))
    for j in range(k):
        # Each group shifts the score distribution a little: thresholds differ per group.
        shift = 0.25 * (group_index - (n_groups - 1) / 2) * (1 if j % 2 == 0 else -1)
        latent = (
            separations[j] * y
            + np.sqrt(correlation) * shared
            + np.sqrt(1 - correlation) * rng.standard_normal(n_items)
            + shift
        )
        scores[:, j] = 1.0 / (1.0 + np.exp(-(latent - 2.0)))
        scores[rng.random(n_items) >= coverages[j], j] = np.nan
    rated = (np.nan_to_num(scores, nan=-np.inf) >= rating_floor).any(axis=1)
    seconds = rng.integers(0, days * 86400, size=n_items)
    frame = pd.DataFrame(
        {
            "group": np.asarray(groups, dtype=object)[group_index],
            "item_id": np.arange(first_item_id, first_item_id + n_items, dtype=np.int64),
            "event_time": pd.Timestamp(start, tz="UTC") + pd.to_timedelta(seconds, unit="s"),
        }
    )
    for j, name in enumerate(classifiers):
        frame[name] = scores[:, j]
    frame["label"] = pd.array(np.where(rated, y, False), dtype="boolean")
    frame.loc[~rated, "label"] = pd.NA
    frame["weight"] = 1.0
    # P(bad | observed scores) under the model with the shared noise ignored (so only
    # approximately calibrated), for top-k decoding: log-odds add up over scoring classifiers.
    latent = np.log(scores / (1 - scores)) + 2.0
    shift_free = np.nan_to_num(separations * latent - separations**2 / 2, nan=0.0)
    base = np.log(prevalences[group_index] / (1 - prevalences[group_index]))
    frame["probability"] = 1.0 / (1.0 + np.exp(-(base + shift_free.sum(axis=1))))
    # Items arrive in sets (e.g. the posts of one request) of ``set_size`` within a group.
    order = np.argsort(group_index, kind="stable")
    position = np.empty(n_items, dtype=np.int64)
    position[order] = np.arange(n_items)
    set_number = position // set_size
    frame["set_id"] = [f"{g}-{s}" for g, s in zip(frame["group"], set_number, strict=True)]
    if truth:
        frame["truth"] = y
    return frame.sort_values("event_time", kind="stable").reset_index(drop=True)


def rated_arrays(
    frame: pd.DataFrame, classifiers: Sequence[str]
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64], NDArray[Any]]:
    """Rated rows of a score stream as ``(scores (n, k), labels, weights, item_ids)``.

    Null scores become ``-inf`` ("did not score": the classifier never fires on the item).

    Parameters
    ----------
    frame : pandas.DataFrame
        A score stream with the columns of :func:`generate_score_stream` (``weight`` may be
        missing: every row weighs 1).
    classifiers : sequence of str
        The score columns, in threshold order.

    Returns
    -------
    tuple of numpy.ndarray
        ``scores`` (float, ``(n, k)``), ``labels`` (bool), ``weights`` (float) and
        ``item_ids`` of the ``n`` rows whose label is not null, in the frame's order.
    """
    rated = frame["label"].notna().to_numpy()
    sub = frame.loc[rated]
    scores = sub[list(classifiers)].to_numpy(dtype=np.float64, na_value=-np.inf)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    labels = sub["label"].to_numpy(dtype=bool)
    weights = sub["weight"].to_numpy(dtype=np.float64) if "weight" in sub else np.ones(len(sub))
    return scores, labels, weights, sub["item_id"].to_numpy()


def write_score_stream(
    frame: pd.DataFrame, directory: str, *, n_files: int = 4, row_group_size: int = 50_000
) -> list[str]:
    """Write a score stream as ``n_files`` Parquet files (contiguous slices); returns paths.

    The files are ``DIRECTORY/scores-0000.parquet``, ``scores-0001.parquet``, ... (the directory
    is created), the input ``costlib recalibrate`` and ``costlib decide`` read. Needs pyarrow
    (the ``pipelines`` extra).

    Parameters
    ----------
    frame : pandas.DataFrame
        The stream, e.g. from :func:`generate_score_stream`.
    directory : str
        Where to write the files.
    n_files : int
        Files to write: row ranges of (nearly) equal length, in the frame's order.
    row_group_size : int
        Rows per Parquet row group (the pipelines read one row group at a time).

    Returns
    -------
    list of str
        The paths written.
    """
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    bounds = np.linspace(0, len(frame), n_files + 1).astype(int)
    paths = []
    for i, (a, b) in enumerate(itertools.pairwise(bounds)):
        path = out / f"scores-{i:04d}.parquet"
        pq.write_table(table.slice(a, b - a), path, row_group_size=row_group_size)
        paths.append(str(path))
    return paths
