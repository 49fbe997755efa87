"""``costlib recalibrate --follow --upgrade`` without a cluster: what it refuses before touching
any job (exit 2 and the fix), and the stateful steps it compares between the running job and
the new one (the Flink runs are in test_flink_upgrade.py).

Beam's Flink runner names each fused stage's operator after the stage, which is named after its
input PCollection; Flink maps a savepoint's state to operators by those names. On the cluster a
stateless step added between the poll and the reader restored the state, and renaming the
reader (the judge's input) made Flink refuse the savepoint ("Cannot map checkpoint/savepoint
state for operator ... to the new program"). :func:`stateful_steps` must tell the two apart.
"""

from __future__ import annotations

import http.server
import json
import threading

import apache_beam as beam
import pytest
from flink_support import engine_config, run_cli

from costlib_pipelines.config import load_config
from costlib_pipelines.follow import recalibrate_stream as stream
from costlib_pipelines.follow.job_spec import stateful_steps
from costlib_pipelines.follow.recalibrate_stream import follow_pipeline, start_follow
from costlib_pipelines.recalibrate.publish import GuardSettings

WINDOWING = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 1}


@pytest.fixture
def config(tmp_path):
    return engine_config(tmp_path / "w.yaml", methods=["graph"],
                         grid={"edges": "uniform", "bins": 8, "range": [0.0, 1.0]},
                         windowing=WINDOWING)


