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
