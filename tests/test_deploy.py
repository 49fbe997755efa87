"""Deployment definitions in deploy/: what can be proven without Docker, a cluster or a cloud.

* the SDK image installs exactly the pinned set and the project (Dockerfile parsed; the same
  install into a fresh venv in the slow test);
* the recalibrate graph translates to the portable runner API with Flink and Dataflow options;
* every YAML in deploy/ parses; the CronJob's command, run dry, is the documented one; the
  Flink submit command runs end to end through Beam's Job API (local job service) and maps the
  publish guard's exit code 3;
* the Airflow DAG parses (and imports when Airflow is installed);
* the Flex Template's parameters are the CLI's flags, and the entrypoint maps them back;
* Flink, Beam and job-server versions agree with each other and with the pins.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pipeline_data import base_config, sample_frame

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
IMAGE_ROOT = "/opt/costlib"  # where deploy/Dockerfile puts the repository's files
TEST_IMAGE = "europe-docker.pkg.dev/p/r/costlib-beam:0123456789ab"


# ----------------------------------------------------------------------------- helpers
def runtime_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements/runtime.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[normalize(name)] = version
    return pins


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, current = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        current += " " + line.removesuffix("\\").strip()
        if not line.endswith("\\"):
            keyword, _, rest = current.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
            current = ""
    return out


def recalibrate_parser() -> argparse.ArgumentParser:
    """The ``costlib recalibrate`` parser as the CLI builds it."""
    from pipelines.cli import _build_parser

    parser = _build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices["recalibrate"]


def load_entrypoint():
    spec = importlib.util.spec_from_file_location(
        "recalibrate_entrypoint", DEPLOY / "recalibrate_entrypoint.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def yaml_documents() -> dict[str, list[dict]]:
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    return {str(p.relative_to(DEPLOY)): [d for d in yaml.safe_load_all(p.read_text()) if d]
            for p in files}


def one(kind: str) -> dict:
    found = [d for docs in yaml_documents().values() for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/, found {len(found)}"
    return found[0]


def flink_versions() -> dict[str, str]:
    """The Flink version as the FlinkDeployment states it, in each of its spellings."""
    spec = one("FlinkDeployment")["spec"]
    job_server = one("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    match = re.fullmatch(r"apache/beam_flink([\d.]+)_job_server:([\d.]+)", job_server)
    assert match, job_server
    return {
        "operator": spec["flinkVersion"],  # v1_20
        "image": spec["image"].split(":", 1)[1],  # 1.20
        "job_server_flink": match.group(1),
        "job_server_beam": match.group(2),
    }


def dry_run(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Run a deploy script with DRY_RUN=1; the command it would run, as a list."""
    result = subprocess.run(cmd, env={**os.environ, **env, "DRY_RUN": "1"},
                            capture_output=True, text=True, timeout=60, check=True)
    line = next(ln for ln in result.stderr.splitlines() if ln.startswith("+ "))
    return shlex.split(line[2:])


