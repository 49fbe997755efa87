"""A scikit-learn scorer that routes per-example costs into the decision and the metric.

``make_scorer(savings_score).set_score_request(cost_matrix=True)`` gives the costs to the metric
only: the scorer calls ``estimator.predict(X)`` without them, so an estimator that decides with
each example's costs (:class:`~costlib.estimators.BayesMinimumRiskClassifier`) cannot use them.
:func:`make_cost_scorer` passes the same fold's costs to both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from numpy.typing import ArrayLike

from costlib.costs._example_costs import savings_score

__all__ = ["CostScorer", "make_cost_scorer"]


def predict_takes_costs(estimator: Any) -> bool:
    """Whether ``estimator.predict`` accepts ``cost_matrix`` (a ``Pipeline``: its last step)."""
    steps = getattr(estimator, "steps", None)
    if steps:
        return predict_takes_costs(steps[-1][1])
    predict = getattr(estimator, "predict", None)
    if predict is None:
        return False
    try:
        params = inspect.signature(predict).parameters
    except (TypeError, ValueError):
        return False
    return "cost_matrix" in params


class CostScorer:
    """``scorer(estimator, X, y, *, cost_matrix, sample_weight=None) -> float``.

    Predicts with ``estimator.predict(X, cost_matrix=cost_matrix)`` when the estimator's
    ``predict`` takes costs (else ``predict(X)``: the costs were learnt at fit), then returns
    ``sign * metric(y, y_pred, cost_matrix, **kwargs)``. It requests ``cost_matrix`` and
    ``sample_weight`` through scikit-learn's metadata routing, so ``cross_val_score``,
    ``cross_validate`` and ``GridSearchCV`` hand it each test fold's rows of the costs. Build
    it with :func:`make_cost_scorer`.
    """

    def __init__(self, metric: Callable[..., float], sign: int, kwargs: dict[str, Any]) -> None:
        self._metric = metric
        self._sign = sign
        self._kwargs = kwargs

    def __repr__(self) -> str:
        name = getattr(self._metric, "__name__", repr(self._metric))
        extra = "".join(f", {k}={v!r}" for k, v in self._kwargs.items())
        sign = "" if self._sign > 0 else ", greater_is_better=False"
        return f"make_cost_scorer({name}{sign}{extra})"

    def __call__(
        self,
        estimator: Any,
        X: Any,
        y_true: ArrayLike,
        *,
        cost_matrix: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> float:
        if cost_matrix is None:
            raise ValueError(
                "the cost scorer got no cost_matrix; pass params={'cost_matrix': costs} to "
                "cross_val_score / cross_validate (or cost_matrix=costs to GridSearchCV.fit) "
                "with sklearn.set_config(enable_metadata_routing=True)"
            )
        if predict_takes_costs(estimator):
            y_pred = estimator.predict(X, cost_matrix=cost_matrix)
        else:
            y_pred = estimator.predict(X)
        kwargs = dict(self._kwargs)
        if sample_weight is not None:
            kwargs["sample_weight"] = sample_weight
        value = float(self._metric(y_true, y_pred, cost_matrix, **kwargs))
        return self._sign * value

    def get_metadata_routing(self) -> Any:
        """scikit-learn metadata routing: ``score`` requests ``cost_matrix`` and weights."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=self)
        request.score.add_request(param="cost_matrix", alias=True)
        request.score.add_request(param="sample_weight", alias=True)
        return request


def make_cost_scorer(
    metric: Callable[..., float] = savings_score,
    *,
    greater_is_better: bool = True,
    **kwargs: Any,
) -> CostScorer:
    """A scorer that gives each fold's per-example costs to ``predict`` and to ``metric``.

    Parameters
    ----------
    metric : callable, default=savings_score
        ``metric(y_true, y_pred, cost_matrix, **kwargs) -> float``, e.g.
        :func:`costlib.costs.savings_score` or :func:`costlib.costs.total_cost`.
    greater_is_better : bool, default=True
        False for a cost (``total_cost``): the scorer then returns ``-metric``, as
        scikit-learn's scorers do.
    **kwargs
        Passed to ``metric`` (``pos_label=``, ``labels=``).

    Returns
    -------
    CostScorer

    Examples
    --------
    Cross-validated savings of per-example minimum-risk decisions (metadata routing on)::

        import sklearn
        from sklearn.model_selection import cross_val_score
        from costlib.costs import binary_example_costs
        from costlib.estimators import BayesMinimumRiskClassifier, make_cost_scorer

        sklearn.set_config(enable_metadata_routing=True)
        costs = binary_example_costs(fn=amounts, fp=5.0, tp=5.0)
        cross_val_score(BayesMinimumRiskClassifier(calibration="sigmoid"), X, y,
                        params={"cost_matrix": costs}, scoring=make_cost_scorer())

    Each fold's score equals ``savings_score(y_test, clf.predict(X_test,
    cost_matrix=costs_test), costs_test)`` for the model fitted on the other folds.
    """
    if not callable(metric):
        raise ValueError(f"metric must be callable, got {metric!r}")
    return CostScorer(metric, 1 if greater_is_better else -1, dict(kwargs))
