"""Deployment definitions in deploy/: what can be proven without Docker, a cluster or a cloud.

* the SDK image installs exactly the pinned set and the project (Dockerfile parsed; the same
  install into a fresh venv in the slow test);
* the recalibrate graph translates to the portable runner API with Flink and Dataflow options;
* every YAML in deploy/ parses; the CronJob's command, run dry, is the documented one; the
  Flink submit command runs end to end through Beam's Job API (local job service) and maps the
  publish guard's exit code 3;
* the Airflow DAGs parse (the Dataflow one imports when Airflow is installed; the Flink
  one runs for real in test_flink_airflow.py);
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
    from costlib_pipelines.commands.cli import _subparser, build_parser

    return _subparser(build_parser(), "recalibrate")


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


def all_of(kind: str) -> list[dict]:
    return [d for docs in yaml_documents().values() for d in docs if d.get("kind") == kind]


def one(kind: str, name: str | None = None) -> dict:
    found = [d for d in all_of(kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/, found {len(found)}"
    return found[0]


def flink_versions() -> dict[str, str]:
    """The Flink version as the FlinkDeployment states it, in each of its spellings."""
    spec = one("FlinkDeployment")["spec"]
    job_server = one("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    match = re.fullmatch(r"apache/beam_flink([\d.]+)_job_server:([\d.]+)(@sha256:[0-9a-f]{64})?",
                         job_server)
    assert match, job_server
    image = re.fullmatch(r"flink:(\d+)\.(\d+)\.(\d+)(-[\w.-]+)?(@sha256:[0-9a-f]{64})?",
                         spec["image"])
    assert image, spec["image"]  # a full patch release, never a floating flink:1.20
    return {
        "operator": spec["flinkVersion"],  # v1_20
        "image": f"{image.group(1)}.{image.group(2)}",  # 1.20 (of 1.20.2)
        "job_server_flink": match.group(1),
        "job_server_beam": match.group(2),
    }


def dry_run(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Run a deploy script with DRY_RUN=1; the command it would run, as a list."""
    result = subprocess.run(cmd, env={**os.environ, **env, "DRY_RUN": "1"},
                            capture_output=True, text=True, timeout=60, check=True)
    line = next(ln for ln in result.stderr.splitlines() if ln.startswith("+ "))
    return shlex.split(line[2:])


def parse_costlib(argv: list[str]) -> argparse.Namespace:
    """``costlib COMMAND ARGS`` checked exactly as the CLI checks it, without running it.

    Raises (failing the calling test) for an unknown costlib flag, an unknown Beam option or a
    runner Beam does not know.
    """
    from costlib_pipelines.commands.cli import parse_command_line

    assert Path(argv[0]).name == "costlib", argv
    return parse_command_line(argv[1:])


