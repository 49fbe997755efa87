"""costlib's Beam worker pool (``costlib_pipelines.worker_pool``): Beam's EXTERNAL worker pool
service whose SDK workers are forks of a server that imported Beam and costlib's pipelines.

Truth: a pipeline submitted through Beam's local job service (``job_service`` fixture) with
``--environment_type=EXTERNAL`` pointing at the pool returns what the same transforms compute
in plain Python, and the process that ran the DoFn is a child of the fork server (not of the
pool, which is what Beam's own pool would make it) with costlib's recalibrate pipeline already
imported before any of its code was asked for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


@pytest.fixture
def pool():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from costlib_pipelines.worker_pool import main; main()",
         f"--service_port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("localhost", port)) == 0:
                break
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    yield port, process.pid
    process.terminate()
    process.wait(30)


def test_workers_are_forks_of_the_preloaded_server_and_compute_as_python_does(
        job_service, pool):
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that, equal_to

    port, pool_pid = pool
    test_pid = os.getpid()
    options = PipelineOptions([
        "--runner=PortableRunner", f"--job_endpoint=localhost:{job_service}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{port}"])

    def verdict(worker: tuple[int, int, bool]) -> str:
        pid, parent, preloaded = worker
        if pid in (test_pid, pool_pid) or parent == pool_pid:
            return f"worker {pid} (parent {parent}) is not a fork of the fork server"
        return "ok" if preloaded else f"worker {pid} had not imported costlib's pipelines"

    with beam.Pipeline(options=options) as p:
        numbers = p | beam.Create(range(30))
        sums = numbers | "Key" >> beam.Map(lambda x: (x % 3, x)) | beam.CombinePerKey(sum)
        assert_that(sums, equal_to([(0, 135), (1, 145), (2, 155)]), label="Sums")
        verdicts = (numbers
                    | "Where" >> beam.Map(lambda x: (os.getpid(), os.getppid(),
                                                     "costlib_pipelines.recalibrate.pipeline"
                                                     in sys.modules))
                    | "Workers" >> beam.Distinct()
                    | "Verdict" >> beam.Map(verdict)
                    | "Verdicts" >> beam.Distinct())
        assert_that(verdicts, equal_to(["ok"]), label="EveryWorker")


def _sleep_forever(*_args) -> None:
    time.sleep(600)


class _Request:
    """A StartWorker/StopWorker request: the fields the pool reads."""

    def __init__(self, worker_id: str, control_url: str = ""):
        self.worker_id = worker_id
        self.control_endpoint = type("Endpoint", (), {"url": control_url})()


def _listen(port: int) -> socket.socket:
    """A job's control endpoint, opened after the workers forked (a fork would inherit it)."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("localhost", port))
    server.listen()
    return server


def _wait_until(condition, timeout: float = 20.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_worker_id_two_jobs_share_stops_only_the_worker_whose_job_closed(monkeypatch):
    """Two jobs number their workers alike (``1-1``): stopping the id for the job whose
    control endpoint closed stops that job's worker only; the other job's worker runs on. A
    stop of an id one worker holds stops it at once; a stop of a shared id while both jobs
    still answer stops neither."""
    import multiprocessing

    from costlib_pipelines import worker_pool

    monkeypatch.setattr(worker_pool, "run_worker", _sleep_forever)
    pool = worker_pool.ForkingWorkerPool()
    pool.context = multiprocessing.get_context("fork")
    pool.ambiguous_grace = 2.0
    port_a, port_b = _free_port(), _free_port()
    pool.StartWorker(_Request("1-1", f"localhost:{port_a}"), None)
    pool.StartWorker(_Request("1-1", f"localhost:{port_b}"), None)
    pool.StartWorker(_Request("1-2", f"localhost:{port_b}"), None)
    job_a, job_b = _listen(port_a), _listen(port_b)
    try:
        worker_a, worker_b = (w.process for w in pool.workers["1-1"])
        only_b = pool.workers["1-2"][0].process

        pool.StopWorker(_Request("1-1"), None)  # both jobs still answer: neither stopped
        time.sleep(pool.ambiguous_grace + 1.5)
        assert worker_a.is_alive() and worker_b.is_alive()

        job_a.close()  # job A's environment is torn down, then its runner stops 1-1
        pool.StopWorker(_Request("1-1"), None)
        assert _wait_until(lambda: not worker_a.is_alive())
        assert worker_b.is_alive() and only_b.is_alive()
        assert [w.process for w in pool.workers["1-1"]] == [worker_b]

        pool.StopWorker(_Request("1-1"), None)  # now one holder: stopped at once
        assert not worker_b.is_alive()
        pool.StopWorker(_Request("1-2"), None)
        assert not only_b.is_alive() and pool.workers == {}
    finally:
        job_a.close()
        job_b.close()
        pool.stop_all()
