#!/usr/bin/env python3
"""A Flink session cluster on this machine for costlib's Beam pipelines: one command.

    .venv/bin/python tools/flink_cluster.py start     # install once (cached), start, wait
    .venv/bin/python tools/flink_cluster.py status    # each process and its health
    .venv/bin/python tools/flink_cluster.py flags     # the Beam flags that submit to it
    .venv/bin/python tools/flink_cluster.py stop      # stop what start started, by pid

    .venv/bin/python tools/flink_cluster.py start --taskmanagers 2 --slots 1
    .venv/bin/python tools/flink_cluster.py kill taskmanager --index 1   # SIGKILL one
    .venv/bin/python tools/flink_cluster.py start-taskmanager --index 1  # and bring it back

``start`` installs (once, into ``~/.cache/costlib/flink``, or ``$COSTLIB_FLINK_CACHE``):

* **Flink** ``FLINK_VERSION`` from PyPI, without its Python dependencies: the ``apache-flink``
  wheel's ``pyflink/bin`` and ``pyflink/conf`` and the ``apache-flink-libraries`` package's
  ``lib/``, ``opt/`` and ``plugins/`` form a ``FLINK_HOME``;
* **Beam's Flink job server** ``BEAM_FLINK_RUNNER_VERSION`` from Maven Central: the unshaded
  ``beam-runners-flink-<FLINK_MINOR>`` and its dependencies (``deploy/flink/job-server/pom.xml``),
  plus a small jar whose manifest names them (``Main-Class: FlinkJobServerDriver``), so that
  ``java -jar`` and Beam's ``--flink_job_server_jar`` both run it;

then starts, each as a process of its own whose pid is written to the state directory, and
waits until each is healthy:

1. a JobManager (REST on ``--port-base``),
2. ``--taskmanagers`` TaskManagers (default 1) with ``--slots`` task slots each (default 2),
   each a JVM of its own registered with the JobManager under the resource id
   ``taskmanager-<index>_<start time>``, with its own temporary directory, its own log
   (``log/taskmanager-<index>.out`` and ``log/taskmanager-<index>/``) and random RPC and data
   ports, so that data between tasks on different TaskManagers goes over Flink's network stack
   as on a cluster of machines; the JobManager spreads a job's tasks evenly over them;
3. the Beam job server (Job API on ``port-base + 2``, artifacts ``+ 3``, expansion ``+ 4``),
4. one Beam Python worker pool (``port-base + 5``) running this interpreter, so the SDK
   environment is ``EXTERNAL`` and Python code runs in worker processes apart from the
   submitter, as on a cluster. It is costlib's (``costlib_pipelines.worker_pool``): Beam's
   pool service, its SDK workers forked from a process that imported Beam and costlib's
   pipelines once, so a worker does not pay those imports (about 1.8 CPU-seconds) itself.

On one host one worker pool serves every TaskManager: each TaskManager asks the pool at
``localhost:<port-base + 5>`` for its SDK workers, and the workers reach back to the
TaskManager that asked. (On Kubernetes, ``deploy/flink/flink-session.yaml`` runs one worker
pool beside each TaskManager, in its pod, since ``localhost`` there is the pod.)

Beam's runner classes are on every Flink JVM's class path, loaded parent-first: Beam then
keeps a job's SDK workers for ``--environment_cache_millis`` after a stage's tasks end, so the
next stage reuses them instead of starting new Python processes (Beam releases them at once
when its classes come with the job, in the job's own class loader). ``flags`` passes the
setting, with a parallelism that spreads a batch job over every slot of every TaskManager
(``--streaming``: half of them, for the two always-on jobs side by side).

Versions come from ``deploy/flink/versions.env``. The state directory (``--state-dir``, default
``~/.cache/costlib/flink/cluster-<port-base>``) holds the generated Flink configuration, the
logs and ``pids.json``. ``stop`` sends SIGTERM to each started process group, then SIGKILL after
a grace period; it never touches a process it did not start. Stdlib only (and PyYAML, which
costlib's runtime has), so it runs with the project's venv interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS_FILE = ROOT / "deploy" / "flink" / "versions.env"
JOB_SERVER_POM = ROOT / "deploy" / "flink" / "job-server" / "pom.xml"
JOB_SERVER_MAIN = "org.apache.beam.runners.flink.FlinkJobServerDriver"
DEFAULT_PORT_BASE = 8081

#: What Java 17 must open for Flink's and Beam's reflection (Flink's own conf ships most of
#: these for its JVMs; the job server needs them too).
JAVA_OPENS = tuple(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net",
                    "java.nio", "java.text", "java.time", "java.util", "java.util.concurrent",
                    "java.util.concurrent.atomic", "java.util.concurrent.locks", "sun.nio.ch"))


#: How long Beam keeps a job's SDK workers after a stage's last bundle, for the next stage
#: (``--environment_cache_millis``): longer than a stage's gap to the next, shorter than a
#: schedule's gap between jobs.
ENVIRONMENT_CACHE_MILLIS = 30_000


class ClusterError(RuntimeError):
    """The cluster could not be installed, started or found healthy (the message says which)."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """``KEY=value`` lines of ``deploy/flink/versions.env`` (comments and blanks skipped)."""
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            versions[key.strip()] = value.strip()
    return versions


def cache_root() -> Path:
    return Path(os.environ.get("COSTLIB_FLINK_CACHE", Path.home() / ".cache" / "costlib" / "flink"))


@dataclass(frozen=True)
class Ports:
    """The cluster's TCP ports, all on localhost, from one base."""

    base: int = DEFAULT_PORT_BASE

    @property
    def rest(self) -> int:
        return self.base

    @property
    def jobmanager_rpc(self) -> int:
        return self.base + 1

    @property
    def job(self) -> int:
        return self.base + 2

    @property
    def artifact(self) -> int:
        return self.base + 3

    @property
    def expansion(self) -> int:
        return self.base + 4

    @property
    def worker_pool(self) -> int:
        return self.base + 5

    def all(self) -> dict[str, int]:
        return {"rest": self.rest, "jobmanager_rpc": self.jobmanager_rpc, "job": self.job,
                "artifact": self.artifact, "expansion": self.expansion,
                "worker_pool": self.worker_pool}


