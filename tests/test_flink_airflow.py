"""The Flink variant of the Airflow DAG, run for real: ``airflow dags test`` on two days.

Airflow (``tools/airflow_venv.py``: its own cached venv, it pins many packages that conflict
with costlib's) runs ``deploy/airflow/costlib_recalibration_flink_dag.py`` with the session's
local Flink cluster as the engine (``COSTLIB_FLINK_BEAM_FLAGS``) and costlib from this venv
(``COSTLIB_PYTHON``), sqlite as its database, the DAG's Variables from the environment:

* day 1 (window 2026-11-01..07): the ``recalibrate`` task publishes, ``LATEST`` names it;
* day 2 (window 2026-11-02..08, the last day's stream shifted) with the publish guard's
  ``costlib_max_threshold_change`` tiny: ``costlib recalibrate`` exits 3, the task fails once,
  without a retry, with a message naming the run's ``manifest.json``; ``LATEST`` still names
  day 1's run, and the ``status`` alert fails the DAG run.

Without network for the Airflow install the test is skipped, unless ``COSTLIB_REQUIRE_FLINK=1``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from flink_support import jobs, latest, run_dirs

from costlib.sample import generate_score_stream

pytestmark = pytest.mark.flink

ROOT = Path(__file__).resolve().parent.parent
DAG_ID = "costlib_recalibration_flink"
DAG_FILES = ("costlib_recalibration_flink_dag.py", "costlib_dag_common.py")
ROWS_PER_DAY = 4_000


@pytest.fixture(scope="module")
def airflow_bin() -> Path:
    """``airflow`` of the cached venv, installed on first use."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "airflow_venv.py")],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode:
        message = f"Airflow could not be installed: {done.stderr[-2000:]}"
        if os.environ.get("COSTLIB_REQUIRE_FLINK") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Path(done.stdout.strip()) / "bin" / "airflow"


def write_day(directory: Path, day: str, seed: int, *, shifted: bool = False) -> None:
    """One day's scores; ``shifted``: more bad items, less separable, so thresholds move."""
    kwargs = {"prevalence": (0.05, 0.03, 0.08), "separation": (1.6, 1.4)} if shifted else {}
    frame = generate_score_stream(ROWS_PER_DAY, start=day, days=1, seed=seed,
                                  first_item_id=seed * ROWS_PER_DAY, **kwargs)
    frame["weight"] = np.where(frame["item_id"] % 3 == 0, 2.5, 1.0)
    directory.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                   directory / "part-0.parquet")


def write_config(path: Path) -> str:
    path.write_text(yaml.safe_dump({
        "columns": {"weight": "weight"},
        "classifiers": ["text_model", "image_model"],
        "target": {"marginal_precision": 0.3},
        "methods": ["graph", "hull"],
        "min_rated": {"positives": 5, "negatives": 5},
    }))
    return str(path)


def dags_test(airflow: Path, env: dict[str, str], logical_date: str
              ) -> subprocess.CompletedProcess:
    return subprocess.run([str(airflow), "dags", "test", DAG_ID, logical_date],
                          capture_output=True, text=True, env=env, timeout=900)


def task_states(airflow: Path, env: dict[str, str], log: str) -> dict[str, str]:
    """The task states of the DAG run ``airflow dags test`` logged, from Airflow's database."""
    run_id = re.search(r"DagRun Finished: dag_id=\S+, logical_date=[^,]+, run_id=([^,]+),",
                       log).group(1)
    done = subprocess.run([str(airflow), "tasks", "states-for-dag-run", DAG_ID, run_id,
                           "-o", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("[{")]
    rows = json.loads(line)
    return {row["task_id"]: row["state"] for row in rows}


def test_dags_test_publishes_day_one_and_holds_day_two_without_retry(
        flink_cluster, airflow_bin, tmp_path):
    scores = tmp_path / "scores"
    for i in range(8):  # 2026-11-01 .. 2026-11-08; the last day only in day 2's window
        day = f"2026-11-{i + 1:02d}"
        write_day(scores / f"dt={day}", day, seed=i + 1, shifted=i == 7)
    output = tmp_path / "recalibrate"
    home = tmp_path / "airflow"
    dags = home / "dags"
    dags.mkdir(parents=True)
    for name in DAG_FILES:
        shutil.copy(ROOT / "deploy" / "airflow" / name, dags / name)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "COSTLIB_PYTHON": sys.executable,
        "COSTLIB_FLINK_BEAM_FLAGS": shlex.join(flink_cluster.beam_flags()),
        "AIRFLOW_VAR_COSTLIB_CONFIG": write_config(tmp_path / "costlib.yaml"),
        "AIRFLOW_VAR_COSTLIB_INPUT_PATTERN": str(scores / "dt={date}" / "*.parquet"),
        "AIRFLOW_VAR_COSTLIB_OUTPUT": str(output),
    })
    migrate = subprocess.run([str(airflow_bin), "db", "migrate"], capture_output=True,
                             text=True, env=env, timeout=600)
    assert migrate.returncode == 0, migrate.stderr[-3000:]

    day1 = dags_test(airflow_bin, env, "2026-11-08T02:30:00+00:00")
    log1 = day1.stdout + day1.stderr
    assert day1.returncode == 0, log1[-5000:]
    assert task_states(airflow_bin, env, log1) == {"recalibrate": "success", "status": "success"}
    (run1,) = run_dirs(output)
    assert run1.name == "daily-20261107" and latest(output) == run1.name
    manifest1 = json.loads((run1 / "manifest.json").read_text())
    assert manifest1["published"] is True and manifest1["runner"] == "PortableRunner"
    # it ran on the cluster, as the Flink job named after the run
    assert any("costlib-recalibrate-20261107" in job["name"] and job["state"] == "FINISHED"
               for job in jobs(flink_cluster)), jobs(flink_cluster)

    # Day 2: the guard's limit so small that the shifted day's thresholds must be held.
    env["AIRFLOW_VAR_COSTLIB_MAX_THRESHOLD_CHANGE"] = "0.0001"
    day2 = dags_test(airflow_bin, env, "2026-11-09T02:30:00+00:00")
    log2 = day2.stdout + day2.stderr
    run2 = output / "runs" / "daily-20261108"
    manifest2 = json.loads((run2 / "manifest.json").read_text())
    assert manifest2["published"] is False and manifest2["guard"]["violations"]
    assert latest(output) == run1.name  # LATEST unmoved
    assert "HELD FOR REVIEW: run daily-20261108" in log2
    assert f"Manifest: {run2 / 'manifest.json'}" in log2
    assert "AirflowFailException" in log2
    # Not retried: one try of recalibrate (retries=1 in the DAG), never up for retry; the
    # status alert ran after it and failed too, and so did the DAG run.
    assert log2.count("[DAG TEST] starting task_id=recalibrate") == 1
    assert "up_for_retry" not in log2.lower()
    assert day2.returncode != 0 and "DagRun failed" in log2, log2[-5000:]
    assert task_states(airflow_bin, env, log2) == {"recalibrate": "failed", "status": "failed"}
