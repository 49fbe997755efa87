from typing import Any

from numpy.typing import ArrayLike, NDArray

def confusion_matrix(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    *,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
    normalize: str | None = None,
) -> NDArray[Any]: ...
def __getattr__(name: str) -> Any: ...