@dataclass(frozen=True)
class Layout:
    """How many TaskManagers, and how many task slots each."""

    taskmanagers: int = 1
    slots: int = 2

    def __post_init__(self) -> None:
        if not (1 <= self.taskmanagers <= 16 and 1 <= self.slots <= 32):
            raise ClusterError(f"--taskmanagers must be 1-16 and --slots 1-32, got "
                               f"{self.taskmanagers} and {self.slots}")

    @property
    def total_slots(self) -> int:
        return self.taskmanagers * self.slots

    @property
    def batch_parallelism(self) -> int:
        """A batch job over every slot of every TaskManager."""
        return self.total_slots

    @property
    def streaming_parallelism(self) -> int:
        """Half the slots: the two always-on jobs (recalibrate and decide ``--follow``) run
        side by side."""
        return max(1, self.total_slots // 2)

    @property
    def memory(self) -> tuple[str, str]:
        """(process size, network memory) of one TaskManager: 3 GB for 4 slots, 2.5 GB for
        2, and 192 MB of network buffers per slot (Beam's batch graphs open many shuffle
        channels at once; 384 MB ran a parallelism-2 job on one TaskManager)."""
        return f"{2048 + 256 * self.slots}m", f"{192 * self.slots}m"

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"taskmanagers": self.taskmanagers, "slots": self.slots}))

    @classmethod
    def load(cls, path: Path) -> Layout | None:
        try:
            raw = json.loads(path.read_text())
            return cls(int(raw["taskmanagers"]), int(raw["slots"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


# ----------------------------------------------------------------------------- installing

def _log(message: str) -> None:
    print(f"flink_cluster: {message}", file=sys.stderr, flush=True)


def install_flink(versions: dict[str, str], root: Path | None = None) -> Path:
    """``FLINK_HOME`` of ``FLINK_VERSION``, installed from PyPI on first use (about 230 MB)."""
    version = versions["FLINK_VERSION"]
    home = (root or cache_root()) / f"flink-{version}"
    if (home / "lib" / f"flink-dist-{version}.jar").is_file() \
            and (home / "bin" / "jobmanager.sh").is_file():
        return home
    downloads = home.with_name(home.name + ".download")
    shutil.rmtree(downloads, ignore_errors=True)
    downloads.mkdir(parents=True)
    _log(f"installing Flink {version} from PyPI into {home}")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                    "apache-flink-libraries", "-d", str(downloads),
                    f"apache-flink=={version}", f"apache-flink-libraries=={version}"],
                   check=True)
    staging = home.with_name(home.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    wheel = next(downloads.glob("apache_flink-*.whl"))
    with zipfile.ZipFile(wheel) as archive:  # pyflink/bin and pyflink/conf
        for member in archive.namelist():
            if member.startswith(("pyflink/bin/", "pyflink/conf/")):
                archive.extract(member, staging)
    sdist = next(downloads.glob("apache-flink-libraries-*.tar.gz"))
    with tarfile.open(sdist) as archive:  # deps/lib, deps/opt, deps/plugins, deps/bin
        prefix = f"apache-flink-libraries-{version}/deps/"
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)
                   and m.name.split("/")[2] in ("lib", "opt", "plugins", "bin")]
        for member in members:
            member.name = member.name[len(prefix):]
        archive.extractall(staging / "pyflink", members=members, filter="data")
    for script in (staging / "pyflink" / "bin").iterdir():
        script.chmod(0o755)
    shutil.rmtree(home, ignore_errors=True)
    (staging / "pyflink").rename(home)
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(downloads, ignore_errors=True)
    return home


