"""Runner options on the command line (issue 23.4): every Beam runner's flags pass, typos do not.

The check used to know only the options classes some earlier import had defined, so
``costlib recalibrate ... --runner DaskRunner --dask_client_address ...`` stopped with "unknown
flag". Each case goes through the CLI's own argument path (``parse_command_line`` and ``main``
with the command's ``run`` replaced), up to but not including running a pipeline.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path

import apache_beam
import pytest
from apache_beam.runners.runner import PipelineRunner

from costlib_pipelines.commands.cli import main, parse_command_line
from costlib_pipelines.flags import (
    DASK_FLAGS,
    SHIPPED_RUNNERS,
    UsageError,
    _add_dask_flags,
    resolve_runner,
)
from costlib_pipelines.runner import make_pipeline

BASE = ["recalibrate", "--config", "c.yaml", "--input", "in/*.parquet", "--output", "out"]

#: At least one option of each runner Beam ships (both ``--f=v`` and ``--f v`` spellings).
RUNNER_FLAGS = {
    "dask": ["--dask_client_address", "tcp://scheduler:8786", "--dask_connection_timeout=30",
             "--dask_scheduler_file=/shared/scheduler.json", "--dask_client_name", "costlib",
             "--dask_connection_limit=64", "--dask_npartitions=8"],
    "flink": ["--runner=FlinkRunner", "--flink_master=localhost:8081", "--parallelism=4",
              "--flink_submit_uber_jar"],
    "spark": ["--runner=SparkRunner", "--spark_master_url=spark://spark:7077",
              "--spark_rest_url", "http://spark:6066", "--spark_submit_uber_jar"],
    "dataflow": ["--runner=DataflowRunner", "--project=my-project", "--region=europe-west1",
                 "--temp_location=gs://bucket/tmp", "--staging_location", "gs://bucket/stage",
                 "--max_num_workers=10", "--sdk_container_image=eu.gcr.io/p/costlib:1"],
    "prism": ["--runner=PrismRunner", "--prism_location=/opt/prism/prism",
              "--prism_log_level=debug", "--prism_beam_version_override", "v2.77.0"],
    "portable": ["--runner=PortableRunner", "--job_endpoint=localhost:8099",
                 "--environment_type=EXTERNAL", "--environment_config=localhost:50000",
                 "--artifact_endpoint=localhost:8098", "--job_server_timeout=120"],
    "direct": ["--runner=DirectRunner", "--direct_num_workers=2",
               "--direct_running_mode", "multi_threading"],
    "kafka_streams": ["--runner=KafkaStreamsRunner", "--bootstrap_servers=kafka:9092"],
    "render": ["--runner=RenderRunner", "--render_output=graph.svg", "--render_port=-1"],
}

#: A misspelt option of each runner and the flag the message suggests.
TYPOS = [
    ("--flink_mastr=localhost:8081", "--flink_master"),
    ("--dask_client_adress=tcp://scheduler:8786", "--dask_client_address"),
    ("--spark_master_ur=spark://spark:7077", "--spark_master_url"),
    ("--temp_locaton=gs://bucket/tmp", "--temp_location"),
    ("--prism_locaton=/opt/prism", "--prism_location"),
    ("--job_endpont=localhost:8099", "--job_endpoint"),
    ("--enviroment_type=LOOPBACK", "--environment_type"),
    ("--direct_num_worker=2", "--direct_num_workers"),
]


@pytest.fixture
def ran(monkeypatch):
    """``costlib recalibrate``'s ``run`` replaced: the namespaces main would have run with."""
    module = importlib.import_module("costlib_pipelines.commands.recalibrate")
    calls: list = []
    monkeypatch.setattr(module, "run", lambda args: calls.append(args) or 0)
    return calls


@pytest.mark.parametrize("runner", sorted(RUNNER_FLAGS))
def test_every_runners_options_are_accepted_and_passed_on_unchanged(runner, ran):
    flags = RUNNER_FLAGS[runner]
    assert parse_command_line([*BASE, *flags]).beam_args == flags
    assert main([*BASE, *flags]) == 0
    assert [args.beam_args for args in ran] == [flags]


