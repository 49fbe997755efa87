#!/usr/bin/env python3
"""Apache Airflow in a virtualenv of its own, for running costlib's DAGs with ``airflow dags test``.

    python3 tools/airflow_venv.py            # install once (cached), print the venv's path
    python3 tools/airflow_venv.py --check    # print the path if installed, else exit 1

Airflow pins many packages that conflict with costlib's pinned set (requirements/runtime.txt),
so it never goes into the project's venv: it gets its own, under
``~/.cache/costlib/airflow/<AIRFLOW_VERSION>-py<X.Y>`` (or ``$COSTLIB_AIRFLOW_CACHE``). The DAG's
tasks run costlib from the project's venv (``COSTLIB_PYTHON``), not from this one.

Airflow's constraints files live on GitHub; without them ``pip`` resolves ``apache-airflow`` from
PyPI alone, and ``pip check`` must then pass. A venv counts as installed only once that is done
(a ``.complete`` marker), so an interrupted install is redone, not reused. Exit code 2: the
install failed (no network, nothing resolved); the message says why.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

AIRFLOW_VERSION = "3.3.2"
#: What the DAGs import besides Airflow's core (the BashOperator lives in the standard provider).
PACKAGES = (f"apache-airflow=={AIRFLOW_VERSION}",)
MARKER = ".complete"


def cache_root() -> Path:
    return Path(os.environ.get("COSTLIB_AIRFLOW_CACHE",
                               Path.home() / ".cache" / "costlib" / "airflow"))


def venv_dir(python: str = sys.executable) -> Path:
    minor = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    return cache_root() / f"{AIRFLOW_VERSION}-py{minor}"


def installed(venv: Path) -> bool:
    return (venv / MARKER).exists() and (venv / "bin" / "airflow").exists()


def install(venv: Path, python: str = sys.executable) -> Path:
    """Create ``venv`` with Airflow (unless already complete); its path."""
    if installed(venv):
        return venv
    if venv.exists():
        shutil.rmtree(venv)  # an interrupted install: start over
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    steps = ([*pip, "install", "--quiet", "--upgrade", "pip"],
             [*pip, "install", "--quiet", *PACKAGES],
             [*pip, "check"])
    for step in steps:
        result = subprocess.run(step, capture_output=True, text=True)
        if result.returncode:
            raise SystemExit(f"airflow_venv: {' '.join(step[3:])} failed "
                             f"(exit {result.returncode}):\n{result.stdout}{result.stderr}")
    (venv / MARKER).write_text(" ".join(PACKAGES) + "\n")
    return venv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true",
                        help="only report: print the path if installed, else exit 1")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter for the venv (default: this one)")
    args = parser.parse_args(argv)
    venv = venv_dir(args.python)
    if args.check:
        if not installed(venv):
            return 1
    else:
        try:
            install(venv, args.python)
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
    print(venv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