def _manifest_class_path(jars: list[str]) -> bytes:
    """A JAR manifest naming ``jars`` (relative paths) as its class path, lines <= 72 bytes."""
    def wrap(line: str) -> list[str]:
        raw = line.encode()
        parts = [raw[:72]]
        raw = raw[72:]
        while raw:
            parts.append(b" " + raw[:71])
            raw = raw[71:]
        return [p.decode() for p in parts]

    lines = ["Manifest-Version: 1.0", f"Main-Class: {JOB_SERVER_MAIN}",
             *wrap("Class-Path: " + " ".join(jars)), "", ""]
    return "\r\n".join(lines).encode()


def install_job_server(versions: dict[str, str], root: Path | None = None) -> Path:
    """The job server's launcher jar (its class path: ``lib/`` beside it), built on first use."""
    flink_minor, beam = versions["FLINK_MINOR"], versions["BEAM_FLINK_RUNNER_VERSION"]
    folder = (root or cache_root()) / f"beam-flink-{flink_minor}-job-server-{beam}"
    launcher = folder / f"beam-runners-flink-{flink_minor}-job-server-{beam}.jar"
    if launcher.is_file():
        return launcher
    if shutil.which("mvn") is None:
        raise ClusterError("Maven (mvn) is needed to fetch Beam's Flink job server: "
                           "apt-get install maven")
    _log(f"fetching Beam {beam}'s Flink {flink_minor} runner and its dependencies (Maven)")
    lib = folder / "lib"
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run(["mvn", "-B", "-q", "-f", str(JOB_SERVER_POM), "dependency:copy-dependencies",
                    f"-Dflink.minor={flink_minor}", f"-Dbeam.version={beam}",
                    f"-DoutputDirectory={lib}"], check=True)
    jars = sorted(f"lib/{p.name}" for p in lib.glob("*.jar"))
    if not any(f"beam-runners-flink-{flink_minor}-{beam}" in j for j in jars):
        raise ClusterError(f"Maven did not resolve beam-runners-flink-{flink_minor}:{beam}")
    partial = launcher.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", _manifest_class_path(jars))
    partial.rename(launcher)
    return launcher


# ----------------------------------------------------------------------------- configuration

def beam_class_path(job_server_jar: Path) -> str:
    """The job server's Beam jars and their dependencies, without the Flink jars (the Flink
    distribution's own are on the class path): what puts Beam's runner on a Flink JVM's class
    path (see the module docstring)."""
    lib = job_server_jar.parent / "lib"
    return ":".join(str(j) for j in sorted(lib.glob("*.jar")) if not j.name.startswith("flink-"))


