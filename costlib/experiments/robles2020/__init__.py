"""Reproduction of the experimental protocol of Robles et al. (2020), Table 1.

Robles, Yu, Hu, Hendrickx, Huang, Tang, Sun and Sivan (2020), "Threshold Optimization in
Multiple Binary Classifiers for Extreme Rare Events using Predicted Positive Data", section
"Experiments and Results" and appendix Tables 1-2. Run it with::

    costlib reproduce robles2020            # full run (about 30 s of CPU, single-threaded)
    costlib reproduce robles2020 --quick    # smaller data, no tuning (a few seconds)

The protocol, per (data set, classifier type) pair ("experiment"):

1. *Data and cleaning.* Empty values are replaced by the column mean (a no-op on the data sets
   here, which have none; one-hot and cyclical encodings do not apply: every feature is numeric).
2. *Split* 75% training set T / 25% hold-out H, stratified, fixed seed.
3. *Standardise, PCA.* The first 20% of the components (at least one) go to both classifiers;
   classifier 1 additionally gets the remaining components at even positions, classifier 2 those
   at odd positions (0-based positions counted from the first remaining component, i.e.
   classifier 1 gets components ``c, c+2, ...`` and classifier 2 ``c+1, c+3, ...`` where
   ``c`` is the number of shared ones). Two classifiers of the *same type* thus decide on
   disjoint but related feature sets, as in the paper.
4. *Train* both classifiers on T (light grid-search tuning, see below); score T out-of-fold and
   H with the models refit on all of T.
5. *Rating floor (predicted positives only).* Per classifier, the floor is the
   ``--floor-quantile`` quantile (default 0.9) of its training scores; a training row is
   *rated* (its label is used) only if some classifier scores it at or above its floor. Only
   rated rows build the :class:`~costlib.thresholds.ThresholdGrid`.
6. *Thresholds on the training side.* Candidate thresholds of classifier ``j`` are its floor
   followed by ``--bins - 1`` quantile edges (:func:`costlib.thresholds.quantile_edges`) of
   the rated scores strictly above the floor (strictly, so that a mass of tied scores at the floor,
   e.g. k-NN probabilities of 0, does not swallow every quantile). Every candidate threshold is
   thus at or above the floor, and the rated grid's TP/FP equal the counts on *all* of T at
   every threshold tuple (a row the union rule flags has some score at or above its floor, so
   it is rated). The union rule
   (``rule="any"``) and a target marginal precision ``m`` (``--target``, default 0.5, i.e.
   slope ``r = m / (1 - m) = 1``: one true positive is worth one false positive) give the
   operating point of each method of :func:`costlib.thresholds.optimize`:
   ``analytic`` (the paper's Algorithm 2), ``graph`` (Algorithm 3), ``hull`` (the exact empirical
   optimum of ``TP - r FP`` over the lattice, an upper bound for the others on the training grid)
   and ``bucket`` (the paper's manual baseline).
7. *Evaluate on H*: an item is flagged iff ``s_1 >= t_1 or s_2 >= t_2`` (``t_j = +inf``: off);
   precision, recall and F1 from the hold-out confusion counts. Baselines: each classifier
   alone with its default decision (``predict``: probability 0.5, margin 0, log-odds 0).
8. *Summary* as in the paper: the average change of precision, recall and F1 of the best
   proposed method (analytic or graph, whichever has the higher hold-out F1, as the paper's
   Figures 4-6 do) against the average of the two single classifiers.

Data sets (all available after ``pip install scikit-learn``; nothing is downloaded):

``gen-0.5%``
    :func:`sklearn.datasets.make_classification`, 20,000 rows, 16 features (6 informative, 2
    redundant, one cluster per class, ``class_sep=2``), prevalence 0.50% (100 positives); PCA
    to 10 components (2 shared, 4 + 4 split).
``gen-0.2%``
    The same generator, 40,000 rows, prevalence 0.20% (80 positives); PCA to 10 components.
``digits-8``
    :func:`sklearn.datasets.load_digits`: digit 8 against the rest (64 pixel features), the
    positives subsampled (``--seed``) to 3% of the rows: 1,623 negatives, 50 positives
    (2.99%); PCA to 20 components (4 shared, 8 + 8 split).

The generator seeds are fixed (:data:`GENERATOR_SEEDS`): the difficulty of
``make_classification`` swings from trivial to hopeless with its seed, and these give instances
where both classifiers of a pair are useful but imperfect (chosen by the out-of-fold average
precision of naive Bayes and the linear SVM alone, before any threshold method was run).

``--quick`` (used by the tests) takes stratified subsamples of 5,000 and 8,000 rows of the
generated sets (25 and 16 positives: a smoke test, not a result), skips tuning, and uses 10
trees / 15 boosting iterations.

Deviations from the paper (deliberate, and why):

- *Data.* The paper uses three Kaggle data sets (credit-card fraud, bank marketing, IEEE
  fraud), which need an account and a download; here two generated rare-event sets and one
  built from scikit-learn's bundled digits stand in. Prevalences are 0.5%, 0.2% and 3%, not the
  paper's 0.17%-11%. The hold-out sets hold only 25, 20 and 13 positives, so hold-out metrics
  move by several points between seeds (``--seed``); read the table as a protocol check, not
  as a benchmark.
- *Standardise and PCA are fitted on T only* (the paper applies PCA before splitting), so no
  hold-out information leaks into the features.
- *Out-of-fold training scores.* The paper computes the training-side grid from the models'
  scores on T. In-sample scores are biased (a model scores its own training positives higher
  than new ones; for k-NN every training row is its own neighbour), so the TP/FP the methods
  optimise overstate what the thresholds achieve. Training scores here are
  ``cross_val_predict`` scores (``--folds``, default 3, stratified), and H is scored by the
  models refit on all of T. This is a methodological choice, not a measured improvement: with
  the regularised models used here, ``--in-sample`` (the paper's literal protocol) gave the
  *higher* hold-out F1 on average (F1 change of the best proposed method vs. the average
  single classifier, seeds 0-3: out-of-fold +3.5, +6.0, +7.1, +2.5 points; in-sample +9.7,
  +8.3, +11.0, +4.2), probably because the fold models see only two thirds of the few
  positives and score on a different scale than the refit model that scores H.
- *XGBoost* is replaced by scikit-learn's :class:`~sklearn.ensemble.HistGradientBoostingClassifier`
  (the same model family, no extra dependency).
- *Tuning is light* to keep the run short: the paper grid-searches wide ranges by 5-fold CV
  accuracy. Here a 3-value grid, 3-fold CV, accuracy (the paper's criterion) on a stratified
  subsample of at most 8,000 training rows: linear SVM ``C``; tree ``max_depth``; k-NN
  ``n_neighbors``. Random forest and gradient boosting use fixed, moderate settings (forest: 30
  trees of depth <= 8 on 25% bootstrap samples; boosting: 50 iterations, 15 leaves); naive
  Bayes has no hyperparameters (as in the paper). Tuning happens once on T, before the
  out-of-fold scoring, so the out-of-fold scores are very slightly optimistic. ``--quick``
  skips tuning and uses the middle value of each grid.
- *Scores.* Linear SVM: ``decision_function`` (margin); gradient boosting:
  ``decision_function`` (log-odds); naive Bayes: the log-odds from ``predict_log_proba``
  (probabilities saturate at 0 and 1 in double precision, log-odds keep the ranking);
  forest, tree and k-NN: ``predict_proba``. Each default decision is the same threshold on the
  same score the classifier's ``predict`` uses.
- *Candidate thresholds* are quantile edges of the rated scores (the paper: "equally spaced
  points in each dimension"); ``--edges uniform`` gives evenly spaced edges between the floor
  and the highest rated score instead.
- *The rating floor* is this reproduction's stand-in for the paper's human raters (who only
  see items some classifier already flags); the paper's public-data experiment labels every
  row. Positives scored below both floors are invisible to the grid but count as false
  negatives on H.
- *Averages* in the summary are absolute differences in points (the paper's "increased by
  5.1%" does not say absolute or relative). Undefined precision (nothing flagged) is left out
  of the precision average; F1 of an experiment that flags nothing counts as 0. Picking the
  better of analytic and graph *on the hold-out* (the paper's "best performing method") is
  optimistic, so the per-method averages are printed as well.

Reading the results:

- ``-`` with recall 0 is "nothing flagged". For the threshold methods it means that no
  threshold tuple has ``TP - r FP > 0`` on the rated training grid; ties with "all off" are
  broken towards fewer flags. Fully grown decision trees score (almost) only 0 or 1, so their
  lattice has one useful threshold per axis, and whether it is used depends on whether the
  out-of-fold precision of the pure leaves beats ``m``; the paper's Table 1 shows "-" for
  trees too.
- A k-NN or tree classifier whose floor quantile is a tied score (90% of k-NN probabilities
  are 0) rates every training row: the floor then selects nothing (``--verbose`` prints the
  rated counts).
- ``bucket`` cuts the FP range ``[0, FP_max]`` of the whole rated lattice into ``--buckets``
  equal buckets; when ``FP_max`` is large the first bucket already holds far more false
  positives than the optimum, and the baseline falls back to "all off". This is the manual
  baseline without its manual adjustment, as the paper describes it.
- ``hull`` maximises the training-side objective exactly; on the hold-out it is not always
  best (the training grid is small and noisy).
- ``--in-sample`` reproduces the paper's literal use of in-sample training scores.

Modules: the data sets (:mod:`._datasets`), the classifier types (:mod:`._classifiers`), the
rows of the table (:mod:`._results`), the protocol and a run of every experiment
(:mod:`._experiment`), the report, its summary and figures (:mod:`._report`), and the command
line (:mod:`._cli`). Import every name from this package.
"""

