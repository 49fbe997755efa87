"""What costlib's recalibration DAGs share, whatever engine runs the pipeline.

``costlib_recalibration_dag.py`` (Dataflow) and ``costlib_recalibration_flink_dag.py`` (a Flink
cluster through Beam's job server) import this module from the DAG folder (Airflow puts that
folder on ``sys.path``): the schedule, the look-back window and run id templates, the publish
guard's limits, the exit codes, the messages of a held run and of bad input, and the
``costlib status`` alert. Nothing here imports a provider beyond Airflow's standard one.

Environment of the Airflow workers, read when a DAG is parsed: ``COSTLIB_SRC`` (/opt/costlib),
``COSTLIB_PYTHON`` (/opt/costlib-venv/bin/python; ``costlib`` is the script beside it). Airflow
Variables, read when a task runs: ``costlib_config``, ``costlib_input_pattern`` (a glob with
``{date}``), ``costlib_output``.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

# Airflow 2 and 3 spell these imports differently; the DAGs take them from here.
try:  # Airflow 3
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.sdk import DAG, BaseOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import BaseOperator
    from airflow.operators.bash import BashOperator

__all__ = ["DAG", "AirflowException", "AirflowFailException", "BaseOperator", "BashOperator"]

LOOKBACK_DAYS = 7
MAX_THRESHOLD_CHANGE = 0.2
MIN_RATED = 50
#: Exit codes of every costlib command (pipelines/commands/exit_codes.py).
BAD_INPUT, HELD_FOR_REVIEW = 2, 3
#: costlib status: LATEST older than this is stale (a daily run plus slack).
MAX_AGE_HOURS = 26
#: 02:30 UTC, like the CronJob: yesterday's partition is complete.
SCHEDULE = "30 2 * * *"
START_DATE = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)

SRC = os.environ.get("COSTLIB_SRC", "/opt/costlib")
PYTHON = os.environ.get("COSTLIB_PYTHON", "/opt/costlib-venv/bin/python")
COSTLIB = str(Path(PYTHON).parent / "costlib")
OUTPUT = "{{ var.value.costlib_output }}"


def day_before_end(days: int) -> str:
    """Jinja expression: the date ``days`` days before the run's ``data_interval_end``."""
    return "macros.ds_add(data_interval_end | ds, " + str(-days) + ")"


def lookback_input(variable: str = "costlib_input_pattern", days: int = LOOKBACK_DAYS) -> str:
    """Comma-separated globs of the ``days`` complete days before the run, oldest first."""
    return ",".join(
        "{{ var.value." + variable + " | replace('{date}', " + day_before_end(back) + ") }}"
        for back in range(days, 0, -1)
    )


#: YYYYMMDD of the window's last day (yesterday, relative to the scheduled time).
WINDOW_LAST_DAY = "{{ " + day_before_end(1) + " | replace('-', '') }}"
RUN_ID = "daily-" + WINDOW_LAST_DAY


def manifest_path(output: str, run_id: str) -> str:
    return f"{output.rstrip('/')}/runs/{run_id}/manifest.json"


def held_message(output: str, run_id: str, violations: list[str]) -> str:
    return (f"HELD FOR REVIEW: run {run_id} is complete but the publish guard kept "
            f"{output}/LATEST where it was ({len(violations)} violation(s): "
            f"{'; '.join(violations[:5])}). Manifest: {manifest_path(output, run_id)}. After "
            f"review publish it with `costlib publish --output {output} --run-id {run_id} "
            "--by NAME --reason TEXT`, or leave LATEST as it is. Not retried.")


def bad_input_message(output: str, detail: str) -> str:
    return ("costlib recalibrate refused its command line, config or input, or another run "
            f"holds {output}/.costlib-lock (exit 2, message in the log above); not retried: "
            f"{detail}")


def violations(manifest: dict | None) -> list[str]:
    return list((manifest or {}).get("guard", {}).get("violations", []))


def outcome(manifest: dict | None, output: str, run_id: str) -> None:
    """Raise for a run that is not published; return for a published one."""
    if manifest is None:
        raise AirflowException(f"the job finished but {manifest_path(output, run_id)} is "
                               "missing (see the job's log); retrying")
    if not manifest.get("published"):
        raise AirflowFailException(held_message(output, run_id, violations(manifest)))


def status_command(extra: str = "") -> str:
    """The alert: ``costlib status`` exits 3 when a run is held or LATEST is stale or broken,
    which fails the DAG run."""
    return f"{COSTLIB} status --output '{OUTPUT}' --max-age-hours {MAX_AGE_HOURS}" + extra