def flink_config(flink_home: Path, state: Path, ports: Ports,
                 layout: Layout | None = None) -> dict[str, object]:
    """The Flink configuration: localhost only, ``layout``'s slots per TaskManager, memory for
    a 2-core, 24 GB machine, a job's tasks spread evenly over the TaskManagers, Beam's classes
    parent-first, fast failure detection and a bounded restart strategy (a lost TaskManager is
    retried)."""
    import yaml

    layout = layout or Layout()
    process, network = layout.memory

    shipped = yaml.safe_load((flink_home / "conf" / "config.yaml").read_text()) or {}
    java_opts = (((shipped.get("env") or {}).get("java") or {}).get("opts") or {}).get("all", "")
    return {
        "env.java.opts.all": java_opts,
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": ports.jobmanager_rpc,
        "jobmanager.bind-host": "localhost",
        "jobmanager.memory.process.size": "1200m",
        "rest.address": "localhost",
        "rest.bind-address": "localhost",
        "rest.port": ports.rest,
        "taskmanager.bind-host": "localhost",
        "taskmanager.host": "localhost",
        # 2 slots by default: a batch job at parallelism 2, or the two always-on streaming jobs
        # side by side (recalibrate --follow and decide --follow, 1 each)
        "taskmanager.numberOfTaskSlots": layout.slots,
        "taskmanager.memory.process.size": process,
        # Beam's batch graphs open many shuffle channels at once: the default 10% network
        # memory (about 128 MB at 3 GB) runs out ("Insufficient number of network buffers").
        "taskmanager.memory.network.min": network,
        "taskmanager.memory.network.max": network,
        "parallelism.default": layout.batch_parallelism,
        # a job's subtasks over every TaskManager rather than filling the first one's slots
        "cluster.evenly-spread-out-slots": True,
        # Beam's classes from the JVM's class path (the module docstring says why)
        "classloader.resolve-order": "parent-first",
        "blob.server.port": "0",
        "io.tmp.dirs": str(state / "tmp"),
        "heartbeat.interval": 2000,
        "heartbeat.timeout": 12000,
        # A restart waits this long for a slot (Flink's default: 5 minutes): a lost
        # TaskManager that does not come back fails the job in about 3 x (30 s + 5 s).
        "slot.request.timeout": 30000,
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 3,
        "restart-strategy.fixed-delay.delay": "5 s",
        "execution.checkpointing.dir": f"file://{state / 'checkpoints'}",
        "state.checkpoints.dir": f"file://{state / 'checkpoints'}",
        "state.savepoints.dir": f"file://{state / 'savepoints'}",
    }


def write_config(flink_home: Path, state: Path, ports: Ports,
                 layout: Layout | None = None) -> Path:
    """A configuration directory of this cluster's own (the installed one is left unchanged)."""
    import yaml

    conf = state / "conf"
    shutil.rmtree(conf, ignore_errors=True)
    shutil.copytree(flink_home / "conf", conf)
    (conf / "config.yaml").write_text(
        yaml.safe_dump(flink_config(flink_home, state, ports, layout)))
    for folder in ("log", "tmp", "checkpoints", "savepoints"):
        (state / folder).mkdir(parents=True, exist_ok=True)
    return conf


# ----------------------------------------------------------------------------- processes

def default_state_dir(ports: Ports) -> Path:
    return cache_root() / f"cluster-{ports.base}"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def rest_overview(ports: Ports) -> dict[str, object] | None:
    """The JobManager's ``/overview`` (task managers, slots, jobs), or None when not up."""
    try:
        with urllib.request.urlopen(f"http://localhost:{ports.rest}/overview", timeout=2) as r:
            return json.load(r)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own child not yet reaped) is not alive
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


def rest_taskmanagers(ports: Ports) -> list[dict[str, object]] | None:
    """The JobManager's ``/taskmanagers`` (id, slots, free slots of each registered one), or
    None when not up."""
    try:
        with urllib.request.urlopen(f"http://localhost:{ports.rest}/taskmanagers",
                                    timeout=2) as r:
            return list(json.load(r)["taskmanagers"])
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None


