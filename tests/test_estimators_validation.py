"""Bad input gives a clear ValueError: matrix shapes, unknown labels, NaN features, groups."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from costlib.costs._matrices import BenefitMatrix, CostMatrix
from costlib.estimators import (
    BenefitLogisticRegression,
    CostSensitiveKernelLogisticRegression,
    CostSensitiveNaiveBayes,
    HierarchicalCostSensitiveClassifier,
    KernelLogisticRegression,
    MinimumExpectedCostClassifier,
)

pytestmark = pytest.mark.usefixtures("single_blas_thread")


RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 3))
Y3 = np.array(["a", "b", "c"])[np.arange(60) % 3]
COST3 = [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
BEN3 = [[1, -1, -2], [-1, 1, -1], [-2, -1, 1]]

ALL = [
    BenefitLogisticRegression(),
    MinimumExpectedCostClassifier(LogisticRegression()),
    CostSensitiveNaiveBayes(),
    KernelLogisticRegression(),
    CostSensitiveKernelLogisticRegression(),
    HierarchicalCostSensitiveClassifier(),
    HierarchicalCostSensitiveClassifier("benefit"),
]


@pytest.mark.parametrize("estimator", ALL, ids=lambda e: repr(e))
def test_nan_features_are_rejected_in_fit_and_predict(estimator):
    bad = X.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        estimator.fit(bad, Y3)
    estimator.fit(X, Y3)
    with pytest.raises(ValueError, match="NaN"):
        estimator.predict(bad)


@pytest.mark.parametrize(
    "estimator",
    [
        BenefitLogisticRegression([[1, -1], [-1, 1]]),
        MinimumExpectedCostClassifier(cost_matrix=[[0, 1], [1, 0]]),
        CostSensitiveNaiveBayes([[0, 1], [1, 0]]),
    ],
    ids=lambda e: type(e).__name__,
)
def test_matrix_size_must_match_the_classes(estimator):
    with pytest.raises(ValueError, match=r"2x2 but there are 3 classes \['a', 'b', 'c'\]"):
        estimator.fit(X, Y3)


@pytest.mark.parametrize(
    "estimator",
    [
        BenefitLogisticRegression(BenefitMatrix(BEN3, labels=["a", "b", "x"])),
        MinimumExpectedCostClassifier(cost_matrix=CostMatrix(COST3, labels=["a", "b", "x"])),
        CostSensitiveNaiveBayes(CostMatrix(COST3, labels=["a", "b", "x"])),
    ],
    ids=lambda e: type(e).__name__,
)
def test_labels_not_in_the_matrix(estimator):
    with pytest.raises(ValueError, match=r"label\(s\) \['c'\] are not in the"):
        estimator.fit(X, Y3)


@pytest.mark.parametrize(
    ("matrix", "match"),
    [
        ([[1, -1, 0], [-1, 1, -1]], "square"),
        ([[1, -1], [-1, np.nan]], "finite"),
        ([[1, 2], [-1, 1]], r"b\[0,1\]=2 >= 0"),
    ],
)
def test_bad_benefit_matrices(matrix, match):
    with pytest.raises(ValueError, match=match):
        BenefitLogisticRegression(matrix).fit(X[:40], np.arange(40) % 2)


def test_matrix_type_mix_ups_are_named():
    with pytest.raises(ValueError, match="CostMatrix where a benefit matrix"):
        BenefitLogisticRegression(CostMatrix(COST3)).fit(X, Y3)
    with pytest.raises(ValueError, match="BenefitMatrix where a cost matrix"):
        MinimumExpectedCostClassifier(cost_matrix=BenefitMatrix(BEN3)).fit(X, Y3)


def test_parameter_errors():
    y2 = np.arange(60) % 2
    with pytest.raises(ValueError, match="combination"):
        BenefitLogisticRegression(combination="mean").fit(X, Y3)
    with pytest.raises(ValueError, match="c_dd"):
        CostSensitiveKernelLogisticRegression(c_dd=0).fit(X, Y3)
    with pytest.raises(ValueError, match="gamma"):
        KernelLogisticRegression(gamma="auto").fit(X, Y3)
    with pytest.raises(ValueError, match="gamma"):
        KernelLogisticRegression(gamma=-1.0).fit(X, Y3)
    with pytest.raises(ValueError, match="n_components"):
        KernelLogisticRegression(n_components=0).fit(X, Y3)
    with pytest.raises(ValueError, match="n_bins"):
        CostSensitiveNaiveBayes(n_bins=1).fit(X, Y3)
    with pytest.raises(ValueError, match="c_hd"):
        HierarchicalCostSensitiveClassifier(c_hd=-1).fit(X, Y3)
    with pytest.raises(ValueError, match="stage1 must be"):
        HierarchicalCostSensitiveClassifier("svm").fit(X, Y3)
    with pytest.raises(ValueError, match="BenefitLogisticRegression"):
        HierarchicalCostSensitiveClassifier(
            "benefit", stage1_estimator=LogisticRegression()
        ).fit(X, Y3)
    with pytest.raises(ValueError, match="predict_proba"):
        MinimumExpectedCostClassifier(object()).fit(X, y2)
    with pytest.raises(ValueError, match="at least 2 classes"):
        BenefitLogisticRegression().fit(X, np.zeros(60))


def test_group_errors():
    with pytest.raises(ValueError, match=r"minority_classes \['z'\] are not among"):
        HierarchicalCostSensitiveClassifier(minority_classes=["z"]).fit(X, Y3)
    with pytest.raises(ValueError, match="in both"):
        HierarchicalCostSensitiveClassifier(
            minority_classes=["a"], majority_classes=["a", "b"]
        ).fit(X, Y3)
    with pytest.raises(ValueError, match=r"\['c'\] are in neither"):
        HierarchicalCostSensitiveClassifier(
            minority_classes=["a"], majority_classes=["b"]
        ).fit(X, Y3)
    with pytest.raises(ValueError, match="at least one minority"):
        HierarchicalCostSensitiveClassifier(majority_classes=["a", "b", "c"]).fit(X, Y3)
    with pytest.raises(ValueError, match=r"majority_classes \['q'\]"):
        CostSensitiveKernelLogisticRegression(majority_classes=["q"]).fit(X, Y3)


def test_feature_count_is_checked_at_predict():
    for est in ALL:
        est.fit(X, Y3)
        with pytest.raises(ValueError, match="features"):
            est.predict(X[:, :2])