def split_cli(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``costlib recalibrate ARGS`` -> (the CLI's namespace, the Beam flags it passes on)."""
    assert argv[1] == "recalibrate", argv
    args = parse_costlib(argv)
    return args, args.beam_args


# ----------------------------------------------------------------------- image definition
def test_sdk_image_installs_exactly_the_pinned_set_and_the_project():
    steps = dockerfile_instructions(DEPLOY / "Dockerfile")
    pins = runtime_pins()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())

    # Base: the official Beam SDK image of the pinned Beam, for the Python the project targets.
    froms = [args for kw, args in steps if kw == "FROM"]
    assert froms == [f"apache/beam_python3.11_sdk:{pins['apache-beam']}"]
    # Beam comes with the `pipelines` extra (the core install is the library only).
    extra = pyproject["project"]["optional-dependencies"]["pipelines"]
    assert f"apache-beam=={pins['apache-beam']}" in extra
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
    setuptools = pyproject["tool"]["setuptools"]
    directories = {setuptools.get("package-dir", {}).get(name, name)
                   for name in setuptools["packages"] if "." not in name}
    assert directories == {"costlib", "pipelines", "schemas"}
    for directory in directories:
        assert copies[directory] == f"{IMAGE_ROOT}/{directory}", directory
        assert (ROOT / directory / "__init__.py").exists()
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
    probe = ("import costlib_pipelines.recalibrate.pipeline, costlib_pipelines.decide.pipeline, "
             "costlib, "
             "apache_beam; print(costlib_pipelines.recalibrate.pipeline.__file__); "
             "print(apache_beam.__version__)")
    out = subprocess.run([python, "-c", probe], check=True, timeout=300, cwd=tmp_path,
                         capture_output=True, text=True).stdout.split()
    assert out[0].startswith(str(venv)) and out[1] == runtime_pins()["apache-beam"]
    subprocess.run([str(venv / "bin/costlib"), "recalibrate", "--help"], check=True,
                   timeout=300, capture_output=True)


# ------------------------------------------------------------- graph for Flink / Dataflow
TRANSFORMS = {  # unique name -> URN expected in the portable proto
    "Aggregate": None,  # composite
    "SumGrids": "beam:transform:combine_per_key:v1",
    "Optimize": "beam:transform:pardo:v1",  # a ParDo with tagged outputs: a composite of one
    "PerWindow": "beam:transform:group_by_key:v1",
    "Finalize": "beam:transform:pardo:v1",
    "WriteDeadLetters": "beam:transform:pardo:v1",
    "SumAccounting": None,  # CombineGlobally composite
}


def recalibrate_proto(beam_args, environment):
    """Build the recalibrate graph (fixed edges, dummy paths: nothing is read) and translate."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from costlib_pipelines.recalibrate.pipeline import build_recalibrate

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
            transform = by_name[name]
            if transform.spec.urn == "beam:transform:generic_composite:v1":  # with_outputs
                (inner,) = transform.subtransforms
                transform = proto.components.transforms[inner]
            assert transform.spec.urn == urn, (name, transform.spec.urn)
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


# --------------------------------------------------------------------- YAML and manifests
def test_every_yaml_in_deploy_parses_and_names_a_known_kind():
    docs = yaml_documents()
    assert set(docs) >= {"flink/flink-session.yaml", "flink/beam-job-server.yaml",
                         "kubernetes/recalibration-cronjob.yaml",
                         "kubernetes/costlib-data-pvc.yaml", "kubernetes/service-accounts.yaml",
                         "cloudbuild.yaml"}
    kinds = sorted(d.get("kind", "(cloudbuild)") for ds in docs.values() for d in ds)
    assert kinds == sorted(["(cloudbuild)", "CronJob", "CronJob", "Deployment",
                            "FlinkDeployment", "NetworkPolicy", "PersistentVolumeClaim",
                            "Service", "ServiceAccount"])
    # Every pod mounts the one shared claim; every costlib container runs the one image.
    claim = one("PersistentVolumeClaim")["metadata"]["name"]
    text = "\n".join(p.read_text() for p in DEPLOY.rglob("*.yaml"))
    assert set(re.findall(r"claimName: (\S+)", text)) == {claim}
    images = set(re.findall(r"image: (\S+)", text))
    assert {i for i in images if "COSTLIB" in i} == {"${COSTLIB_IMAGE}"}
    # Pods that name a service account name one that deploy/ defines (or the operator's).
    accounts = {d["metadata"]["name"] for d in all_of("ServiceAccount")} | {"flink"}
    for _, pod in pod_specs():
        assert pod.get("serviceAccountName", "flink") in accounts


def pod_specs() -> list[tuple[str, dict]]:
    """(where, pod spec) of every pod template in deploy/; the FlinkDeployment's task-manager
    pod is its shared podTemplate merged with the task-manager one, container by name, as the
    operator merges them."""
    pods = []
    for cron in all_of("CronJob"):
        pods.append((f"CronJob/{cron['metadata']['name']}",
                     cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
    for deployment in all_of("Deployment"):
        pods.append((f"Deployment/{deployment['metadata']['name']}",
                     deployment["spec"]["template"]["spec"]))
    flink = one("FlinkDeployment")["spec"]
    shared = flink["podTemplate"]["spec"]
    for role in ("jobManager", "taskManager"):
        own = flink[role].get("podTemplate", {}).get("spec", {})
        containers = {c["name"]: dict(c) for c in shared["containers"]}
        for c in own.get("containers", []):
            containers[c["name"]] = {**containers.get(c["name"], {}), **c}
        main = containers.setdefault("flink-main-container", {"name": "flink-main-container"})
        main.setdefault("image", flink["image"])
        # The operator sets the Flink container's requests and limits from `resource`: limits
        # = requests times the limit factors (memory 1.0 by default).
        resource = flink[role]["resource"]
        factor = float(flink["flinkConfiguration"][f"kubernetes.{role.lower()}.cpu.limit-factor"])
        cpu_limit = float(resource["cpu"]) * factor
        assert cpu_limit == float(resource["cpu"]), "CPU limit must not exceed the request"
        main["resources"] = {
            "requests": {"cpu": resource["cpu"], "memory": resource["memory"]},
            "limits": {"cpu": cpu_limit, "memory": resource["memory"]},
        }
        pods.append((f"FlinkDeployment/{role}", {**shared, **own,
                                                 "containers": list(containers.values())}))
    return pods


#: Containers allowed a writable root filesystem, and why.
WRITABLE_ROOT = {"flink-main-container"}  # Flink's entrypoint writes conf/ and log/


def test_every_container_is_non_root_limited_and_pinned():
    seen = set()
    for where, pod in pod_specs():
        pod_sc = pod.get("securityContext", {})
        assert pod_sc.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            name = f"{where}/{container['name']}"
            seen.add(name)
            sc = {**pod_sc, **container.get("securityContext", {})}
            assert sc.get("runAsNonRoot") is True, name
            assert isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0, name
            assert sc.get("allowPrivilegeEscalation") is False, name
            assert sc.get("capabilities", {}).get("drop") == ["ALL"], name
            assert "add" not in sc.get("capabilities", {}), name
            assert not sc.get("privileged", False), name
            if container["name"] not in WRITABLE_ROOT:
                assert sc.get("readOnlyRootFilesystem") is True, name
                # ... with a writable /tmp (Beam's semi-persistent directory, HOME)
                mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
                assert "/tmp" in mounts, name
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), (name, bound)
            image = container["image"]
            assert (":" in image and not image.endswith(":latest")) \
                or image == "${COSTLIB_IMAGE}", (name, image)
            if image != "${COSTLIB_IMAGE}":  # third-party: a full x.y.z release (+ digest)
                tag = image.split("@")[0].rsplit(":", 1)[1]
                assert re.match(r"\d+\.\d+\.\d+", tag), (name, image)
    assert {"CronJob/costlib-recalibration/recalibrate", "CronJob/costlib-status/status",
            "Deployment/beam-flink-job-server/job-server",
            "FlinkDeployment/taskManager/beam-worker-pool",
            "FlinkDeployment/taskManager/flink-main-container",
            "FlinkDeployment/jobManager/flink-main-container"} <= seen
    # The costlib image is tagged with its commit (build_image.sh), never a moving tag.
    build = (DEPLOY / "build_image.sh").read_text()
    assert 'IMAGE="${IMAGE_REPO}:${SHA}"' in build and "rev-parse --short=12" in build
    # The image's own user is not root either (Kubernetes runAsNonRoot checks it).
    users = [args for kw, args in dockerfile_instructions(DEPLOY / "Dockerfile") if kw == "USER"]
    assert users and users[-1].split(":")[0] in ("${COSTLIB_UID}", "10001")
    assert re.search(r"ARG COSTLIB_UID=10001", (DEPLOY / "Dockerfile").read_text())


def labels_match(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_network_policy_admits_only_submitters_and_reaches_only_the_jobmanager():
    policy = one("NetworkPolicy")["spec"]
    server = one("Deployment", "beam-flink-job-server")
    pod = server["spec"]["template"]
    assert labels_match(policy["podSelector"], pod["metadata"]["labels"])
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}

    # Ingress: exactly the Service's job and artifact ports, from the recalibration pods only.
    (rule,) = policy["ingress"]
    ports = {p["port"] for p in rule["ports"]}
    (container,) = pod["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = one("Service", "beam-flink-job-server")["spec"]
    assert labels_match({"matchLabels": service["selector"]}, pod["metadata"]["labels"])
    assert ports == {named[p["targetPort"]] for p in service["ports"]}
    assert ports == {8099, 8098} and "expansion" not in named
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}  # this namespace only
    recalibration = one("CronJob", "costlib-recalibration")["spec"]["jobTemplate"]["spec"]
    status = one("CronJob", "costlib-status")["spec"]["jobTemplate"]["spec"]
    assert labels_match(source["podSelector"], recalibration["template"]["metadata"]["labels"])
    assert not labels_match(source["podSelector"], status["template"]["metadata"]["labels"])
    assert not labels_match(source["podSelector"], pod["metadata"]["labels"])
    # The runbook's one-off submit pod carries the submitter labels too.
    readme = (DEPLOY / "README.md").read_text()
    for key, value in source["podSelector"]["matchLabels"].items():
        assert f"{key}={value}" in readme, (key, value)

    # Egress: the FlinkDeployment's JobManager on the REST port of --flink-master, and DNS.
    jm, dns = policy["egress"]
    flink_name = one("FlinkDeployment")["metadata"]["name"]
    assert jm["to"] == [{"podSelector": {"matchLabels": {"app": flink_name,
                                                         "component": "jobmanager"}}}]
    master = next(a for a in container["args"] if a.startswith("--flink-master="))
    assert master == f"--flink-master={flink_name}-rest:{jm['ports'][0]['port']}"
    assert [p["port"] for p in jm["ports"]] == [8081]
    assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}
    # The manifest says why the policy matters.
    text = (DEPLOY / "flink/beam-job-server.yaml").read_text()
    assert "NO authentication" in text


def test_cronjobs_fail_at_once_on_exit_2_and_3_and_never_overlap():
    from costlib_pipelines.commands.exit_codes import BAD_INPUT, HELD

    for name, container_name in (("costlib-recalibration", "recalibrate"),
                                 ("costlib-status", "status")):
        spec = one("CronJob", name)["spec"]
        assert len(spec["schedule"].split()) == 5 and spec["timeZone"] == "Etc/UTC"
        assert spec["concurrencyPolicy"] == "Forbid"
        assert 0 < spec["startingDeadlineSeconds"] <= 3600
        job = spec["jobTemplate"]["spec"]
        assert job["backoffLimit"] >= 1 and job["activeDeadlineSeconds"] > 0
        pod = job["template"]["spec"]
        assert pod["restartPolicy"] == "Never"  # podFailurePolicy needs it
        assert [c["name"] for c in pod["containers"]] == [container_name]
        fail = [r for r in job["podFailurePolicy"]["rules"] if r["action"] == "FailJob"]
        assert fail == [{"action": "FailJob", "onExitCodes": {
            "containerName": container_name, "operator": "In",
            "values": sorted([BAD_INPUT, HELD])}}]
    # The alert checks the output the daily run writes.
    recal = one("CronJob", "costlib-recalibration")["spec"]["jobTemplate"]["spec"]
    status = one("CronJob", "costlib-status")["spec"]["jobTemplate"]["spec"]
    (container,) = status["template"]["spec"]["containers"]
    args = parse_costlib([*container["command"], *container["args"]])
    (recal_container,) = recal["template"]["spec"]["containers"]
    output = next(a.split("=", 1)[1] for a in recal_container["args"]
                  if a.startswith("--output="))
    assert args.command == "status" and args.output == output
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/data")
    assert mount.get("readOnly") is True


def test_cronjob_runs_the_daily_recalibration_with_the_guard():
    job = one("CronJob", "costlib-recalibration")["spec"]["jobTemplate"]["spec"]
    (container,) = job["template"]["spec"]["containers"]
    assert container["image"] == "${COSTLIB_IMAGE}"
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


# ------------------------------------------------------- every command line in deploy/
DATAFLOW_DAG = "costlib_recalibration_dag.py"
FLINK_DAG = "costlib_recalibration_flink_dag.py"


def dag_tree(name: str = DATAFLOW_DAG) -> ast.Module:
    return ast.parse((DEPLOY / "airflow" / name).read_text())


def dag_call(func: str, name: str = DATAFLOW_DAG) -> dict[str, ast.expr]:
    """Keyword arguments of the one call of ``func`` in the DAG file."""
    (call,) = [node for node in ast.walk(dag_tree(name)) if isinstance(node, ast.Call)
               and getattr(node.func, "id", None) == func]
    return {k.arg: k.value for k in call.keywords}


def dag_namespace(name: str = DATAFLOW_DAG) -> dict:
    """The DAG file's constants and helper functions, and those of the module the DAGs share
    (costlib_dag_common.py), executed without Airflow (stand-ins for its two exception
    classes)."""
    class AirflowException(Exception):
        pass

    class AirflowFailException(AirflowException):
        pass

    namespace: dict = {"AirflowException": AirflowException,
                       "AirflowFailException": AirflowFailException, "os": os, "Path": Path,
                       "json": json, "dt": __import__("datetime"), "shlex": shlex}
    for tree in (dag_tree("costlib_dag_common.py"), dag_tree(name)):
        nodes = [n for n in tree.body
                 if isinstance(n, ast.FunctionDef | ast.Assign | ast.AnnAssign)]
        exec(compile(ast.Module(body=nodes, type_ignores=[]), "dag", "exec"), namespace)
    return namespace


REALISTIC = {  # what the DAG's templates and environment render to on a real deployment
    "{{ var.value.costlib_config }}": "gs://acme-costlib/config/costlib.yaml",
    "{{ var.value.costlib_output }}": "gs://acme-costlib/recalibrate",
    "{{ var.value.costlib_temp_location }}": "gs://acme-costlib/tmp",
}


def render(value: str, day: str = "2026-11-21") -> str:
    for template, text in REALISTIC.items():
        value = value.replace(template, text)
    value = re.sub(r"\{\{ var\.value\.get\('costlib_\w+', '([^']*)'\) \}\}", r"\1", value)
    value = re.sub(r"\{\{ var\.value\.costlib_input_pattern \| replace\('\{date\}', "
                   r"macros\.ds_add\(data_interval_end \| ds, (-\d+)\)\) \}\}",
                   lambda m: f"gs://acme-costlib/scores/dt=2026-11-{22 + int(m.group(1)):02d}"
                             "/*.parquet", value)
    return value.replace("{{ macros.ds_add(data_interval_end | ds, -1) | replace('-', '') }}",
                         day.replace("-", ""))


def dag_command_line() -> list[str]:
    """The driver's command line as the Beam provider builds it for the DAG's task.

    The provider runs ``PYTHON FILE --runner=RUNNER`` and then every pipeline option as
    ``--key=value`` (``beam_options_to_args``), with what ``DataflowConfiguration`` adds:
    ``job_name`` (with a unique suffix), ``project``, ``region``, ``labels`` and
    ``impersonate_service_account`` (from ``impersonation_chain``).
    """
    ns = dag_namespace()
    ns.update(IMAGE="europe-docker.pkg.dev/acme/costlib/costlib-beam:0123456789ab",
              WORKER_SA="costlib-worker@acme.iam.gserviceaccount.com")
    kwargs = dag_call("CostlibRecalibrateOperator")
    options = eval(compile(ast.Expression(kwargs["pipeline_options"]), "dag", "eval"), ns)
    options = {k: render(str(v)) for k, v in options.items()}
    runner = eval(compile(ast.Expression(kwargs["runner"]), "dag", "eval"), ns)
    added = {"job_name": "costlib-recalibrate-20261121-1a2b3c4d", "project": "acme",
             "region": "europe-west1", "labels": "airflow-version=v3-3-2",
             "impersonate_service_account": "costlib-launcher@acme.iam.gserviceaccount.com"}
    return [f"--runner={runner}", *(f"--{k}={v}" for k, v in {**added, **options}.items())]


def flex_template_command_line(parameters: dict[str, str]) -> list[str]:
    """What the Flex Template launcher passes to the entrypoint: every template parameter
    (unset optional ones as empty values) and the Dataflow options it adds."""
    metadata = json.loads((DEPLOY / "dataflow/metadata.json").read_text())
    names = [p["name"] for p in metadata["parameters"]]
    argv = [f"--{name}={parameters.get(name, '')}" for name in names]
    extra = {k: v for k, v in parameters.items() if k not in names}
    return [*argv, *(f"--{k}={v}" for k, v in extra.items()),
            "--runner=DataflowRunner", "--project=acme", "--region=europe-west1",
            "--temp_location=gs://acme-costlib/tmp", "--staging_location=gs://acme-costlib/stg",
            "--job_name=costlib-recalibrate-20261121",
            "--template_location=gs://acme-costlib/tmp/template.json"]


def launch_env(**extra) -> dict[str, str]:
    return {"PROJECT": "acme", "REGION": "europe-west1", "TEMP_LOCATION": "gs://b/tmp",
            "TEMPLATE_SPEC": "gs://b/t.json", "SDK_IMAGE": TEST_IMAGE,
            "WORKER_SA": "costlib-worker@acme.iam.gserviceaccount.com",
            "CONFIG": "gs://b/c.yaml", "INPUT": "gs://b/a/*.parquet,gs://b/b/*.parquet",
            "OUTPUT": "gs://b/out", **extra}


def launch_parameters(env: dict[str, str]) -> dict[str, str]:
    argv = dry_run([str(DEPLOY / "dataflow/launch.sh")], env)
    spec = dict(zip(argv[5::2], argv[6::2], strict=True))["--parameters"]
    assert spec.startswith("^~^")
    return dict(item.split("=", 1) for item in spec[3:].split("~"))


def readme_costlib_commands() -> list[list[str]]:
    """Every ``costlib ...`` command in the runbook's bash blocks (continuations joined)."""
    text = (DEPLOY / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" # ")[0].strip()
            if line.startswith("costlib "):
                argv = shlex.split(line.replace("$COSTLIB_IMAGE", TEST_IMAGE))
                commands.append(argv)
    return commands


def test_every_command_line_in_deploy_parses_with_the_cli():
    """A misspelt flag in any script, manifest, DAG, template or runbook command fails here."""
    entry = load_entrypoint()
    lines: dict[str, list[str]] = {}
    # deploy/flink/submit.sh, both environments
    lines["submit.sh"] = dry_run([str(DEPLOY / "flink/submit.sh"), "--config=/data/c.yaml",
                                  "--input=/data/s/*.parquet", "--output=/data/recalibrate",
                                  "--run-id=manual-1", "--override-guard",
                                  "--override-by=Ana", "--override-reason=reviewed"], {})
    lines["submit.sh DOCKER"] = dry_run(
        [str(DEPLOY / "flink/submit.sh"), "--config=c", "--input=i", "--output=o"],
        {"ENVIRONMENT_TYPE": "DOCKER", "ENVIRONMENT_CONFIG": TEST_IMAGE})
    # the CronJobs' commands and args (the daily one through its script)
    for cron in all_of("CronJob"):
        (c,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in c.get("env", [])}
        if c["command"][0].endswith(".sh"):
            script = str(ROOT / c["command"][0].removeprefix(IMAGE_ROOT + "/"))
            argv = dry_run([script, *c["args"]], {**env, "LOGICAL_DATE": "2026-11-21"})
        else:
            argv = [*c["command"], *c["args"]]
        lines[f"CronJob {cron['metadata']['name']}"] = argv
    # the DAG: the driver through the entrypoint, and the status task
    lines["DAG recalibrate"] = ["costlib", "recalibrate",
                                *entry.translate(dag_command_line())]
    status_cmd = render(eval(compile(ast.Expression(dag_call("BashOperator")["bash_command"]),
                                     "dag", "eval"), dag_namespace()))
    lines["DAG status"] = shlex.split(status_cmd)
    flink_dag = dag_namespace(FLINK_DAG)
    arguments = eval(compile(ast.Expression(
        dag_call("CostlibFlinkRecalibrateOperator", FLINK_DAG)["arguments"]), "dag", "eval"),
        flink_dag)
    lines["Flink DAG recalibrate"] = ["costlib", "recalibrate", *map(render, arguments),
                                      *flink_dag["BEAM_FLAGS"]]
    # the Flex Template as launch.sh passes it, through the entrypoint
    for label, extra in (("defaults", {}),
                         ("all", {"RUN_ID": "backfill-20261101", "MAX_THRESHOLD_CHANGE": "0.1",
                                  "MIN_RATED": "50", "OVERRIDE_GUARD": "true",
                                  "OVERRIDE_BY": "Ana", "OVERRIDE_REASON": "reviewed"})):
        params = launch_parameters(launch_env(**extra))
        lines[f"flex template {label}"] = ["costlib", "recalibrate", *entry.translate(
            flex_template_command_line(params))]
    # the runbook
    for i, argv in enumerate(readme_costlib_commands()):
        lines[f"README #{i}"] = argv
    assert sum(k.startswith("README") for k in lines) >= 5

    for label, argv in lines.items():
        try:
            args = parse_costlib(argv)
        except SystemExit as exc:  # argparse refused it
            pytest.fail(f"{label}: {shlex.join(argv)}: exit {exc.code}")
        except ValueError as exc:  # UsageError: unknown flag or runner
            pytest.fail(f"{label}: {shlex.join(argv)}: {exc}")
        if args.command == "recalibrate":
            from costlib_pipelines.io.runs import RUN_ID_PATTERN

            assert args.run_id is None or re.fullmatch(RUN_ID_PATTERN, args.run_id), label
    dag = parse_costlib(lines["DAG recalibrate"])
    assert dag.run_id == "daily-20261121" and dag.log_level == "INFO"
    assert "--service_account_email=costlib-worker@acme.iam.gserviceaccount.com" in \
        dag.beam_args
    flink = parse_costlib(lines["Flink DAG recalibrate"])
    assert flink.run_id == "daily-20261121" and len(flink.input.split(",")) == 7
    assert (flink.max_threshold_change, flink.min_rated) == (0.2, 50)
    assert "--job_endpoint=beam-flink-job-server:8099" in flink.beam_args
    flex = parse_costlib(lines["flex template all"])
    assert flex.override_guard is True and flex.run_id == "backfill-20261101"
    assert parse_costlib(lines["flex template defaults"]).override_guard is False


def test_the_command_line_check_catches_a_misspelt_flag():
    """The check above can fail: a misspelt costlib flag, Beam option or runner is refused."""
    from costlib_pipelines.flags import UsageError

    good = ["costlib", "recalibrate", "--config=c", "--input=i", "--output=o"]
    parse_costlib(good)
    for bad in ("--max-threshhold-change=0.2", "--service_account=x@y",
                "--sdk_container_imag=img", "--runner=DataflowRuner"):
        with pytest.raises(UsageError):
            parse_costlib([*good, bad])
    with pytest.raises(UsageError, match="did you mean --max-age-hours"):
        parse_costlib(["costlib", "status", "--output=o", "--max-age-hour=3"])


# ------------------------------------------------------------------------ the Airflow DAG
def test_airflow_dag_tracks_the_dataflow_job_and_never_installs():
    kwargs = dag_call("CostlibRecalibrateOperator")
    ns = dag_namespace()
    # Dataflow integration: the provider tracks the job only for this runner name.
    assert eval(compile(ast.Expression(kwargs["runner"]), "dag", "eval"), ns) == \
        "DataflowRunner"
    config = dag_call("DataflowConfiguration")
    assert {"job_name", "project_id", "location", "impersonation_chain", "wait_until_finished",
            "cancel_timeout", "drain_pipeline"} <= set(config)
    assert ast.literal_eval(config["wait_until_finished"]) is True
    assert ast.literal_eval(config["drain_pipeline"]) is False
    assert "service_account" not in config  # would become --service_account: exit 2
    assert ns["CANCEL_TIMEOUT_SECONDS"] > 0
    assert isinstance(ns["EXECUTION_TIMEOUT"], ns["dt"].timedelta)
    assert "execution_timeout" in kwargs
    # No virtualenv, no pip install per run: the baked interpreter.
    assert ast.literal_eval(kwargs["py_requirements"]) is None
    assert ast.unparse(kwargs["py_interpreter"]) == "PYTHON"
    assert ns["PYTHON"] == "/opt/costlib-venv/bin/python"
    dockerfile = (DEPLOY / "airflow/Dockerfile").read_text()
    assert "/opt/costlib-venv/bin/pip install" in dockerfile
    assert f"apache-beam[gcp]=={runtime_pins()['apache-beam']}" in dockerfile
    assert "COSTLIB_PYTHON=/opt/costlib-venv/bin/python" in dockerfile
    options = eval(compile(ast.Expression(kwargs["pipeline_options"]), "dag", "eval"), ns)
    assert {"sdk_container_image", "service_account_email", "temp_location"} <= set(options)
    assert options["log_level"] == "INFO"  # Beam prints the job id the provider reads
    # One run at a time, same schedule as the CronJob.
    dag_kwargs = {k: ast.literal_eval(v) for k, v in dag_call("DAG").items()
                  if k in ("schedule", "catchup", "max_active_runs")}
    cron_schedule = one("CronJob", "costlib-recalibration")["spec"]["schedule"]
    assert dag_kwargs == {"schedule": cron_schedule, "catchup": False, "max_active_runs": 1}
    # The alert task runs after the recalibration whatever its outcome.
    status = dag_call("BashOperator")
    assert ast.literal_eval(status["trigger_rule"]) == "all_done"
    assert ast.literal_eval(status["retries"]) == 0
    assert "recalibrate >> status" in ast.unparse(dag_tree())
    # The window: the 7 days before data_interval_end, not ds (Airflow 3 changed ds).
    for name in (DATAFLOW_DAG, FLINK_DAG, "costlib_dag_common.py"):
        assert "{{ ds" not in (DEPLOY / "airflow" / name).read_text()
    value = ns["lookback_input"]()
    globs = re.findall(r"\{\{.*?\}\}", value)
    assert ",".join(globs) == value and len(globs) == 7 == ns["LOOKBACK_DAYS"]
    assert [re.search(r"ds_add\(data_interval_end \| ds, (-\d+)\)", g).group(1)
            for g in globs] == ["-7", "-6", "-5", "-4", "-3", "-2", "-1"]


def test_airflow_dag_fails_held_runs_without_retry_naming_the_manifest():
    from costlib_pipelines.commands.exit_codes import BAD_INPUT, HELD

    ns = dag_namespace()
    assert (ns["BAD_INPUT"], ns["HELD_FOR_REVIEW"]) == (BAD_INPUT, HELD)
    out, run = "gs://b/recalibrate", "daily-20261121"
    ns["outcome"]({"published": True}, out, run)  # published: no exception
    with pytest.raises(ns["AirflowFailException"]) as held:
        ns["outcome"]({"published": False, "guard": {"violations": ["A: moved 0.3"]}}, out, run)
    message = str(held.value)
    assert message.startswith("HELD FOR REVIEW")
    assert f"{out}/runs/{run}/manifest.json" in message and "A: moved 0.3" in message
    assert f"costlib publish --output {out} --run-id {run}" in message
    with pytest.raises(ns["AirflowException"]) as missing:  # retried: not the Fail subclass
        ns["outcome"](None, out, run)
    assert not isinstance(missing.value, ns["AirflowFailException"])
    assert ns["_return_code"](RuntimeError("Apache Beam process failed with return code 3")) == 3
    assert ns["_return_code"](RuntimeError("something else")) is None


def test_flink_dag_is_the_dataflow_dags_schedule_with_costlibs_exit_codes(tmp_path):
    """The Flink variant: same schedule, window, run id and alert (the shared module); the
    driver's exit code is the outcome: 0 succeeds, 2 and 3 fail without retry (3 naming the
    manifest and the guard's violations), anything else is retried."""
    keys = ("schedule", "catchup", "max_active_runs", "start_date")
    flink_kwargs = {k: ast.unparse(v) for k, v in dag_call("DAG", FLINK_DAG).items() if k in keys}
    assert flink_kwargs == {k: ast.unparse(v) for k, v in dag_call("DAG").items() if k in keys}
    ns = dag_namespace(FLINK_DAG)
    assert ast.literal_eval(dag_call("DAG", FLINK_DAG)["schedule"]) == ns["SCHEDULE"]
    for name in (DATAFLOW_DAG, FLINK_DAG):
        status = dag_call("BashOperator", name)
        assert ast.unparse(status["bash_command"]).startswith("status_command(")
        assert ast.literal_eval(status["trigger_rule"]) == "all_done"
        assert ast.literal_eval(status["retries"]) == 0
        assert "recalibrate >> status" in ast.unparse(dag_tree(name))
    task = dag_call("CostlibFlinkRecalibrateOperator", FLINK_DAG)
    assert ast.literal_eval(task["retries"]) == 1 and "execution_timeout" in task
    # the default flags are deploy/flink/submit.sh's
    submit = dry_run([str(DEPLOY / "flink/submit.sh"), "--config=c", "--input=i", "--output=o"],
                     {})
    assert ns["BEAM_FLAGS"] == submit[5:]

    out, run = str(tmp_path / "recalibrate"), "daily-20261121"
    ns["exit_outcome"](0, out, run)  # published
    manifest = tmp_path / "recalibrate/runs" / run / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"published": False,
                                    "guard": {"violations": ["group 'a': moved 0.3"]}}))
    with pytest.raises(ns["AirflowFailException"]) as held:
        ns["exit_outcome"](3, out, run)
    assert str(held.value).startswith("HELD FOR REVIEW")
    assert f"Manifest: {manifest}." in str(held.value)
    assert "group 'a': moved 0.3" in str(held.value)
    with pytest.raises(ns["AirflowFailException"], match="exit 2"):
        ns["exit_outcome"](2, out, run)
    for code in (1, 137, -15):
        with pytest.raises(ns["AirflowException"]) as failed:
            ns["exit_outcome"](code, out, run)
        assert not isinstance(failed.value, ns["AirflowFailException"])  # retried