class Cluster:
    """The processes of one local cluster, recorded in ``state/pids.json``; its layout (how
    many TaskManagers, how many slots each) in ``state/layout.json`` (without one, as the
    JobManager on these ports reports it, else the default)."""

    def __init__(self, ports: Ports | None = None, state: Path | None = None,
                 versions: dict[str, str] | None = None, layout: Layout | None = None,
                 preforked: bool = True) -> None:
        self.ports = ports or Ports()
        self.preforked = preforked
        self.state = Path(state) if state else default_state_dir(self.ports)
        self.versions = versions or read_versions()
        self.layout = (layout or Layout.load(self.layout_file) or self._running_layout()
                       or Layout())

    def _running_layout(self) -> Layout | None:
        """The layout of a cluster already running on these ports whose state directory is
        elsewhere (``flags --port-base`` of a cluster started with its own ``--state-dir``),
        as its JobManager reports it; None when none answers."""
        overview = rest_overview(self.ports) or {}
        managers, slots = int(overview.get("taskmanagers", 0)), int(overview.get("slots-total", 0))
        if managers < 1 or slots < managers:
            return None
        return Layout(managers, slots // managers)

    # -- bookkeeping
    @property
    def pid_file(self) -> Path:
        return self.state / "pids.json"

    @property
    def layout_file(self) -> Path:
        return self.state / "layout.json"

    @property
    def names(self) -> tuple[str, ...]:
        """Every process of this cluster, by name, in start order."""
        return ("jobmanager", *self.taskmanager_names, "job_server", "worker_pool")

    @property
    def taskmanager_names(self) -> tuple[str, ...]:
        return tuple(taskmanager_name(i) for i in range(self.layout.taskmanagers))

    def pids(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads(self.pid_file.read_text()).items()}
        except (OSError, ValueError):
            return {}

    def _record(self, name: str, pid: int) -> None:
        pids = self.pids()
        pids[name] = pid
        self.state.mkdir(parents=True, exist_ok=True)
        partial = self.pid_file.with_suffix(".partial")
        partial.write_text(json.dumps(pids, indent=1))
        partial.replace(self.pid_file)

    def _forget(self, name: str) -> None:
        pids = self.pids()
        pids.pop(name, None)
        self.pid_file.write_text(json.dumps(pids, indent=1))

    # -- paths
    @property
    def flink_home(self) -> Path:
        return cache_root() / f"flink-{self.versions['FLINK_VERSION']}"

    @property
    def job_server_jar(self) -> Path:
        minor, beam = self.versions["FLINK_MINOR"], self.versions["BEAM_FLINK_RUNNER_VERSION"]
        return (cache_root() / f"beam-flink-{minor}-job-server-{beam}"
                / f"beam-runners-flink-{minor}-job-server-{beam}.jar")

    def log(self, name: str) -> Path:
        return self.state / "log" / f"{name}.out"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        log = open(self.log(name), "ab")  # the child writes to it; closed here once started
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=self.state,
                                   start_new_session=True)
        log.close()
        self._record(name, process.pid)
        return process.pid

    def _flink_env(self, name: str) -> dict[str, str]:
        """The environment of one Flink JVM: this cluster's configuration, a log and pid
        directory of its own (Flink's scripts number their logs by the pid files they find),
        Beam's jars on its class path (``HADOOP_CLASSPATH`` is what Flink's scripts append)."""
        env = dict(os.environ)
        own = self.state / "log" / name
        own.mkdir(parents=True, exist_ok=True)
        extra = beam_class_path(self.job_server_jar)
        env.update(FLINK_HOME=str(self.flink_home), FLINK_CONF_DIR=str(self.state / "conf"),
                   FLINK_LOG_DIR=str(own), FLINK_PID_DIR=str(own),
                   HADOOP_CLASSPATH=":".join(p for p in (env.get("HADOOP_CLASSPATH"), extra)
                                             if p))
        return env

    # -- starting
    def install(self) -> None:
        install_flink(self.versions)
        install_job_server(self.versions)

    def start(self, timeout: float = 180.0) -> None:
        """Install what is missing, start every process not already running, wait for health."""
        self.install()
        running = {n for n, pid in self.pids().items() if _alive(pid)}
        busy = [f"{n} {p}" for n, p in self.ports.all().items()
                if _port_open(p) and not running]
        if busy:
            raise ClusterError(f"ports in use by another process: {', '.join(busy)} "
                               "(stop that cluster, or choose --port-base)")
        recorded = Layout.load(self.layout_file)
        if "jobmanager" in running and recorded and recorded != self.layout:
            raise ClusterError(
                f"this cluster runs {recorded.taskmanagers} TaskManager(s) with "
                f"{recorded.slots} slot(s) each; stop it to start it with "
                f"{self.layout.taskmanagers} and {self.layout.slots}")
        self.state.mkdir(parents=True, exist_ok=True)
        if "jobmanager" not in running:
            self.layout.save(self.layout_file)
            write_config(self.flink_home, self.state, self.ports, self.layout)
            self._spawn("jobmanager", [str(self.flink_home / "bin" / "jobmanager.sh"),
                                       "start-foreground"], self._flink_env("jobmanager"))
        for index, name in enumerate(self.taskmanager_names):
            if name not in running:
                self.start_taskmanager(index)
        if "job_server" not in running:
            self._spawn("job_server", self.job_server_command())
        if "worker_pool" not in running:
            self._spawn("worker_pool", self.worker_pool_command(), self._worker_env())
        self.wait_healthy(timeout)

    def start_taskmanager(self, index: int = 0) -> int:
        """Start TaskManager ``index`` (again, after a kill): its own temporary directory and
        log, a new resource id (``taskmanager-<index>_<start time>``)."""
        self._check_index(index)
        name = taskmanager_name(index)
        tmp = self.state / "tmp" / name
        tmp.mkdir(parents=True, exist_ok=True)
        return self._spawn(name, [str(self.flink_home / "bin" / "taskmanager.sh"),
                                  "start-foreground",
                                  f"-Dtaskmanager.resource-id={name}_{time.time_ns()}",
                                  f"-Dio.tmp.dirs={tmp}"], self._flink_env(name))

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.layout.taskmanagers:
            raise ClusterError(f"TaskManager index {index} is not in 0-"
                               f"{self.layout.taskmanagers - 1} (this cluster has "
                               f"{self.layout.taskmanagers})")

    def job_server_command(self) -> list[str]:
        return ["java", *JAVA_OPENS, "-jar", str(self.job_server_jar),
                f"--flink-master=localhost:{self.ports.rest}",
                f"--flink-conf-dir={self.state / 'conf'}",
                "--job-host=localhost", f"--job-port={self.ports.job}",
                f"--artifact-port={self.ports.artifact}",
                f"--expansion-port={self.ports.expansion}",
                f"--artifacts-dir={self.state / 'artifacts'}"]

    def worker_pool_command(self) -> list[str]:
        """costlib's worker pool (``costlib_pipelines.worker_pool``): Beam's pool service, its
        SDK workers forked from a process that has imported Beam and costlib's pipelines once
        (``preforked=False``: Beam's own pool, a new interpreter per worker)."""
        if not self.preforked:
            return [sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                    f"--service_port={self.ports.worker_pool}"]
        return [sys.executable, "-c", "from costlib_pipelines.worker_pool import main; main()",
                f"--service_port={self.ports.worker_pool}"]

    def _worker_env(self) -> dict[str, str]:
        # The pool starts each SDK worker as `python -c ...`: this interpreter's folder first.
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def registered(self) -> dict[str, dict[str, object]]:
        """The TaskManagers registered with the JobManager, by process name (from their
        resource ids): each one's REST entry (``id``, ``slotsNumber``, ``freeSlots``)."""
        found: dict[str, dict[str, object]] = {}
        for entry in rest_taskmanagers(self.ports) or []:
            name = str(entry.get("id", "")).split("_", 1)[0]
            if name in self.taskmanager_names:
                found[name] = entry
        return found

    def health(self) -> dict[str, bool]:
        overview = rest_overview(self.ports) or {}
        pids = self.pids()
        alive = {n: n in pids and _alive(pids[n]) for n in self.names}
        registered = self.registered() if overview else {}
        health = {"jobmanager": alive["jobmanager"] and bool(overview)}
        for name in self.taskmanager_names:
            entry = registered.get(name)
            health[name] = (alive[name] and entry is not None
                            and int(str(entry.get("slotsNumber", 0))) >= self.layout.slots)
        health["job_server"] = (alive["job_server"] and _port_open(self.ports.job)
                                and _port_open(self.ports.artifact))
        health["worker_pool"] = alive["worker_pool"] and _port_open(self.ports.worker_pool)
        return health

    def wait_healthy(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            health = self.health()
            if all(health.values()):
                return
            dead = [n for n in self.names if n in self.pids() and not _alive(self.pids()[n])]
            if dead or time.monotonic() > deadline:
                why = f"{', '.join(dead)} exited" if dead else f"not healthy after {timeout:.0f} s"
                tails = "\n".join(f"--- {self.log(n)} (last lines)\n{self._tail(n)}"
                                  for n in self.names if not health[n])
                raise ClusterError(f"Flink cluster: {why}: "
                                   f"{[n for n, ok in health.items() if not ok]}\n{tails}")
            time.sleep(0.5)

    def _tail(self, name: str, lines: int = 15) -> str:
        try:
            return "\n".join(self.log(name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- stopping
    def kill(self, name: str, sig: int = signal.SIGKILL, index: int = 0) -> int | None:
        """Send ``sig`` to one started process's group (a fault test's ``kill -9``);
        ``taskmanager`` is TaskManager ``index``."""
        if name == "taskmanager":
            self._check_index(index)
            name = taskmanager_name(index)
        pid = self.pids().get(name)
        if pid is None:
            return None
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            pass
        return pid

    def stop(self, grace: float = 20.0) -> list[str]:
        """SIGTERM every started process group, SIGKILL what is left after ``grace`` seconds."""
        pids = self.pids()
        order = [n for n in ("worker_pool", "job_server", *sorted(
            n for n in pids if n.startswith("taskmanager")), "jobmanager") if n in pids]
        order += [n for n in pids if n not in order]
        for name in order:
            try:
                os.killpg(pids[name], signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pids[n]) for n in order):
            time.sleep(0.2)
        for name in order:
            if _alive(pids[name]):
                try:
                    os.killpg(pids[name], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for name in order:
            self._forget(name)
        return order

    # -- using
    def beam_flags(self, runner: str = "portable") -> list[str]:
        """The Beam flags that submit a costlib pipeline to this cluster: a parallelism of
        every slot of every TaskManager, SDK workers kept between a job's stages.

        ``portable`` (default): the long-running job server of this cluster
        (``--runner=PortableRunner --job_endpoint``), with the REST address
        (``--flink_master``), by which costlib finds its job on the cluster: to cancel it
        after an interrupt, to name Flink's root cause when it fails, and to record it in the
        output's lock. ``flink``: Beam's ``FlinkRunner`` starting its own job server from this
        cluster's launcher jar."""
        return self._flags(runner, self.layout.batch_parallelism)

    def _flags(self, runner: str, parallelism: int) -> list[str]:
        common = ["--environment_type=EXTERNAL",
                  f"--environment_config=localhost:{self.ports.worker_pool}",
                  f"--parallelism={parallelism}",
                  f"--environment_cache_millis={ENVIRONMENT_CACHE_MILLIS}"]
        if runner == "portable":
            return ["--runner=PortableRunner", f"--job_endpoint=localhost:{self.ports.job}",
                    f"--artifact_endpoint=localhost:{self.ports.artifact}",
                    f"--flink_master=localhost:{self.ports.rest}", *common]
        if runner == "flink":
            return ["--runner=FlinkRunner", f"--flink_master=localhost:{self.ports.rest}",
                    f"--flink_version={self.versions['FLINK_MINOR']}",
                    f"--flink_job_server_jar={self.job_server_jar}",
                    f"--job_server_jvm_properties={' '.join(JAVA_OPENS)}", *common]
        raise ValueError(f"runner must be 'portable' or 'flink', got {runner!r}")

    def streaming_flags(self, runner: str = "portable") -> list[str]:
        """The flags of an always-on job: :meth:`beam_flags` at half the slots' parallelism
        (recalibrate and decide ``--follow`` side by side), plus streaming, a checkpoint every
        10 s, restarts without limit 5 s apart (the cluster's own strategy gives up after 3,
        before a killed TaskManager is back), and checkpoints kept when the job is cancelled
        (to resume from). The flags carry the cluster's REST address (``--flink_master``, the
        one the job server submits to), so that ``--follow`` finds its job's Flink id and an
        interrupt cancels it. The Flink options are read by the job server (Beam's Java
        ``FlinkPipelineOptions``); switches take no value."""
        return [*self._flags(runner, self.layout.streaming_parallelism), "--streaming",
                "--checkpointing_interval=10000",
                "--number_of_execution_retries=1000000", "--execution_retry_delay=5000",
                "--externalized_checkpoints_enabled",
                "--retain_externalized_checkpoints_on_cancellation"]


def taskmanager_name(index: int) -> str:
    """TaskManager ``index``'s process name (pids, logs, resource id prefix)."""
    return f"taskmanager-{index}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["install", "start", "status", "flags", "stop",
                                            "kill", "start-taskmanager"])
    parser.add_argument("process", nargs="?", default=None,
                        help="for kill: the process to SIGKILL (jobmanager, taskmanager with "
                             "--index, job_server, worker_pool)")
    parser.add_argument("--port-base", type=int, default=DEFAULT_PORT_BASE,
                        help="REST port; the job server and worker pool use the next five "
                             f"(default {DEFAULT_PORT_BASE})")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="configuration, logs and pids (default ~/.cache/costlib/flink/"
                             "cluster-PORT)")
    parser.add_argument("--taskmanagers", type=int, default=None,
                        help="for start: how many TaskManagers (default 1; later commands "
                             "read what start recorded)")
    parser.add_argument("--slots", type=int, default=None,
                        help="for start: task slots per TaskManager (default 2)")
    parser.add_argument("--index", type=int, default=0,
                        help="for kill taskmanager and start-taskmanager: which TaskManager "
                             "(0 to N-1; default 0)")
    parser.add_argument("--runner", choices=["portable", "flink"], default="portable",
                        help="for flags: through this cluster's job server (portable) or "
                             "Beam's FlinkRunner with the job server jar (flink)")
    parser.add_argument("--streaming", action="store_true",
                        help="for flags: the flags of an always-on streaming job (checkpoints, "
                             "restarts without limit)")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    if not 1024 <= args.port_base <= 65_000:
        parser.error("--port-base must be between 1024 and 65000")
    if (args.taskmanagers or args.slots) and args.command != "start":
        parser.error("--taskmanagers and --slots are for start (the other commands read the "
                     "layout start recorded)")
    try:
        cluster = Cluster(Ports(args.port_base), args.state_dir)
        if args.command == "start" and (args.taskmanagers or args.slots):
            cluster = Cluster(cluster.ports, cluster.state, layout=Layout(
                args.taskmanagers or 1, args.slots or Layout().slots))
        if args.command == "install":
            cluster.install()
            print(f"FLINK_HOME={cluster.flink_home}\nJOB_SERVER_JAR={cluster.job_server_jar}")
        elif args.command == "start":
            cluster.start(args.timeout)
            print(f"Flink {cluster.versions['FLINK_VERSION']} is up: web UI "
                  f"http://localhost:{cluster.ports.rest}, {cluster.layout.taskmanagers} "
                  f"TaskManager(s) with {cluster.layout.slots} slot(s) each, Beam job server "
                  f"localhost:{cluster.ports.job}, worker pool "
                  f"localhost:{cluster.ports.worker_pool}"
                  f"\nsubmit with: {' '.join(cluster.beam_flags())}")
        elif args.command == "status":
            health = cluster.health()
            pids = cluster.pids()
            registered = cluster.registered()
            for name in cluster.names:
                line = (f"{name:14} pid {pids.get(name, '-')!s:>8}  "
                        f"{'healthy' if health[name] else 'down':8}")
                if name in registered:
                    entry = registered[name]
                    line += (f"  {entry.get('id')}: {entry.get('slotsNumber')} slots, "
                             f"{entry.get('freeSlots')} free")
                if name.startswith("taskmanager"):
                    line += f"  log {cluster.log(name)}"
                print(line)
            return 0 if all(health.values()) else 3
        elif args.command == "flags":
            flags = (cluster.streaming_flags if args.streaming else cluster.beam_flags)
            print(" ".join(flags(args.runner)))
        elif args.command == "stop":
            stopped = cluster.stop()
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        elif args.command == "kill":
            if args.process not in ("jobmanager", "taskmanager", "job_server", "worker_pool"):
                parser.error("kill takes the process: jobmanager, taskmanager (--index N), "
                             "job_server or worker_pool")
            pid = cluster.kill(args.process, index=args.index)
            what = (taskmanager_name(args.index) if args.process == "taskmanager"
                    else args.process)
            print(f"killed {what} (pid {pid})" if pid else f"{what} was not started")
        elif args.command == "start-taskmanager":
            cluster.start_taskmanager(args.index)
            cluster.wait_healthy(args.timeout)
            print(f"{taskmanager_name(args.index)} is up")
    except (ClusterError, subprocess.CalledProcessError) as error:
        print(f"flink_cluster: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