def test_all_runners_flags_together_in_a_fresh_interpreter():
    """Nothing imported beforehand: the check itself loads every runner's options."""
    flags = [f for name, fs in sorted(RUNNER_FLAGS.items()) if name != "render" for f in fs
             if not f.startswith("--runner")]
    code = ("import sys; from costlib_pipelines.commands.cli import parse_command_line; "
            "print(parse_command_line(sys.argv[1:]).beam_args == sys.argv[len(sys.argv) - "
            f"{len(flags)}:])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, "-c", code, *BASE, *flags], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize(("typo", "suggestion"), TYPOS)
def test_a_misspelt_runner_option_is_refused_naming_it(typo, suggestion, ran, capsys):
    assert main([*BASE, "--runner=FlinkRunner", typo]) == 2
    err = capsys.readouterr().err
    name = typo.partition("=")[0]
    assert f"unknown flag {name}:" in err and f"did you mean {suggestion}?" in err
    assert err.count("\n") == 1  # one line, no traceback
    assert ran == []


@pytest.mark.parametrize(("extra", "message"), [
    (["--dask_npartitions=many"], "invalid int value: 'many'"),
    (["--dask_connection_limit", "; rm -rf /"], "invalid int value"),
    (["--dask_npartitions=8", "--dask_partition_size=100"], "not allowed with argument"),
    (["--prism_log_level=verbose"], "invalid choice: 'verbose'"),
    (["--runner=DaskRuner"], "did you mean DaskRunner?"),
])
def test_bad_runner_option_values_are_refused(extra, message, ran, capsys):
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert ran == []


@pytest.mark.skipif(importlib.util.find_spec("dask") is not None, reason="dask is installed")
def test_dask_runner_without_dask_is_refused_with_the_extra_to_install(ran, capsys):
    assert main([*BASE, "--runner", "DaskRunner", "--dask_client_address",
                 "tcp://scheduler:8786"]) == 2
    err = capsys.readouterr().err
    assert "--runner=DaskRunner: cannot import it" in err
    assert "pip install 'apache-beam[dask]'" in err and err.count("\n") == 1
    assert ran == []


@pytest.fixture
def fake_dask_runner(monkeypatch):
    """A stand-in for ``apache_beam.runners.dask.dask_runner`` (dask is not installed)."""
    class DaskRunner(PipelineRunner):
        pass

    module = types.ModuleType("apache_beam.runners.dask.dask_runner")
    module.DaskRunner = DaskRunner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return DaskRunner


@pytest.mark.parametrize("spelling", ["DaskRunner", "dask", "Dask",
                                      "apache_beam.runners.dask.dask_runner.DaskRunner"])
def test_the_issue_command_line_reaches_the_dask_runner(spelling, fake_dask_runner, ran):
    flags = ["--runner", spelling, "--dask_client_address", "tcp://scheduler:8786"]
    assert main([*BASE, *flags]) == 0
    assert ran[0].beam_args == flags  # passed on as written
    assert resolve_runner(spelling) == SHIPPED_RUNNERS["DaskRunner"]
    # Beam knows the Dask runner only by its class path: make_pipeline hands it that.
    assert isinstance(make_pipeline(flags).runner, fake_dask_runner)


def test_other_runner_names_are_not_rewritten():
    for name in ("FlinkRunner", "DataflowRunner", "nowhere.Runner", "Daskish"):
        assert resolve_runner(name) == name


def test_dask_flags_equal_beams_dask_options():
    """:data:`DASK_FLAGS` copies ``DaskOptions`` from Beam's source (dask need not be installed)."""
    source = Path(apache_beam.__file__).parent / "runners" / "dask" / "dask_runner.py"
    tree = ast.parse(source.read_text())
    options = next(node for node in ast.walk(tree)
                   if isinstance(node, ast.ClassDef) and node.name == "DaskOptions")
    declared: dict[str, str] = {}
    exclusive: set[str] = set()
    for call in ast.walk(options):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "add_argument"):
            flag = call.args[0].value  # type: ignore[attr-defined]
            kind = next((ast.unparse(k.value) for k in call.keywords if k.arg == "type"), "str")
            declared[flag] = kind
            if ast.unparse(call.func.value) != "parser":
                exclusive.add(flag)
    assert set(declared) == set(DASK_FLAGS)
    assert {f for f, k in declared.items() if k == "int"} == {
        f for f, k in DASK_FLAGS.items() if k is int}
    assert exclusive == {"--dask_npartitions", "--dask_partition_size"}


