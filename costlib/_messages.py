"""Values in error messages as a person writes them: ``1.1``, not ``np.float64(1.1)``."""

from __future__ import annotations

import numpy as np

__all__ = ["plain"]


def plain(value: object) -> str:
    """``repr`` of ``value`` with numpy scalars and arrays shown as the Python numbers and lists.

    >>> plain(np.float64(1.1)), plain(np.array([0.5, 2])), plain("x")
    ('1.1', '[0.5, 2.0]', "'x'")
    """
    if isinstance(value, np.generic):
        value = value.item()
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    return repr(value)
