"""costlib: cost-sensitive decisions on classifier scores.

Subpackages by concept:

- :mod:`costlib.thresholds`: threshold grids, candidate thresholds and operating points for
  classifier ensembles, recalibration per group, shared review capacity, their figures;
- :mod:`costlib.audit`: audit samples of unflagged rows (designs, strata, Neyman sizing) and
  their Horvitz–Thompson weights;
- :mod:`costlib.decoding`: set losses and optimal top-k decoding;
- :mod:`costlib.costs`: benefit matrices and example-dependent costs;
- :mod:`costlib.estimators`: cost- and benefit-sensitive scikit-learn estimators;
- :mod:`costlib.experiments`: the source papers' experiments.

Importing ``costlib`` imports none of them.
"""

from importlib import metadata as _metadata

try:
    __version__: str = _metadata.version("costlib")
except _metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout on sys.path
    __version__ = "0+unknown"

__all__ = ["__version__"]