def test_dask_flags_are_not_redeclared_once_beams_own_are_there():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--dask_client_address", dest="address")  # as Beam's DaskOptions
    _add_dask_flags(parser)  # no "conflicting option string"
    assert [a.dest for a in parser._actions if "--dask_client_address" in a.option_strings] == [
        "address"]
    assert "--dask_npartitions" not in parser._option_string_actions


def test_parse_command_line_raises_usage_error_for_a_runner_option_typo():
    with pytest.raises(UsageError, match="--spark_master: neither a costlib flag"):
        parse_command_line([*BASE, "--runner=SparkRunner", "--spark_master=spark://h:7077"])


def test_the_streaming_flags_the_cluster_tool_prints_are_parsed_by_beam_not_warned_about(
        monkeypatch):
    """``tools/flink_cluster.py flags --streaming`` (what docs/worker.md passes) used to give
    one "Unparseable argument" warning per Flink job option when the pipeline ran: Beam's
    Python SDK does not declare them. Declared (FlinkJobOptions), Beam finds no unknown
    argument, and each reaches the job server's options with the value given; options not
    given are left out (None), as before."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from costlib_pipelines.runner import make_pipeline

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "tools" / "flink_cluster.py"), "flags",
                           "--streaming"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    flags = done.stdout.split()
    assert "--checkpointing_interval=10000" in flags
    unknown: list[str] = []
    monkeypatch.setattr(PipelineOptions, "_warn_on_unknown_options",
                        staticmethod(lambda args, parser: unknown.extend(args)))
    options = make_pipeline(flags).options.get_all_options(retain_unknown_options=True,
                                                           display_warnings=True)
    assert unknown == []
    assert options["checkpointing_interval"] == 10000
    assert options["number_of_execution_retries"] == 1_000_000
    assert options["execution_retry_delay"] == 5000
    assert options["externalized_checkpoints_enabled"] is True
    assert options["retain_externalized_checkpoints_on_cancellation"] is True
    assert options["savepoint_path"] is None and options["allow_non_restored_state"] is None
    bare = make_pipeline([]).options.get_all_options(retain_unknown_options=True)
    assert bare["externalized_checkpoints_enabled"] is None


def test_a_follow_job_is_found_on_flink_by_its_name(monkeypatch):
    """``find_flink_job`` reads Flink's ``GET /jobs/overview`` (a fake REST server here): the
    newest job of the ``--job_name`` that has not ended; how to stop it names that id."""
    import http.server
    import json
    import threading

    from costlib_pipelines.runner import find_flink_job, make_pipeline, stop_instructions

    name = "costlib-recalibrate-20261128t000000-abcd1234"
    overview = {"jobs": [
        {"jid": "old", "name": name, "state": "CANCELED", "start-time": 3},
        {"jid": "other", "name": "BeamApp-root-x", "state": "RUNNING", "start-time": 4},
        {"jid": "a1", "name": name, "state": "RUNNING", "start-time": 2},
        {"jid": "b2", "name": name, "state": "RESTARTING", "start-time": 5},
    ]}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(overview if self.path == "/jobs/overview" else {}).encode()
            self.send_response(200 if self.path == "/jobs/overview" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        rest = f"127.0.0.1:{server.server_address[1]}"
        options = make_pipeline(["--runner=PortableRunner", "--job_endpoint=localhost:1",
                                 f"--flink_master={rest}", f"--job_name={name}"]).options
        job = find_flink_job(options, wait=2)
        assert job == {"name": name, "flink_rest": f"http://{rest}", "flink_job_id": "b2",
                       "note": None}
        text = stop_instructions(job)
        assert f"'http://{rest}/jobs/b2?mode=cancel'" in text and "flink cancel b2" in text
        missing = make_pipeline(["--runner=PortableRunner", "--job_endpoint=localhost:1",
                                 f"--flink_master={rest}", "--job_name=nobody"]).options
        gone = find_flink_job(missing, wait=0.6)
        assert gone["flink_job_id"] is None and "no job named nobody" in gone["note"]
    finally:
        server.shutdown()
    no_rest = make_pipeline(["--runner=PortableRunner", "--job_endpoint=localhost:1",
                             f"--job_name={name}"]).options
    found = find_flink_job(no_rest)
    assert found["flink_job_id"] is None and "--flink_master" in found["note"]
    assert stop_instructions(found).startswith(f"job {name} (no Flink REST address")
