"""Cost- and benefit-sensitive scikit-learn classifiers (Sooklal et al.; Xu; Zhang).

Every matrix follows one convention: rows = true class, columns = predicted class, in the
order of the estimator's ``classes_`` (sorted labels) unless the matrix carries labels
(:class:`costlib.costs.BenefitMatrix` / :class:`costlib.costs.CostMatrix`).

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
"""

from costlib.estimators._bayes_min_risk import BayesMinimumRiskClassifier
from costlib.estimators._benefit_lr import BenefitLogisticRegression
from costlib.estimators._cost_naive_bayes import CostSensitiveNaiveBayes
from costlib.estimators._example_cost_lr import ExampleCostLogisticRegression
from costlib.estimators._hierarchical import HierarchicalCostSensitiveClassifier
from costlib.estimators._kernel_lr import (
    CostSensitiveKernelLogisticRegression,
    KernelLogisticRegression,
    beta_delta,
)
from costlib.estimators._min_expected_cost import MinimumExpectedCostClassifier

__all__ = [
    "BayesMinimumRiskClassifier",
    "BenefitLogisticRegression",
    "CostSensitiveKernelLogisticRegression",
    "CostSensitiveNaiveBayes",
    "ExampleCostLogisticRegression",
    "HierarchicalCostSensitiveClassifier",
    "KernelLogisticRegression",
    "MinimumExpectedCostClassifier",
    "beta_delta",
]
