"""Scores that are real model outputs: two logistic regressions on a generated tabular problem.

The closed-loop benchmarks' score family ``model`` (``bench_feedback_loop.population``). Per
*problem* (an integer; the loops use their seed) a tabular problem is generated as
scikit-learn's ``make_classification`` builds one, with parameters kept so that any number
of further rows can be drawn from the same distribution:

- ``N_INFORMATIVE`` informative features: each class is a mixture of two Gaussian clusters
  centred on distinct vertices of the hypercube ``{-SEP, SEP}^d``, each cluster a standard
  normal times a random mixing matrix (uniform in ``[-1, 1]``);
- ``N_REDUNDANT`` redundant features (random linear combinations of the informative ones) and
  ``N_NOISE`` standard normal features; the columns in a random order.

Two scikit-learn ``LogisticRegression`` models are fitted once per problem on a training sample
with positives over-sampled to :data:`TRAIN_PREVALENCE` (case-control), each on its own half
of the columns: ``text_model`` is calibrated to the population's prevalence (the prior
correction of its intercept, ``log(π/(1-π)) - log(π_t/(1-π_t))``), ``image_model`` is not
(it over-states every row's probability about ``π_t/π``-fold). Their scores pile up near 0
with a thin, lumpy tail of positives, unlike the smooth synthetic families.

Drift (from the drift day, strength ``drift``): the positives' features of the image model's
columns move by ``drift`` times the gap between the classes' means there (from the training
sample), towards the negatives': at ``drift = 1`` the image model no longer tells them apart
by their means, the text model still does.

Everything is deterministic per problem and per row seed; the fitted models are kept in memory
(:func:`problem`), so a loop pays for training once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

N_INFORMATIVE = 6
N_REDUNDANT = 4
N_NOISE = 6
#: Distance of the cluster centres from the origin on each informative axis.
SEP = 2.0
#: Share of positives in the training sample (case-control).
TRAIN_PREVALENCE = 0.02
TRAIN_ROWS = 60_000


@dataclass(frozen=True, eq=False)
class Problem:
    """A generated problem and the two models fitted on it."""

    centres: np.ndarray  # (2 classes, 2 clusters, N_INFORMATIVE)
    mixing: np.ndarray  # (2, 2, N_INFORMATIVE, N_INFORMATIVE)
    redundant: np.ndarray  # (N_INFORMATIVE, N_REDUNDANT)
    order: np.ndarray  # column permutation
    columns: tuple[np.ndarray, np.ndarray]  # each model's columns
    coef: tuple[np.ndarray, np.ndarray]
    intercept: tuple[float, float]
    shift: np.ndarray  # the positives' drift direction (all columns; zero off the image model's)

    def features(self, y: np.ndarray, rng: np.random.Generator,
                 drift: float = 0.0) -> np.ndarray:
        """Rows of features for labels ``y`` (positives shifted by ``drift * shift``)."""
        n = y.size
        cluster = rng.integers(0, 2, n)
        label = y.astype(np.intp)
        z = rng.standard_normal((n, N_INFORMATIVE))
        informative = np.einsum("ni,nij->nj", z, self.mixing[label, cluster]) + \
            self.centres[label, cluster]
        x = np.hstack([informative, informative @ self.redundant,
                       rng.standard_normal((n, N_NOISE))])[:, self.order]
        if drift:
            x[y] -= drift * self.shift
        return x

    def scores(self, x: np.ndarray) -> np.ndarray:
        """Both models' probabilities, shape (n, 2)."""
        out = np.empty((x.shape[0], 2))
        for j in range(2):
            logit = x[:, self.columns[j]] @ self.coef[j] + self.intercept[j]
            out[:, j] = 1.0 / (1.0 + np.exp(-logit))
        return out


@lru_cache(maxsize=4)
def problem(key: int, prevalence: float) -> Problem:
    """The problem ``key`` with models calibrated (text) to ``prevalence`` (mean over groups)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng([key, 7_100_777])
    n_features = N_INFORMATIVE + N_REDUNDANT + N_NOISE
    vertices = rng.choice(1 << N_INFORMATIVE, size=4, replace=False)
    bits = (vertices[:, None] >> np.arange(N_INFORMATIVE)) & 1
    centres = (SEP * (2.0 * bits - 1.0)).reshape(2, 2, N_INFORMATIVE)
    mixing = rng.uniform(-1.0, 1.0, (2, 2, N_INFORMATIVE, N_INFORMATIVE))
    redundant = rng.uniform(-1.0, 1.0, (N_INFORMATIVE, N_REDUNDANT))
    order = rng.permutation(n_features)
    split = rng.permutation(n_features)
    columns = (np.sort(split[: n_features // 2]), np.sort(split[n_features // 2:]))
    draft = Problem(centres, mixing, redundant, order, columns, (np.zeros(0),) * 2,
                    (0.0, 0.0), np.zeros(n_features))
    y = rng.random(TRAIN_ROWS) < TRAIN_PREVALENCE
    x = draft.features(y, rng)
    coef, intercept = [], []
    for j, cols in enumerate(columns):
        fit = LogisticRegression(C=1.0, max_iter=1000).fit(x[:, cols], y)
        coef.append(fit.coef_[0].copy())
        b = float(fit.intercept_[0])
        if j == 0:  # prior correction: calibrated to the population's prevalence
            b += np.log(prevalence / (1 - prevalence)) - \
                np.log(TRAIN_PREVALENCE / (1 - TRAIN_PREVALENCE))
        intercept.append(b)
    shift = np.zeros(n_features)
    image = columns[1]
    shift[image] = x[y][:, image].mean(axis=0) - x[~y][:, image].mean(axis=0)
    return Problem(centres, mixing, redundant, order, columns, (coef[0], coef[1]),
                   (intercept[0], intercept[1]), shift)


def model_scores(y: np.ndarray, rng: np.random.Generator, *, key: int, prevalence: float,
                 drift: float = 0.0) -> np.ndarray:
    """Both models' scores of fresh rows with labels ``y`` of problem ``key``."""
    p = problem(key, prevalence)
    return p.scores(p.features(y, rng, drift))
