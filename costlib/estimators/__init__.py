"""Cost- and benefit-sensitive scikit-learn classifiers (Sooklal et al.; Xu; Zhang).

Every matrix follows one convention: rows = true class, columns = predicted class. A matrix
with labels (:class:`costlib.costs.BenefitMatrix` / :class:`costlib.costs.CostMatrix`) says
which class each row is; a plain K x K one follows ``classes_`` (sorted labels); a plain 2 x 2
one (shared or per example) is (negative, positive), see ``pos_label``.

Public API
----------
BenefitLogisticRegression
    Logistic regression trained to maximise a benefit matrix (Sooklal et al.).
MinimumExpectedCostClassifier, CostSensitiveNaiveBayes
    Minimum-expected-cost decisions on a probabilistic classifier; categorical naive Bayes.
HierarchicalCostSensitiveClassifier
    Two stages for a rare minority group (Xu; Sooklal et al.).
KernelLogisticRegression, CostSensitiveKernelLogisticRegression, beta_delta
    RBF-kernel logistic regression, cost-blind and Zhang's cost-sensitive one.
ExampleCostLogisticRegression, BayesMinimumRiskClassifier
    Per-example cost matrices (:mod:`costlib.costs`): trained on them, or decided by them.
make_cost_scorer, CostScorer
    A scorer that routes each fold's costs into ``predict`` and the metric.
CostFallbackWarning
    Raised (as a warning) on every call that decides by 0/1 costs for want of costs.

Two classes: the positive class is ``pos_label``, else ``1``/``True``; classes other than
0/1, bool or -1/1 with plain costs need ``pos_label=`` and are refused without it.
"""

from costlib.estimators._bayes_min_risk import BayesMinimumRiskClassifier
from costlib.estimators._benefit_lr import BenefitLogisticRegression
from costlib.estimators._common import CostFallbackWarning
from costlib.estimators._cost_naive_bayes import CostSensitiveNaiveBayes
from costlib.estimators._example_cost_lr import ExampleCostLogisticRegression
from costlib.estimators._hierarchical import HierarchicalCostSensitiveClassifier
from costlib.estimators._kernel_lr import (
    CostSensitiveKernelLogisticRegression,
    KernelLogisticRegression,
    beta_delta,
)
from costlib.estimators._min_expected_cost import MinimumExpectedCostClassifier
from costlib.estimators._scoring import CostScorer, make_cost_scorer

__all__ = [
    "BayesMinimumRiskClassifier",
    "BenefitLogisticRegression",
    "CostFallbackWarning",
    "CostScorer",
    "CostSensitiveKernelLogisticRegression",
    "CostSensitiveNaiveBayes",
    "ExampleCostLogisticRegression",
    "HierarchicalCostSensitiveClassifier",
    "KernelLogisticRegression",
    "MinimumExpectedCostClassifier",
    "beta_delta",
    "make_cost_scorer",
]
