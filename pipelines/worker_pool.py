"""A Beam worker pool (EXTERNAL environment) whose SDK workers start with Beam and costlib
already imported.

    python -c 'from costlib_pipelines.worker_pool import main; main()' --service_port=8086

(``-c`` rather than ``-m``: a forked worker re-runs its parent's main module, by name or by
file, before its target; started from ``-c`` there is none to re-run.)

Beam's own pool (``apache_beam.runners.worker.worker_pool_main``) starts each SDK worker as a
new interpreter (``python -c "... SdkHarness(...).run()"``), which imports Beam, pandas,
pyarrow and costlib's pipeline modules before its first bundle: about 1.8 CPU-seconds per
worker, paid by every job on every TaskManager. This pool answers the same gRPC service
(``BeamFnExternalWorkerPool``: ``StartWorker``, ``StopWorker``) but starts each worker with
:mod:`multiprocessing`'s ``forkserver``: one server process, started once with the pool,
imports :data:`PRELOAD`, and each worker is a fork of it, so a worker starts in milliseconds
and shares the imported modules' memory with its siblings until it writes to it. The fork
server is a fresh interpreter that has opened no gRPC channel and started no thread, so the
fork is safe for gRPC; each worker opens its own channels to the runner.

A worker is the same ``SdkHarness`` Beam's pool runs, with the same arguments. A module of
:data:`PRELOAD` that cannot be imported (``ImportError``) is skipped by the fork server and left
to the workers to import themselves.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import signal
import socket
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any

#: What the fork server imports once: Beam's SDK harness and every costlib pipeline's modules
#: (the DoFns the workers unpickle).
PRELOAD = (
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.worker.sdk_worker_main",
    "apache_beam.io.parquetio",
    "costlib_pipelines.recalibrate.pipeline",
    "costlib_pipelines.decide.pipeline",
    "costlib_pipelines.follow.recalibrate_stream",
    "costlib_pipelines.follow.decide_stream",
)

_LOGGER = logging.getLogger(__name__)


def run_worker(control_address: str, worker_id: str, state_cache_size: int,
               data_buffer_time_limit_ms: int) -> None:
    """One SDK worker: Beam's ``SdkHarness`` until the runner closes its control stream."""
    from apache_beam.runners.worker.sdk_worker import SdkHarness

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    SdkHarness(control_address, worker_id=worker_id, state_cache_size=state_cache_size,
               data_buffer_time_limit_ms=data_buffer_time_limit_ms).run()


