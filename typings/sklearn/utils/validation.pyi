from collections.abc import Callable, Sequence
from typing import Any, overload

from numpy.typing import ArrayLike, DTypeLike, NDArray

def column_or_1d(
    y: ArrayLike, *, dtype: DTypeLike | None = None, warn: bool = False, device: Any = None
) -> NDArray[Any]: ...
def check_consistent_length(*arrays: Any) -> None: ...
def _check_sample_weight(
    sample_weight: ArrayLike | float | None,
    X: Any,
    *,
    dtype: DTypeLike | None = None,
    ensure_non_negative: bool = False,
    copy: bool = False,
) -> NDArray[Any]: ...
def check_is_fitted(
    estimator: Any,
    attributes: str | Sequence[str] | None = None,
    *,
    msg: str | None = None,
    all_or_any: Callable[..., bool] = ...,
) -> None: ...
def __getattr__(name: str) -> Any: ...

# validate_data returns the validated X, or (X, y) when y is given. Dense arrays are what
# costlib's estimators work on; a sparse X (accepted by BenefitLogisticRegression) comes back
# as a scipy sparse matrix, which supports the operations used on it there.
@overload
def validate_data(
    _estimator: Any,
    /,
    X: Any = "no_validation",
    *,
    reset: bool = True,
    validate_separately: Any = False,
    skip_check_array: bool = False,
    **check_params: Any,
) -> NDArray[Any]: ...
@overload
def validate_data(
    _estimator: Any,
    /,
    X: Any,
    y: Any,
    reset: bool = True,
    validate_separately: Any = False,
    skip_check_array: bool = False,
    **check_params: Any,
) -> tuple[NDArray[Any], NDArray[Any]]: ...
