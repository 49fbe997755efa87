"""Fixtures shared by several test modules."""

import socket
import subprocess
import sys
import time

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture
def job_service():
    """Port of a running Beam local job service: the portable Job API Flink and Dataflow use."""
    sock = socket.socket()
    sock.bind(("localhost", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("localhost", port)) == 0:
                break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("local job service did not start")
    yield port
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def single_blas_thread():
    """One BLAS/OpenMP thread for a module of many tiny fits (the estimator tests): on a 2-core
    machine the default thread pools only add contention (measured 4x slower under load)."""
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def flink_cluster(tmp_path_factory):
    """A local Flink session cluster for the engine tests (``pytest -m flink``): two
    TaskManagers with one slot each (``flink_support.LAYOUT``), started once (installing Flink
    and Beam's job server on first use) and stopped by pid at the end;
    skipped without Java and Maven unless ``COSTLIB_REQUIRE_FLINK=1``."""
    from flink_support import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("engine"))
    yield cluster
    cluster.stop()
