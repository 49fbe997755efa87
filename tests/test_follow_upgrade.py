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
        "Follow/Poll": {"inputs": ["13Follow/OneKey.None"], "state": ["seen"]},
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