def _endpoint_open(url: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (a runner's control
    endpoint: it closes when the job's environment on that TaskManager is torn down)."""
    host, _, port = url.rpartition(":")
    try:
        with socket.create_connection((host or "localhost", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


@dataclass
class Worker:
    """One forked SDK worker and the control endpoint of the job it serves."""

    process: Any
    control_url: str


class ForkingWorkerPool:
    """The ``BeamFnExternalWorkerPool`` service, its workers forked from a preloaded server.

    Worker ids are not unique across jobs: each job's runner numbers its workers from its own
    counter (``1-1``, ``1-2``, ...), so two jobs on one pool start workers of the same id.
    Beam's own pool keeps one process per id, so stopping one job's worker killed another job's
    worker of that id (and leaked the first). This pool keeps every worker of an id with its
    job's control endpoint: a stop of an id that one live worker holds stops it; a stop of an id
    that several hold stops those whose control endpoint has closed (their job's environment is
    gone), checked for up to :attr:`ambiguous_grace` seconds in the background, and never a
    worker whose job still answers.
    """

    #: Seconds a stop of a shared worker id waits for the stopped job's endpoint to close.
    ambiguous_grace = 30.0

    def __init__(self, state_cache_size: int = 0, data_buffer_time_limit_ms: int = -1) -> None:
        self.state_cache_size = state_cache_size
        self.data_buffer_time_limit_ms = data_buffer_time_limit_ms
        self.context = multiprocessing.get_context("forkserver")
        self.workers: dict[str, list[Worker]] = {}
        self.lock = threading.Lock()

    def StartWorker(self, request: Any, context: Any) -> Any:
        from apache_beam.portability.api import beam_fn_api_pb2

        try:
            process = self.context.Process(
                target=run_worker, name=f"sdk-worker-{request.worker_id}", daemon=False,
                args=(request.control_endpoint.url, request.worker_id, self.state_cache_size,
                      self.data_buffer_time_limit_ms))
            process.start()
            with self.lock:
                self.workers.setdefault(request.worker_id, []).append(
                    Worker(process, request.control_endpoint.url))
            _LOGGER.info("started SDK worker %s (pid %s) for %s", request.worker_id,
                         process.pid, request.control_endpoint.url)
            self._reap()
            return beam_fn_api_pb2.StartWorkerResponse()
        except Exception as error:
            _LOGGER.exception("could not start SDK worker %s", request.worker_id)
            return beam_fn_api_pb2.StartWorkerResponse(error=f"{type(error).__name__}: {error}")

    def StopWorker(self, request: Any, context: Any) -> Any:
        from apache_beam.portability.api import beam_fn_api_pb2

        self._reap()
        with self.lock:
            holders = list(self.workers.get(request.worker_id, []))
        if len(holders) == 1:
            self._forget(request.worker_id, holders[0])
            _LOGGER.info("stopping SDK worker %s (pid %s)", request.worker_id,
                         holders[0].process.pid)
            self._stop(holders[0].process)
        elif holders:
            _LOGGER.info("stop of SDK worker %s, held by %d workers of different jobs: "
                         "stopping those whose job's endpoint closes", request.worker_id,
                         len(holders))
            threading.Thread(target=self._stop_closed, args=(request.worker_id, holders),
                             daemon=True).start()
        return beam_fn_api_pb2.StopWorkerResponse()

    def _stop_closed(self, worker_id: str, holders: list[Worker]) -> None:
        """Stop the workers of ``holders`` whose control endpoint closes within the grace."""
        deadline = time.monotonic() + self.ambiguous_grace
        while True:
            closed = [w for w in holders if w.process.is_alive()
                      and not _endpoint_open(w.control_url)]
            if closed or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for worker in closed:
            self._forget(worker_id, worker)
            _LOGGER.info("stopping SDK worker %s (pid %s): %s closed", worker_id,
                         worker.process.pid, worker.control_url)
            self._stop(worker.process)
        if not closed:
            _LOGGER.warning("stop of SDK worker %s: every worker of that id still has its job's "
                            "endpoint; none stopped (each ends when its job closes it)",
                            worker_id)

    def _forget(self, worker_id: str, worker: Worker) -> None:
        with self.lock:
            held = self.workers.get(worker_id, [])
            if worker in held:
                held.remove(worker)
            if not held:
                self.workers.pop(worker_id, None)

    @staticmethod
    def _stop(process: Any, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds, as Beam's pool stops a worker."""
        if process.is_alive():
            process.terminate()
            process.join(grace)
            if process.is_alive():
                process.kill()
                process.join()

    def _reap(self) -> None:
        """Forget workers that ended by themselves (their runner closed the stream)."""
        with self.lock:
            for worker_id, held in list(self.workers.items()):
                for worker in [w for w in held if not w.process.is_alive()]:
                    worker.process.join(0)
                    held.remove(worker)
                if not held:
                    del self.workers[worker_id]

    def stop_all(self) -> None:
        with self.lock:
            processes = [w.process for held in self.workers.values() for w in held]
            self.workers.clear()
        for process in processes:
            self._stop(process)


def serve(port: int, state_cache_size: int = 0, data_buffer_time_limit_ms: int = -1) -> None:
    """Start the fork server (preloading), then serve the pool on ``port`` until SIGTERM."""
    from multiprocessing import forkserver

    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc

    pool = ForkingWorkerPool(state_cache_size, data_buffer_time_limit_ms)
    pool.context.set_forkserver_preload(["costlib_pipelines.worker_pool", *PRELOAD])
    started = time.monotonic()
    forkserver.ensure_running()  # now, before this process starts gRPC's threads
    _LOGGER.info("fork server started (%.1f s)", time.monotonic() - started)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.http2.max_pings_without_data", 0),
                                  ("grpc.http2.max_ping_strikes", 0)])
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    _LOGGER.info("worker pool listening on port %d; workers fork from a server that preloads "
                 "%s", port, ", ".join(PRELOAD))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    while not done.wait(60):
        pool._reap()
    server.stop(5)
    pool.stop_all()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--service_port", type=int, required=True)
    parser.add_argument("--state_cache_size", type=int, default=0)
    parser.add_argument("--data_buffer_time_limit_ms", type=int, default=-1)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    serve(args.service_port, args.state_cache_size, args.data_buffer_time_limit_ms)


if __name__ == "__main__":  # works, but each worker re-runs this module first (see above)
    # by its package name, so that the workers' target pickles as
    # costlib_pipelines.worker_pool.run_worker, which the fork server has imported
    from costlib_pipelines.worker_pool import main as package_main

    package_main()