class NoJobs(http.server.BaseHTTPRequestHandler):
    """Flink's REST API of a cluster that runs no job."""

    def do_GET(self):
        if self.path == "/jobs/overview":
            body = json.dumps({"jobs": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.fixture
def empty_cluster():
    server = http.server.ThreadingHTTPServer(("localhost", 0), NoJobs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"localhost:{server.server_address[1]}"
    server.shutdown()


def upgrade(config, land, output, *flags):
    return run_cli("recalibrate", "--follow", "--upgrade", "--config", config, "--input",
                   str(land / "*.parquet"), "--output", str(output), *flags)


def portable(master: str) -> list[str]:
    return ["--runner=PortableRunner", "--job_endpoint=localhost:9",
            f"--flink_master={master}", "--streaming"]


def test_upgrade_refuses_without_a_running_follow_job(config, tmp_path, empty_cluster):
    land, output = tmp_path / "land", tmp_path / "points"
    land.mkdir()
    done = upgrade(config, land, output, *portable(empty_cluster))
    assert done.returncode == 2, done.stderr
    assert "nothing is published here" in done.stderr
    assert "costlib recalibrate --follow (without --upgrade" in done.stderr
    # a followed run whose job runs nowhere (made here on the FnApiRunner, no files)
    started = start_follow(load_config(config), str(land / "*.parquet"), str(output),
                           landed=lambda p: p | beam.Create([]))
    started["result"].wait_until_finish()
    done = upgrade(config, land, output, *portable(empty_cluster))
    assert done.returncode == 2, done.stderr
    assert (f"no follow job of run {started['run_id']} runs on http://{empty_cluster} "
            "(follow.job: none), so there is nothing to upgrade") in done.stderr
    manifest = json.loads((tmp_path / "points" / "runs" / started["run_id"]
                           / "manifest.json").read_text())
    assert "upgrades" not in manifest["follow"] and "upgrade_pending" not in manifest["follow"]
    done = upgrade(config, land, output, *portable("localhost:9"))  # nothing listens there
    assert done.returncode == 2 and "Flink's REST API does not answer" in done.stderr
    done = upgrade(config, tmp_path / "elsewhere", output, *portable(empty_cluster))
    assert done.returncode == 2, done.stderr
    other = engine_config(tmp_path / "other.yaml", methods=["graph"],
                          grid={"edges": "uniform", "bins": 12, "range": [0.0, 1.0]},
                          windowing=WINDOWING)
    done = upgrade(other, land, output, *portable(empty_cluster))
    assert done.returncode == 2 and "an upgrade continues the run with its config" in done.stderr


@pytest.mark.parametrize(("flags", "words"), [
    ([], "add --follow"),
    (["--follow", "--run-id", "r1"], "drop --run-id"),
    (["--follow", "--savepoint_path=/tmp/sp"], "drop --savepoint_path"),
])
def test_upgrade_refuses_a_command_line_it_cannot_honour(config, tmp_path, flags, words):
    (tmp_path / "land").mkdir()
    done = run_cli("recalibrate", "--upgrade", "--config", config, "--input",
                   str(tmp_path / "land" / "*.parquet"), "--output", str(tmp_path / "out"),
                   *flags, *portable("localhost:9"))
    assert done.returncode == 2, done.stderr
    assert words in done.stderr


def test_upgrade_needs_the_rest_address(config, tmp_path):
    land, output = tmp_path / "land", tmp_path / "points"
    land.mkdir()
    started = start_follow(load_config(config), str(land / "*.parquet"), str(output),
                           landed=lambda p: p | beam.Create([]))
    started["result"].wait_until_finish()
    done = upgrade(config, land, output, "--runner=PortableRunner",
                   "--job_endpoint=localhost:9", "--streaming")
    assert done.returncode == 2 and "--flink_master=HOST:PORT" in done.stderr, done.stderr


def graph(config, tmp_path, change=None):
    """The follow job's pipeline as ``follow_pipeline`` builds it; ``change``: a new version's
    ``build_follow`` in its place."""
    run_config = load_config(config)
    original = stream.build_follow
    if change is not None:
        stream.build_follow = change
    try:
        return follow_pipeline(run_config, str(tmp_path / "*.parquet"), str(tmp_path), "r1",
                               list(run_config.fixed_edges()), None, GuardSettings(),
                               poll_seconds=1, settle_seconds=60)
    finally:
        stream.build_follow = original


def test_the_stateful_steps_are_the_poller_and_the_judge_with_their_inputs(config, tmp_path):
    assert stateful_steps(graph(config, tmp_path)) == {
        "Follow/Poll": {"inputs": ["13Follow/OneKey.None"], "state": ["cursor"]},
        "Judge": {"inputs": ["4Read.None"], "state": ["book"]},
    }


def _changed(read_label: str, extra_step: bool):
    def build(pipeline, pattern, config, run_dir, run_id, columns, edges, in_force, settings,
              *, poll_seconds, settle_seconds, landed=None):
        landed = pipeline | "Follow" >> stream.FollowLanding(pattern, poll_seconds,
                                                             settle_seconds)
        if extra_step:
            landed = landed | "Seen" >> beam.Map(lambda x: x)
        return (landed
                | read_label >> beam.ParDo(stream.ReadLandedFn(config, columns, edges, run_dir))
                | "Judge" >> beam.ParDo(stream.JudgeWindowsFn(config, run_dir, run_id, edges,
                                                              in_force, settings)))
    return build


def test_a_stateless_step_keeps_the_stateful_steps_and_a_renamed_input_does_not(config,
                                                                                tmp_path):
    before = stateful_steps(graph(config, tmp_path))
    assert stateful_steps(graph(config, tmp_path, _changed("Read", True))) == before
    renamed = stateful_steps(graph(config, tmp_path, _changed("ReadFiles", False)))
    assert renamed["Follow/Poll"] == before["Follow/Poll"]
    assert renamed["Judge"] != before["Judge"]


# ----------------------------------------------------------------- failures on the cluster
class FakeFlink(http.server.BaseHTTPRequestHandler):
    """Flink's REST API as the upgrade uses it, for a cluster running ``server.jobs``: a stop
    with a savepoint answers ``server.savepoint`` (``server.stops`` records the requests)."""

    def _answer(self, value, code=200):
        body = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        jobs = {j["jid"]: j for j in self.server.jobs}
        parts = self.path.strip("/").split("/")
        if self.path == "/jobs/overview":
            self._answer({"jobs": self.server.jobs})
        elif len(parts) == 2 and parts[1] in jobs:
            self._answer({"jid": parts[1], "state": jobs[parts[1]]["state"]})
        elif len(parts) == 4 and parts[2] == "savepoints":
            self._answer(self.server.savepoint)
        else:
            self.send_error(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.server.stops.append((self.path, json.loads(self.rfile.read(length))))
        self._answer({"request-id": "trigger-1"}, code=202)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_flink():
    server = http.server.ThreadingHTTPServer(("localhost", 0), FakeFlink)
    server.jobs, server.stops, server.savepoint = [], [], {}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def running_stream(config, tmp_path, server):
    """A followed run as ``recalibrate --follow`` leaves it when its job runs on ``server``:
    its manifest records the job (``j1``) and the Flink graph's stateful steps."""
    land, output = tmp_path / "land", tmp_path / "points"
    land.mkdir()
    started = start_follow(load_config(config), str(land / "*.parquet"), str(output),
                           landed=lambda p: p | beam.Create([]))
    started["result"].wait_until_finish()
    run_dir = output / "runs" / started["run_id"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    name = f"costlib-recalibrate-{started['run_id'].lower()}"
    master = f"localhost:{server.server_address[1]}"
    manifest["follow"]["job"] = {"name": name, "flink_job_id": "j1",
                                 "flink_rest": f"http://{master}"}
    manifest["follow"]["spec"]["stateful_steps"] = stateful_steps(graph(config, tmp_path))
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    server.jobs.append({"jid": "j1", "name": name, "state": "RUNNING", "start-time": 1})
    flags = ["--runner=PortableRunner", "--job_endpoint=localhost:9", "--job_server_timeout=2",
             f"--flink_master={master}", "--streaming"]
    return land, output, run_dir, flags


def test_a_failed_savepoint_leaves_the_job_running_and_the_run_as_it_was(config, tmp_path,
                                                                         fake_flink):
    land, output, run_dir, flags = running_stream(config, tmp_path, fake_flink)
    before = (run_dir / "manifest.json").read_text()
    fake_flink.savepoint = {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": {
        "stack-trace": "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint "
                       "expired before completing.\n\tat org.apache.flink.Foo.bar(Foo.java:1)"}}}
    done = upgrade(config, land, output, *flags)
    assert done.returncode == 4, done.stderr
    assert fake_flink.stops == [("/jobs/j1/stop", {
        "drain": False, "targetDirectory": f"file://{run_dir}/savepoints"})]
    assert "Flink could not stop job j1 with a savepoint: " \
           "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired " \
           "before completing." in done.stderr
    assert "is unchanged and job j1 keeps running" in done.stderr
    assert (run_dir / "manifest.json").read_text() == before


def test_a_new_job_that_does_not_start_leaves_the_savepoint_to_resume_from(config, tmp_path,
                                                                           fake_flink):
    land, output, run_dir, flags = running_stream(config, tmp_path, fake_flink)
    savepoint = f"file:{run_dir}/savepoints/savepoint-j1-0123456789ab"
    fake_flink.savepoint = {"status": {"id": "COMPLETED"},
                            "operation": {"location": savepoint}}
    done = upgrade(config, land, output, *flags)  # no job server at localhost:9
    assert done.returncode == 4, done.stderr
    assert "the new job was not submitted" in done.stderr
    assert f"job j1 is stopped and run {run_dir.name}'s state is in the savepoint " \
           f"{savepoint}" in done.stderr
    assert "run the same command again" in done.stderr
    follow = json.loads((run_dir / "manifest.json").read_text())["follow"]
    assert follow["upgrade_pending"]["savepoint"] == savepoint
    assert follow["upgrade_pending"]["from_job"] == "j1"
    assert follow["job"]["flink_job_id"] == "j1" and "upgrades" not in follow
    # the old job ended with its savepoint; the same command resumes from it, stops nothing
    fake_flink.jobs[0]["state"] = "FINISHED"
    again = upgrade(config, land, output, *flags)
    assert again.returncode == 4, again.stderr
    assert len(fake_flink.stops) == 1
    assert f"state is in the savepoint {savepoint}" in again.stderr