def import_dag(name: str, monkeypatch):
    """Import a DAG file as Airflow does: its folder on sys.path (for costlib_dag_common)."""
    monkeypatch.syspath_prepend(str(DEPLOY / "airflow"))
    spec = importlib.util.spec_from_file_location(Path(name).stem, DEPLOY / "airflow" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_airflow_dag_imports_when_airflow_is_installed(monkeypatch):
    reason = ("Airflow with its Apache Beam and Google providers is not installed (it "
              "conflicts with the pinned set of requirements/runtime.txt, so the test venv "
              "does not have it)")
    pytest.importorskip("airflow.providers.apache.beam.operators.beam", reason=reason)
    pytest.importorskip("airflow.providers.google", reason=reason)
    module = import_dag(DATAFLOW_DAG, monkeypatch)
    dag = module.dag
    assert dag.dag_id == "costlib_recalibration"
    assert {t.task_id for t in dag.tasks} == {"recalibrate", "status"}
    task = dag.get_task("recalibrate")
    assert isinstance(task, module.BeamRunPythonPipelineOperator)
    assert task.runner == "DataflowRunner" and task.py_requirements is None
    assert task.dataflow_config.wait_until_finished is True
    assert task.dataflow_config.drain_pipeline is False


# ----------------------------------------------------- Flex Template metadata and the CLI
def test_flex_template_parameters_are_the_cli_flags():
    from costlib_pipelines.io.runs import RUN_ID_PATTERN

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
        elif action.type in (int, float) or getattr(action.type, "kind", None) in (
                "number", "integer"):
            assert param["paramType"] == "NUMBER", name
        else:
            assert param["paramType"] in ("TEXT", "GCS_READ_FILE", "GCS_WRITE_FOLDER"), name
    # The run id regex is the CLI's pattern.
    assert params["run_id"]["regexes"] == [f"^{RUN_ID_PATTERN.pattern}$"]
    # One truth: the template publishes itself, everywhere it is described.
    for text in (metadata["description"], (DEPLOY / "dataflow/launch.sh").read_text(),
                 (DEPLOY / "README.md").read_text()):
        text = " ".join(text.replace("#", " ").split())
        assert "publishes itself" in text
        assert not re.search(r"not (be )?published|no manifest|LATEST does not move", text)


def test_entrypoint_maps_launcher_options_to_the_cli():
    entry = load_entrypoint()
    launcher_argv = [  # as the Flex Template launcher / BeamRunPythonPipelineOperator pass them
        "--runner=DataflowRunner", "--project=p", "--region=europe-west1",
        "--config=gs://b/c.yaml", "--input=gs://b/a/*.parquet,gs://b/b/*.parquet",
        "--output=gs://b/out", "--run_id=daily-20261121", "--max_threshold_change=0.2",
        "--min_rated=50", "--override_guard=false", "--override_by=", "--override_reason=",
        "--sdk_container_image=img:1",
    ]
    argv = entry.translate(launcher_argv)
    assert "--override_by=" not in argv and not any("override" in a for a in argv)
    args = parse_costlib(["costlib", "recalibrate", *argv])
    assert args.input == "gs://b/a/*.parquet,gs://b/b/*.parquet"
    assert (args.run_id, args.max_threshold_change, args.min_rated) == ("daily-20261121", 0.2, 50)
    assert args.override_guard is False and args.override_by == ""
    assert args.beam_args == ["--runner=DataflowRunner", "--project=p",
                              "--region=europe-west1", "--sdk_container_image=img:1"]
    assert entry.translate(["--override_guard=true", "--override_by=ana",
                            "--override_reason=reviewed"]) == \
        ["--override-guard", "--override_by=ana", "--override_reason=reviewed"]
    assert entry.translate(["--override_guard"]) == ["--override-guard"]
    assert entry.translate(["--override_guard=no"]) == []


def test_launch_script_passes_only_template_parameters_and_beam_options():
    from apache_beam.options.pipeline_options import PipelineOptions

    metadata = json.loads((DEPLOY / "dataflow/metadata.json").read_text())
    names = {p["name"] for p in metadata["parameters"]}
    env = launch_env(RUN_ID="r1", MAX_THRESHOLD_CHANGE="0.1", MIN_RATED="50")
    argv = dry_run([str(DEPLOY / "dataflow/launch.sh")], env)
    assert argv[:4] == ["gcloud", "dataflow", "flex-template", "run"]
    assert re.fullmatch(r"costlib-recalibrate-\d{8}-\d{6}", argv[4])  # the job name
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags["--region"] == "europe-west1"
    assert flags["--template-file-gcs-location"] == "gs://b/t.json"
    assert flags["--temp-location"] == "gs://b/tmp"
    assert flags["--service-account-email"] == env["WORKER_SA"]  # workers: least privilege
    passed = launch_parameters(env)
    assert passed["input"] == env["INPUT"] and passed["min_rated"] == "50"
    beam = set(passed) - names
    assert beam == {"sdk_container_image"}
    known = PipelineOptions([f"--{k}={passed[k]}" for k in beam]).get_all_options(
        retain_unknown_options=True)
    assert known["sdk_container_image"] == TEST_IMAGE
    # Impersonation and a worker cap, when asked for.
    argv = dry_run([str(DEPLOY / "dataflow/launch.sh")],
                   launch_env(LAUNCHER_SA="l@acme.iam.gserviceaccount.com", MAX_WORKERS="8"))
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags["--impersonate-service-account"] == "l@acme.iam.gserviceaccount.com"
    assert flags["--max-workers"] == "8"
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
    # exactly the versions the engine tests run on (tools/flink_cluster.py reads the same file)
    tested = dict(line.split("=", 1) for line in (DEPLOY / "flink/versions.env").read_text()
                  .splitlines() if line and not line.startswith("#"))
    assert v["job_server_beam"] == tested["BEAM_FLINK_RUNNER_VERSION"]
    assert v["job_server_flink"] == tested["FLINK_MINOR"]
    assert one("FlinkDeployment")["spec"]["image"].startswith(f"flink:{tested['FLINK_VERSION']}-")
    # The job server talks to the operator's REST service of that FlinkDeployment.
    name = one("FlinkDeployment")["metadata"]["name"]
    args = one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--flink-master={name}-rest:8081" in args
    service = one("Service")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports == {"job": 8099, "artifact": 8098}
    submit = (DEPLOY / "flink/submit.sh").read_text()
    assert f'JOB_SERVER="${{JOB_SERVER:-{service["metadata"]["name"]}}}"' in submit
    # The sidecar the EXTERNAL environment talks to runs the costlib image as a worker pool.
    tm = one("FlinkDeployment")["spec"]["taskManager"]["podTemplate"]["spec"]["containers"]
    pool = next(c for c in tm if c["name"] == "beam-worker-pool")
    assert pool["args"] == ["--worker_pool"] and pool["ports"][0]["containerPort"] == 50000
    # The runbook states the same versions.
    readme = (DEPLOY / "README.md").read_text()
    image = one("FlinkDeployment")["spec"]["image"]
    assert f"Flink {v['image']}" in readme and f"Beam {v['job_server_beam']}" in readme
    assert image in readme


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