from costlib.experiments.robles2020._classifiers import CLASSIFIER_TYPES
from costlib.experiments.robles2020._classifiers import TUNE_MAX_ROWS as TUNE_MAX_ROWS
from costlib.experiments.robles2020._classifiers import ClassifierType as ClassifierType
from costlib.experiments.robles2020._cli import main
from costlib.experiments.robles2020._datasets import DATASETS, DataSet
from costlib.experiments.robles2020._datasets import GENERATOR_SEEDS as GENERATOR_SEEDS
from costlib.experiments.robles2020._experiment import Config, Reproduction, feature_split, run
from costlib.experiments.robles2020._experiment import run_experiment as run_experiment
from costlib.experiments.robles2020._report import PROPOSED as PROPOSED
from costlib.experiments.robles2020._report import report as report
from costlib.experiments.robles2020._report import summary as summary
from costlib.experiments.robles2020._report import table_rows as table_rows
from costlib.experiments.robles2020._report import write_plots as write_plots
from costlib.experiments.robles2020._results import (
    METHOD_LABELS,
    ExperimentResult,
    MethodResult,
    holdout_metrics,
)

__all__ = [
    "CLASSIFIER_TYPES",
    "DATASETS",
    "METHOD_LABELS",
    "Config",
    "DataSet",
    "ExperimentResult",
    "MethodResult",
    "Reproduction",
    "feature_split",
    "holdout_metrics",
    "main",
    "run",
]