def split_cli(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``costlib recalibrate ARGS`` -> (the CLI's namespace, the Beam flags it passes on)."""
    assert argv[:2] == ["costlib", "recalibrate"], argv
    return recalibrate_parser().parse_known_args(argv[2:])


# ----------------------------------------------------------------------- image definition
def test_sdk_image_installs_exactly_the_pinned_set_and_the_project():
    steps = dockerfile_instructions(DEPLOY / "Dockerfile")
    pins = runtime_pins()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())

    # Base: the official Beam SDK image of the pinned Beam, for the Python the project targets.
    froms = [args for kw, args in steps if kw == "FROM"]
    assert froms == [f"apache/beam_python3.11_sdk:{pins['apache-beam']}"]
    assert f"apache-beam=={pins['apache-beam']}" in pyproject["project"]["dependencies"]
    assert pyproject["project"]["requires-python"] == ">=3.11"

    # One pip install: the pinned file and the project, nothing else.
    runs = [args for kw, args in steps if kw == "RUN"]
    installs = [r for r in runs if "pip install" in r]
    assert installs == [f"pip install -r {IMAGE_ROOT}/requirements/runtime.txt {IMAGE_ROOT}"]
    assert not any(re.search(r"pip\s+(download|wheel)|pip\d|easy_install|conda|apt-get",
                             r) for r in runs)
    assert any("pip check" in r for r in runs)

    # What is copied to /opt/costlib is the project: its build files and every package.
    copies = {}
    for kw, args in steps:
        if kw == "COPY":
            *sources, dest = args.split()
            for src in sources:
                copies[src] = dest
    assert copies["requirements/runtime.txt"] == f"{IMAGE_ROOT}/requirements/runtime.txt"
    assert copies["pyproject.toml"] == copies["README.md"] == f"{IMAGE_ROOT}/"
    packages = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    for pattern in packages:
        package = pattern.rstrip("*")
        assert copies[package] == f"{IMAGE_ROOT}/{package}", package
        assert (ROOT / package / "__init__.py").exists()
    assert copies["deploy"] == f"{IMAGE_ROOT}/deploy"
    assert [args for kw, args in steps if kw == "ENTRYPOINT"] == ['["/opt/apache/beam/boot"]']


def test_flex_template_image_is_the_sdk_image_plus_the_launcher():
    steps = dockerfile_instructions(DEPLOY / "dataflow/Dockerfile")
    froms = [args for kw, args in steps if kw == "FROM"]
    assert froms[-1] == "${COSTLIB_IMAGE}"  # the image of deploy/Dockerfile, nothing rebuilt
    assert not any("pip install" in args for kw, args in steps if kw == "RUN")
    env = " ".join(args for kw, args in steps if kw == "ENV")
    py_file = re.search(r"FLEX_TEMPLATE_PYTHON_PY_FILE=(\S+)", env).group(1)
    assert py_file == f"{IMAGE_ROOT}/deploy/recalibrate_entrypoint.py"
    assert (ROOT / py_file.removeprefix(IMAGE_ROOT + "/")).exists()
    assert "FLEX_TEMPLATE_PYTHON_REQUIREMENTS_FILE" not in env  # nothing installed at launch
    assert [args for kw, args in steps if kw == "ENTRYPOINT"] == ['["/opt/apache/beam/boot"]']


@pytest.mark.slow
def test_pinned_set_and_project_install_into_a_fresh_venv_and_import(tmp_path):
    """deploy/Dockerfile's install, replayed in a fresh venv: same files, same pip command.

    Needs PyPI (or pip's cache); a cold install of the pinned set takes a few minutes.
    """
    # The files the Dockerfile copies to /opt/costlib, copied to a clean tree.
    src = tmp_path / "costlib"
    for kw, args in dockerfile_instructions(DEPLOY / "Dockerfile"):
        if kw != "COPY":
            continue
        *sources, dest = args.split()
        target = src / dest.removeprefix(IMAGE_ROOT).strip("/")
        for source in sources:
            path = ROOT / source
            out = target / path.name if dest.endswith("/") else target
            if path.is_dir():
                shutil.copytree(path, out, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, out)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin/python")
    install = next(args for kw, args in dockerfile_instructions(DEPLOY / "Dockerfile")
                   if kw == "RUN" and "pip install" in args)
    argv = shlex.split(install.replace(IMAGE_ROOT, str(src)))
    assert argv[:2] == ["pip", "install"]
    subprocess.run([python, "-m", *argv, "-q"], check=True, timeout=1800, cwd=tmp_path)
    subprocess.run([python, "-m", "pip", "check"], check=True, timeout=300, cwd=tmp_path)

    frozen = subprocess.run([python, "-m", "pip", "freeze", "--all"], check=True, timeout=300,
                            capture_output=True, text=True, cwd=tmp_path).stdout
    installed = {}
    for line in frozen.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            installed[normalize(name)] = version
        elif " @ " in line:
            installed[normalize(line.split(" @ ")[0])] = "(local)"
    tooling = {"pip", "setuptools", "wheel"}
    assert "costlib" in installed
    installed = {k: v for k, v in installed.items() if k not in tooling | {"costlib"}}
    pins = runtime_pins()
    assert {k: installed.get(k) for k in pins} == pins  # every pin, at its version
    # Nothing was pulled in unpinned: the runtime set is closed.
    unpinned = {k: v for k, v in installed.items() if k not in pins}
    assert unpinned == {}, unpinned

    # Imported from the venv, not from the source tree (cwd is tmp_path).
    probe = ("import pipelines.recalibrate, pipelines.decide, costlib, apache_beam; "
             "print(pipelines.recalibrate.__file__); print(apache_beam.__version__)")
    out = subprocess.run([python, "-c", probe], check=True, timeout=300, cwd=tmp_path,
                         capture_output=True, text=True).stdout.split()
    assert out[0].startswith(str(venv)) and out[1] == runtime_pins()["apache-beam"]
    subprocess.run([str(venv / "bin/costlib"), "recalibrate", "--help"], check=True,
                   timeout=300, capture_output=True)


# ------------------------------------------------------------- graph for Flink / Dataflow
TRANSFORMS = {  # unique name -> URN expected in the portable proto
    "Aggregate": None,  # composite
    "SumGrids": "beam:transform:combine_per_key:v1",
    "Optimize": "beam:transform:pardo:v1",
    "PerWindow": "beam:transform:group_by_key:v1",
    "Finalize": "beam:transform:pardo:v1",
    "WriteDeadLetters": "beam:transform:pardo:v1",
    "SumAccounting": None,  # CombineGlobally composite
}


def recalibrate_proto(beam_args, environment):
    """Build the recalibrate graph (fixed edges, dummy paths: nothing is read) and translate."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines.recalibrate import build_recalibrate

    config = base_config()
    assert config.fixed_edges() is not None
    options = PipelineOptions(beam_args)
    pipeline = beam.Pipeline(options=options)
    build_recalibrate(pipeline, ["gs://b/in/part-0.parquet", "gs://b/in/part-1.parquet"],
                      config, "gs://b/out/runs/r1", "r1")
    env = environment(options)
    return pipeline, options, pipeline.to_runner_api(default_environment=env)


def assert_recalibrate_graph(proto):
    by_name = {t.unique_name: t for t in proto.components.transforms.values()}
    for name, urn in TRANSFORMS.items():
        assert name in by_name, f"{name} missing from {sorted(by_name)}"
        if urn:
            assert by_name[name].spec.urn == urn, (name, by_name[name].spec.urn)
    # Every ParDo runs in the one SDK environment the runner was given.
    envs = {t.environment_id for t in proto.components.transforms.values()
            if t.spec.urn == "beam:transform:pardo:v1"}
    assert len(envs) == 1
    return proto.components.environments[envs.pop()]


def test_graph_translates_for_flink_with_the_submit_scripts_flags():
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.runners.portability.flink_runner import FlinkRunner
    from apache_beam.transforms import environments

    # The Beam flags deploy/flink/submit.sh adds (EXTERNAL worker pool beside each TM).
    argv = dry_run([str(DEPLOY / "flink/submit.sh"), "--config=c.yaml", "--input=i",
                    "--output=o"], {})
    args, beam_args = split_cli(argv)
    assert (args.config, args.input, args.output) == ("c.yaml", "i", "o")
    version = flink_versions()["job_server_flink"]

    def portable_env(options):
        return environments.Environment.from_options(options.view_as(PortableOptions))

    # The same graph handed to the FlinkRunner (job server started by Beam) ...
    pipeline, options, proto = recalibrate_proto(
        ["--runner=FlinkRunner", "--flink_master=costlib-flink-rest:8081",
         f"--flink_version={version}", "--environment_type=EXTERNAL",
         "--environment_config=localhost:50000"], portable_env)
    assert isinstance(pipeline.runner, FlinkRunner)
    assert options.view_as(FlinkRunnerOptions).flink_version == version
    env = assert_recalibrate_graph(proto)
    assert env.urn == common_urns.environments.EXTERNAL.urn
    payload = beam_runner_api_pb2.ExternalPayload.FromString(env.payload)
    assert payload.endpoint.url == "localhost:50000"

    # ... and to the PortableRunner exactly as submit.sh passes it.
    _, options, proto = recalibrate_proto(beam_args, portable_env)
    portable = options.view_as(PortableOptions)
    assert portable.job_endpoint == "beam-flink-job-server:8099"
    assert portable.artifact_endpoint == "beam-flink-job-server:8098"
    env = assert_recalibrate_graph(proto)
    assert beam_runner_api_pb2.ExternalPayload.FromString(env.payload).endpoint.url == \
        "localhost:50000"

    # DOCKER instead (task managers that can start containers): the image is the SDK image.
    _, _, proto = recalibrate_proto(
        ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=DOCKER",
         f"--environment_config={TEST_IMAGE}"], portable_env)
    env = assert_recalibrate_graph(proto)
    assert env.urn == common_urns.environments.DOCKER.urn
    assert beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image == \
        TEST_IMAGE


def test_graph_translates_with_the_dags_dataflow_options():
    from apache_beam.options.pipeline_options import GoogleCloudOptions, WorkerOptions
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner
    from apache_beam.transforms import environments

    dag = ast.parse((DEPLOY / "airflow/costlib_recalibration_dag.py").read_text())
    runner = next(node.value.value for node in dag.body if isinstance(node, ast.Assign)
                  and getattr(node.targets[0], "id", None) == "RUNNER")

    def dataflow_env(options):  # what DataflowRunner.run_pipeline builds from the options
        image = options.view_as(WorkerOptions).sdk_container_image
        return environments.DockerEnvironment.from_container_image(image)

    pipeline, options, proto = recalibrate_proto(
        [f"--runner={runner}", "--project=my-project", "--region=europe-west1",
         "--temp_location=gs://my-bucket/tmp", f"--sdk_container_image={TEST_IMAGE}",
         "--job_name=costlib-recalibrate-20261121"], dataflow_env)
    assert isinstance(pipeline.runner, DataflowRunner)  # the DAG's class path is the runner
    gcp = options.view_as(GoogleCloudOptions)
    assert (gcp.project, gcp.region, gcp.temp_location) == \
        ("my-project", "europe-west1", "gs://my-bucket/tmp")
    env = assert_recalibrate_graph(proto)
    assert env.urn == common_urns.environments.DOCKER.urn
    assert beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image == \
        TEST_IMAGE


# --------------------------------------------------------------------- YAML, CronJob, DAG
def test_every_yaml_in_deploy_parses_and_names_a_known_kind():
    docs = yaml_documents()
    assert set(docs) >= {"flink/flink-session.yaml", "flink/beam-job-server.yaml",
                         "kubernetes/recalibration-cronjob.yaml",
                         "kubernetes/costlib-data-pvc.yaml", "cloudbuild.yaml"}
    kinds = sorted(d.get("kind", "(cloudbuild)") for ds in docs.values() for d in ds)
    assert kinds == sorted(["(cloudbuild)", "CronJob", "Deployment", "FlinkDeployment",
                            "PersistentVolumeClaim", "Service"])
    # Every pod mounts the one shared claim; every costlib container runs the one image.
    claim = one("PersistentVolumeClaim")["metadata"]["name"]
    text = "\n".join(p.read_text() for p in DEPLOY.rglob("*.yaml"))
    assert set(re.findall(r"claimName: (\S+)", text)) == {claim}
    images = set(re.findall(r"image: (\S+)", text))
    assert {i for i in images if "COSTLIB" in i} == {"${COSTLIB_IMAGE}"}


def test_cronjob_runs_the_daily_recalibration_with_the_guard():
    cron = one("CronJob")
    spec = cron["spec"]
    assert len(spec["schedule"].split()) == 5 and spec["timeZone"] == "Etc/UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == "${COSTLIB_IMAGE}"
    # Exit 3 (held for review) and 2 (bad input) fail the Job at once, without retries.
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {"containerName": container["name"], "operator": "In",
                                   "values": [2, 3]}
    args = container["args"]
    assert any(a.startswith("--max-threshold-change=") for a in args)
    assert any(a.startswith("--min-rated=") for a in args)

    # The command, run dry with the container's env, is costlib recalibrate over 7 days.
    (command,) = container["command"]
    script = ROOT / command.removeprefix(IMAGE_ROOT + "/")
    assert os.access(script, os.X_OK)
    env = {e["name"]: e["value"] for e in container["env"]}
    argv = dry_run([str(script), *args], {**env, "LOGICAL_DATE": "2026-03-02"})
    parsed, beam_args = split_cli(argv)
    assert parsed.input.split(",") == [
        f"/data/scores/dt=2026-{d}/*.parquet"
        for d in ("02-24", "02-25", "02-26", "02-27", "02-28", "03-01", "03-02")
    ]
    assert parsed.run_id == "daily-20260302"
    assert parsed.config == "/data/config/costlib.yaml" and parsed.output == "/data/recalibrate"
    assert (parsed.max_threshold_change, parsed.min_rated) == (0.2, 50)
    assert "--runner=PortableRunner" in beam_args
    assert "--job_endpoint=beam-flink-job-server:8099" in beam_args


def test_airflow_dag_parses_and_wires_the_guard():
    path = DEPLOY / "airflow/costlib_recalibration_dag.py"
    tree = ast.parse(path.read_text())
    imports = {(node.module, alias.name) for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert ("airflow.providers.apache.beam.operators.beam",
            "BeamRunPythonPipelineOperator") in imports
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "CostlibRecalibrateOperator")
    kwargs = {k.arg: k.value for k in call.keywords}
    options = {k.value for k in kwargs["pipeline_options"].keys}
    assert {"config", "input", "output", "run_id", "max_threshold_change", "min_rated",
            "sdk_container_image"} <= options
    # Every costlib option the DAG passes is a flag of costlib recalibrate.
    cli = load_entrypoint().cli_options(recalibrate_parser())
    beam_only = {"project", "region", "temp_location", "sdk_container_image",
                 "job_name"}
    assert options - beam_only <= set(cli)
    assert "deploy/recalibrate_entrypoint.py" in ast.unparse(kwargs["py_file"])
    # The driver's virtualenv: the pinned set, the project, and Beam's GCP extra at the pin.
    requirements = ast.unparse(kwargs["py_requirements"])
    assert "requirements/runtime.txt" in requirements
    assert f"apache-beam[gcp]=={runtime_pins()['apache-beam']}" in requirements
    dag_call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "DAG")
    dag_kwargs = {k.arg: ast.literal_eval(k.value) for k in dag_call.keywords
                  if k.arg in ("schedule", "catchup", "max_active_runs")}
    cron_schedule = one("CronJob")["spec"]["schedule"]  # both schedulers run at the same time
    assert dag_kwargs == {"schedule": cron_schedule, "catchup": False, "max_active_runs": 1}
    # The window is the 7 days before data_interval_end, not ds (Airflow 3 changed ds).
    assert "{{ ds" not in path.read_text()
    # The window and the exit-code mapping, executed on their own (they need no Airflow).
    namespace: dict = {}
    nodes = [n for n in tree.body
             if (isinstance(n, ast.FunctionDef)
                 and n.name in ("_return_code", "day_before_end", "lookback_input"))
             or (isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", None) == "LOOKBACK_DAYS")]
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)
    value = namespace["lookback_input"]()
    globs = re.findall(r"\{\{.*?\}\}", value)
    assert ",".join(globs) == value
    assert len(globs) == 7 == namespace["LOOKBACK_DAYS"]
    assert [re.search(r"ds_add\(data_interval_end \| ds, (-\d+)\)", g).group(1)
            for g in globs] == ["-7", "-6", "-5", "-4", "-3", "-2", "-1"]
    assert namespace["_return_code"](
        RuntimeError("Apache Beam process failed with return code 3")) == 3
    assert namespace["_return_code"](RuntimeError("something else")) is None


def test_airflow_dag_imports_when_airflow_is_installed():
    reason = ("Airflow with its Apache Beam and Google providers is not installed (it "
              "conflicts with the pinned set of requirements/runtime.txt, so the test venv "
              "does not have it)")
    pytest.importorskip("airflow.providers.apache.beam.operators.beam", reason=reason)
    pytest.importorskip("airflow.providers.google", reason=reason)
    spec = importlib.util.spec_from_file_location(
        "costlib_recalibration_dag", DEPLOY / "airflow/costlib_recalibration_dag.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag = module.dag
    assert dag.dag_id == "costlib_recalibration"
    (task,) = dag.tasks
    assert isinstance(task, module.BeamRunPythonPipelineOperator)
    assert task.pipeline_options["max_threshold_change"] == module.MAX_THRESHOLD_CHANGE
    assert task.runner == module.RUNNER
    assert f"{module.SRC}/requirements/runtime.txt" in task.py_requirements
    assert "apache-beam[gcp]==2.77.0" in task.py_requirements


# ----------------------------------------------------- Flex Template metadata and the CLI
def test_flex_template_parameters_are_the_cli_flags():
    entry = load_entrypoint()
    metadata = json.loads((DEPLOY / "dataflow/metadata.json").read_text())
    params = {p["name"]: p for p in metadata["parameters"]}
    parser = recalibrate_parser()
    cli = entry.cli_options(parser)
    assert set(params) == set(cli)  # every flag a parameter, every parameter a flag
    for name, action in cli.items():
        param = params[name]
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert entry.option_to_flag(name) in action.option_strings  # the mapping, both ways
        assert entry.flag_to_option(entry.option_to_flag(name)) == name
        assert param["isOptional"] is (not action.required), name
        if action.nargs == 0:
            assert param["paramType"] == "BOOLEAN", name
        elif action.type in (int, float):
            assert param["paramType"] == "NUMBER", name
        else:
            assert param["paramType"] in ("TEXT", "GCS_READ_FILE", "GCS_WRITE_FOLDER"), name


def test_entrypoint_maps_launcher_options_to_the_cli():
    entry = load_entrypoint()
    launcher_argv = [  # as the Flex Template launcher / BeamRunPythonPipelineOperator pass them
        "--runner=DataflowRunner", "--project=p", "--region=europe-west1",
        "--config=gs://b/c.yaml", "--input=gs://b/a/*.parquet,gs://b/b/*.parquet",
        "--output=gs://b/out", "--run_id=daily-20261121", "--max_threshold_change=0.2",
        "--min_rated=50", "--override_guard=false", "--override_by=", "--override_reason=",
        "--sdk_container_image=img:1",
    ]
    ours, beam_args = entry.translate(launcher_argv)
    args = recalibrate_parser().parse_args(ours)
    assert args.input == "gs://b/a/*.parquet,gs://b/b/*.parquet"
    assert (args.run_id, args.max_threshold_change, args.min_rated) == ("daily-20261121", 0.2, 50)
    assert args.override_guard is False and args.override_by == ""
    assert beam_args == ["--runner=DataflowRunner", "--project=p", "--region=europe-west1",
                         "--sdk_container_image=img:1"]
    ours, _ = entry.translate(["--override_guard=true", "--override_by=ana",
                               "--override_reason=reviewed"])
    assert ours == ["--override-guard", "--override-by=ana", "--override-reason=reviewed"]
    assert entry.translate(["--override_guard"])[0] == ["--override-guard"]


def test_launch_script_passes_only_template_parameters_and_beam_options():
    from apache_beam.options.pipeline_options import PipelineOptions

    metadata = json.loads((DEPLOY / "dataflow/metadata.json").read_text())
    names = {p["name"] for p in metadata["parameters"]}
    env = {"PROJECT": "my-project", "REGION": "europe-west1", "TEMP_LOCATION": "gs://b/tmp",
           "TEMPLATE_SPEC": "gs://b/t.json", "SDK_IMAGE": TEST_IMAGE,
           "CONFIG": "gs://b/c.yaml", "INPUT": "gs://b/a/*.parquet,gs://b/b/*.parquet",
           "OUTPUT": "gs://b/out", "RUN_ID": "r1", "MAX_THRESHOLD_CHANGE": "0.1",
           "MIN_RATED": "50"}
    argv = dry_run([str(DEPLOY / "dataflow/launch.sh")], env)
    assert argv[:4] == ["gcloud", "dataflow", "flex-template", "run"]
    assert re.fullmatch(r"costlib-recalibrate-\d{8}-\d{6}", argv[4])  # the job name
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags["--region"] == "europe-west1"
    assert flags["--template-file-gcs-location"] == "gs://b/t.json"
    assert flags["--temp-location"] == "gs://b/tmp"
    spec = flags["--parameters"]
    assert spec.startswith("^~^")
    passed = dict(item.split("=", 1) for item in spec[3:].split("~"))
    assert passed["input"] == env["INPUT"] and passed["min_rated"] == "50"
    beam = set(passed) - names
    assert beam == {"sdk_container_image"}
    known = PipelineOptions([f"--{k}={passed[k]}" for k in beam]).get_all_options(
        retain_unknown_options=True)
    assert known["sdk_container_image"] == TEST_IMAGE
    # Missing env: a clear error, not a half-built command.
    result = subprocess.run([str(DEPLOY / "dataflow/launch.sh")], capture_output=True,
                            text=True, env={"PATH": os.environ["PATH"]}, timeout=60)
    assert result.returncode == 2 and "set PROJECT" in result.stderr


# ------------------------------------------------------------------------ Flink versions
def test_flink_and_beam_versions_agree():
    from apache_beam.options.pipeline_options import FlinkRunnerOptions

    v = flink_versions()
    assert v["operator"] == "v" + v["image"].replace(".", "_")
    assert v["job_server_flink"] == v["image"]
    assert v["job_server_flink"] in FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS
    assert v["job_server_beam"] == runtime_pins()["apache-beam"]
    # The job server talks to the operator's REST service of that FlinkDeployment.
    name = one("FlinkDeployment")["metadata"]["name"]
    args = one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--flink-master={name}-rest:8081" in args
    service = one("Service")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert (ports["job"], ports["artifact"]) == (8099, 8098)
    submit = (DEPLOY / "flink/submit.sh").read_text()
    assert f'JOB_SERVER="${{JOB_SERVER:-{service["metadata"]["name"]}}}"' in submit
    # The sidecar the EXTERNAL environment talks to runs the costlib image as a worker pool.
    tm = one("FlinkDeployment")["spec"]["taskManager"]["podTemplate"]["spec"]["containers"]
    pool = next(c for c in tm if c["name"] == "beam-worker-pool")
    assert pool["args"] == ["--worker_pool"] and pool["ports"][0]["containerPort"] == 50000
    # The runbook states the same versions.
    readme = (DEPLOY / "README.md").read_text()
    assert f"Flink {v['image']}" in readme and f"Beam {v['job_server_beam']}" in readme


# ------------------------------------- end to end through the Job API (what Flink receives)
def write_partitions(tmp_path, days):
    frame = sample_frame(12_000, seed=4)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    step = len(frame) // len(days)
    for i, day in enumerate(days):
        directory = tmp_path / "scores" / f"dt={day}"
        directory.mkdir(parents=True)
        pq.write_table(table.slice(i * step, step), directory / "part-0.parquet",
                       row_group_size=1000)
    config = tmp_path / "costlib.yaml"
    config.write_text(yaml.safe_dump(base_config(methods=["graph", "hull"]).raw))
    return config


def test_cronjob_command_submits_through_the_job_api_and_reports_a_held_run(
        tmp_path, job_service):
    """The CronJob's script and submit.sh, run for real against Beam's local job service.

    Only the endpoint and the SDK environment differ from the cluster (LOOPBACK instead of the
    EXTERNAL worker pool): the Job API call is the one the Flink job server receives.
    """
    days = ["2026-02-24", "2026-02-25", "2026-02-26", "2026-02-27", "2026-02-28",
            "2026-03-01", "2026-03-02"]
    config = write_partitions(tmp_path, days)
    output = tmp_path / "recalibrate"
    env = {**os.environ, "INPUT_PATTERN": str(tmp_path / "scores/dt={date}/*.parquet"),
           "LOOKBACK_DAYS": "7", "LOGICAL_DATE": "2026-03-02", "JOB_SERVER": "localhost",
           "JOB_PORT": str(job_service), "ARTIFACT_PORT": str(job_service),
           "ENVIRONMENT_TYPE": "LOOPBACK",
           "COSTLIB": str(Path(sys.executable).parent / "costlib")}
    script = str(DEPLOY / "kubernetes/daily_recalibration.sh")
    args = [f"--config={config}", f"--output={output}", "--max-threshold-change=0.2",
            "--min-rated=10"]
    first = subprocess.run([script, *args], env=env, capture_output=True, text=True,
                           timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "on PortableRunner" in first.stdout
    assert (output / "LATEST").read_text().strip() == "daily-20260302"
    manifest = json.loads((output / "runs/daily-20260302/manifest.json").read_text())
    assert manifest["published"] is True and manifest["row_accounting"]["read"] == 12_000 // 7 * 7
    assert [entry["path"] for entry in manifest["inputs"]] == [
        str(tmp_path / f"scores/dt={d}/part-0.parquet") for d in days]

    # Next day, a guard that no group can meet: complete, held, exit 3, LATEST unchanged.
    env["LOGICAL_DATE"] = "2026-03-03"
    (tmp_path / "scores/dt=2026-03-03").mkdir()
    shutil.copy(tmp_path / "scores/dt=2026-03-02/part-0.parquet",
                tmp_path / "scores/dt=2026-03-03/part-0.parquet")
    held = subprocess.run([script, *args[:-1], "--min-rated=1000000"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert held.returncode == 3, held.stderr[-3000:]
    assert "HELD FOR REVIEW" in held.stderr and "costlib publish" in held.stderr
    assert (output / "LATEST").read_text().strip() == "daily-20260302"
    manifest = json.loads((output / "runs/daily-20260303/manifest.json").read_text())
    assert manifest["published"] is False and manifest["guard"]["violations"]


def test_entrypoint_runs_the_cli_and_template_jobs_publish_themselves(tmp_path, capsys):
    """Direct launch and Flex launch both end published: the job's last stage publishes."""
    entry = load_entrypoint()
    days = ["2026-03-01", "2026-03-02"]
    config = write_partitions(tmp_path, days)
    pattern = str(tmp_path / "scores/dt=*/*.parquet")
    out = tmp_path / "out"
    code = entry.main([f"--config={config}", f"--input={pattern}", f"--output={out}",
                       "--run_id=direct", "--min_rated=0"])
    assert code == 0 and (out / "LATEST").read_text().strip() == "direct"
    assert (out / "runs/direct/manifest.json").exists()

    # A Flex Template launch passes --template_location: the launcher returns once the graph is
    # written. Here the FnApiRunner (no --runner) stands in for the Dataflow job and runs it in
    # process, so the job's own last stage is what publishes.
    code = entry.main([f"--config={config}", f"--input={pattern}", f"--output={out}",
                       "--run_id=flex", "--min_rated=0",
                       f"--template_location={tmp_path / 'job_object'}"])
    assert code == 0
    assert "job graph written" in capsys.readouterr().out
    manifest = json.loads((out / "runs/flex/manifest.json").read_text())
    assert manifest["published"] is True and manifest["row_accounting"]["read"] > 0
    assert (out / "LATEST").read_text().strip() == "flex"
