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



def __getattr__(name: str) -> str:
    """``costlib.__version__``, read from the package metadata on first use (importing
    ``importlib.metadata`` costs more than the rest of ``import costlib``)."""
    if name != "__version__":
        raise AttributeError(f"module 'costlib' has no attribute {name!r}")
    from importlib import metadata

    try:
        return metadata.version("costlib")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout on sys.path
        return "0+unknown"

__all__ = ["__version__"]
