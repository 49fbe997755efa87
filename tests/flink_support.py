"""The local Flink cluster of the engine tests (``pytest -m flink``), and CLI runs against it.

The cluster is ``tools/flink_cluster.py``'s: a JobManager and two TaskManagers with one slot
each (:data:`LAYOUT`) as separate JVMs, Beam's Flink job server and a Python worker pool
(EXTERNAL environment), started once per test session on ports of their own
(``COSTLIB_FLINK_TEST_PORT_BASE``, default 18081) with a state directory under pytest's
temporary folder, and stopped by pid at the end. A batch job runs at parallelism 2, one subtask
of each vertex on each TaskManager, so every shuffle moves rows between the two TaskManagers
over Flink's network stack (:func:`records_across_taskmanagers` shows it); an always-on job
runs at parallelism 1, the two of them side by side.

Without Java or Maven the engine tests are skipped, unless ``COSTLIB_REQUIRE_FLINK=1`` (CI sets
it), where a missing engine is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
COSTLIB = str(Path(sys.executable).parent / "costlib")


def cluster_module():
    spec = importlib.util.spec_from_file_location("flink_cluster",
                                                  ROOT / "tools" / "flink_cluster.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("flink_cluster", module)
    spec.loader.exec_module(module)
    return sys.modules["flink_cluster"]


#: (TaskManagers, slots each) of the engine tests' cluster.
LAYOUT = (2, 1)


def start_cluster(tmp_root: Path):
    """Start the session's cluster (installing Flink and the job server once), or skip."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        if os.environ.get("COSTLIB_REQUIRE_FLINK") == "1":
            pytest.fail(f"the Flink tests need {' and '.join(missing)} (COSTLIB_REQUIRE_FLINK=1)")
        pytest.skip(f"the Flink tests need {' and '.join(missing)}")
    flink = cluster_module()
    base = int(os.environ.get("COSTLIB_FLINK_TEST_PORT_BASE", "18081"))
    cluster = flink.Cluster(flink.Ports(base), tmp_root / "flink-cluster",
                            layout=flink.Layout(*LAYOUT))
    try:
        cluster.start(timeout=240)
    except Exception:
        cluster.stop()
        raise
    return cluster


def engine_config(path: Path, **overrides) -> str:
    """A run config for the engine tests (the demo's columns, two methods), written to
    ``path``; ``overrides`` replace top-level sections."""
    import yaml

    raw = {
        "columns": {"weight": "weight", "probability": "probability", "set_id": "set_id"},
        "classifiers": ["text_model", "image_model"],
        "target": {"marginal_precision": 0.3},
        "methods": ["graph", "hull"],
        "min_rated": {"positives": 5, "negatives": 5},
        "decoding": {"loss": "f1"},
    }
    raw.update(overrides)
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def run_cli(*args: str, timeout: float = 600, **popen) -> subprocess.CompletedProcess:
    """``costlib ARGS`` in a fresh process, as a user runs it."""
    return subprocess.run([COSTLIB, *args], capture_output=True, text=True, timeout=timeout,
                          **popen)


def records(run_dir: Path) -> list[dict]:
    """A run's operating point records without the run id, sorted by (group, method)."""
    text = (run_dir / "operating_points.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = [{k: v for k, v in r.items() if k != "run_id"} for r in rows]
    return sorted(out, key=lambda r: (str(r["group"]), r["method"]))


def run_dirs(output: Path) -> list[Path]:
    return sorted((output / "runs").iterdir()) if (output / "runs").is_dir() else []


def latest(output: Path) -> str | None:
    pointer = output / "LATEST"
    return pointer.read_text().strip() if pointer.exists() else None


def decisions(run_dir: Path):
    """A decide run's decisions, every file, sorted by item id."""
    files = sorted((run_dir / "decisions").rglob("*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    return table.to_pandas().sort_values(["item_id"], kind="stable").reset_index(drop=True)


def jobs(cluster, attempts: int = 4) -> list[dict]:
    """The Flink jobs the JobManager knows (id, name, state). A JobManager busy with a lost
    TaskManager can leave its REST API unanswered for a few seconds: asked again, up to
    ``attempts`` times, 15 s each."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(f"http://localhost:{cluster.ports.rest}/jobs/overview",
                                        timeout=15) as response:
                return json.load(response)["jobs"]
        except (TimeoutError, urllib.error.URLError, ConnectionError):
            if attempt == attempts - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def wait_for_running_job(cluster, known: set[str], timeout: float = 120) -> str:
    """The id of a job not in ``known`` once it is RUNNING with a running task."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in jobs(cluster):
            if job["jid"] not in known and job["state"] == "RUNNING" \
                    and job["tasks"].get("running", 0) > 0:
                return job["jid"]
        time.sleep(0.3)
    raise AssertionError("no new Flink job reached RUNNING")


def wait_for_job_end(cluster, jid: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = {j["jid"]: j["state"] for j in jobs(cluster)}.get(jid)
        if state in ("FINISHED", "FAILED", "CANCELED"):
            return state
        time.sleep(0.5)
    raise AssertionError(f"Flink job {jid} did not end")


def cancel_job(cluster, jid: str) -> None:
    request = urllib.request.Request(
        f"http://localhost:{cluster.ports.rest}/jobs/{jid}?mode=cancel", method="PATCH")
    urllib.request.urlopen(request, timeout=15).close()


def _rest(cluster, path: str):
    with urllib.request.urlopen(f"http://localhost:{cluster.ports.rest}{path}",
                                timeout=15) as response:
        return json.load(response)


def records_across_taskmanagers(cluster, jid: str) -> list[str]:
    """The exchanges of Flink job ``jid`` (ended or running) that provably moved records
    between TaskManagers: into a vertex of one input, where its subtasks on one TaskManager
    read more records than all producing subtasks on that TaskManager wrote, so that the rest
    came from another TaskManager (a subtask's ``write-records`` counts every output, which
    only makes the test stricter; a vertex of several inputs counts them together, so it is
    left out). One line per such exchange, naming its strategy, the TaskManager and the two
    counts; empty when none did."""
    job = _rest(cluster, f"/jobs/{jid}")
    by_tm: dict[str, dict[str, tuple[int, int]]] = {}
    for vertex in job["vertices"]:
        counts: dict[str, tuple[int, int]] = {}
        for sub in _rest(cluster, f"/jobs/{jid}/vertices/{vertex['id']}")["subtasks"]:
            tm = sub["taskmanager-id"].split("_", 1)[0]
            read, written = counts.get(tm, (0, 0))
            counts[tm] = (read + int(sub["metrics"]["read-records"]),
                          written + int(sub["metrics"]["write-records"]))
        by_tm[vertex["id"]] = counts
    crossed = []
    for node in job["plan"]["nodes"]:
        for edge in node.get("inputs", []):
            if edge["ship_strategy"] == "Forward" or len(node["inputs"]) != 1:
                continue
            for tm, (read, _) in by_tm[node["id"]].items():
                local = by_tm[edge["id"]].get(tm, (0, 0))[1]
                if read > local:
                    crossed.append(f"{edge['ship_strategy']} into "
                                   f"{node['description'][:60]!r} on {tm}: read {read} records,"
                                   f" its producers there wrote {local}")
    return crossed


def wait_for(predicate, what: str, timeout: float = 180, poll: float = 0.5):
    """The first truthy value of ``predicate()`` (an ``OSError``, ``ValueError`` or
    ``KeyError`` counts as not yet: a file being written); fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, ValueError, KeyError):
            value = None
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")
