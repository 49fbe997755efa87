"""costlib: cost-sensitive decisions on classifier scores.

Threshold grids and operating points for classifier ensembles (:mod:`costlib.grid`,
:mod:`costlib.operating_point`), optimal top-k decoding (:mod:`costlib.decoding`), cost- and
benefit-sensitive scikit-learn estimators (:mod:`costlib.benefit`, :mod:`costlib.estimators`).
Importing ``costlib`` imports nothing else; the modules are imported where they are used.
"""

from importlib import metadata as _metadata

try:
    __version__: str = _metadata.version("costlib")
except _metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout on sys.path
    __version__ = "0+unknown"

__all__ = ["__version__"]
