"""Pipeline options and graph construction kept cheap (issue 12, "fixed cost").

- :class:`CachedViewOptions` gives the same values as Beam's own ``PipelineOptions`` for every
  view, shares changes between views, and pickles/copies without its cache;
- ``make_pipeline(type_check=False)`` turns Beam's construction-time type checks off, the
  default leaves them on;
- the batch recalibrate graph writes byte-identical outputs with type inference on and off,
  and stays small (no combine that only counts or collects one element per run).
"""

from __future__ import annotations

import copy
import pickle

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import (
    DebugOptions,
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    TypeOptions,
)
from pipeline_data import base_config, sample_frame, write_files

from costlib_pipelines.io.runs import RunDirectory
from costlib_pipelines.recalibrate.manifest import PublishSpec
from costlib_pipelines.recalibrate.pipeline import build_recalibrate, run_recalibrate
from costlib_pipelines.runner import CachedViewOptions, make_pipeline

VIEWS = (StandardOptions, TypeOptions, DirectOptions, SetupOptions, DebugOptions,
         GoogleCloudOptions)
FLAGS = ["--direct_running_mode=multi_threading", "--direct_num_workers=2",
         "--experiments=a", "--experiments=b", "--project=p", "--no_pipeline_type_check"]


@pytest.mark.parametrize("flags", [[], FLAGS])
def test_cached_views_equal_beams_own_views(flags):
    cached, plain = CachedViewOptions(flags), PipelineOptions(flags)
    for cls in VIEWS:
        view = cached.view_as(cls)
        assert isinstance(view, cls)
        assert view is cached.view_as(cls)  # made once
        names = view._visible_option_list()
        assert {n: getattr(view, n) for n in names} == {
            n: getattr(plain.view_as(cls), n) for n in names}
    assert cached.get_all_options() == plain.get_all_options()


def test_a_change_through_one_view_is_seen_by_every_view_and_fresh_views():
    options = CachedViewOptions(["--direct_num_workers=1"])
    options.view_as(DirectOptions).direct_num_workers = 3
    options.view_as(DebugOptions).add_experiment("x")
    assert options.view_as(DirectOptions).direct_num_workers == 3
    assert PipelineOptions.view_as(options, DirectOptions).direct_num_workers == 3
    assert "x" in PipelineOptions.view_as(options, DebugOptions).experiments
    assert options.get_all_options()["direct_num_workers"] == 3


def test_pickles_and_copies_keep_values_and_drop_the_cache():
    options = CachedViewOptions(FLAGS)
    options.view_as(DirectOptions).direct_num_workers = 5
    for clone in (pickle.loads(pickle.dumps(options)), copy.deepcopy(options)):
        assert type(clone) is CachedViewOptions
        assert "_views" not in clone.__dict__
        assert clone.get_all_options() == options.get_all_options()
        assert clone.view_as(DirectOptions).direct_num_workers == 5
        clone.view_as(DirectOptions).direct_num_workers = 7  # copies are independent
        assert options.view_as(DirectOptions).direct_num_workers == 5


def test_make_pipeline_type_checks_by_default_and_on_request_not():
    assert make_pipeline([]).options.view_as(TypeOptions).pipeline_type_check is True
    assert make_pipeline([], type_check=False).options.view_as(
        TypeOptions).pipeline_type_check is False
    assert make_pipeline(["--no_pipeline_type_check"]).options.view_as(
        TypeOptions).pipeline_type_check is False
    pipeline = make_pipeline(["--direct_num_workers=2"], type_check=False)
    assert pipeline.options.view_as(DirectOptions).direct_num_workers == 2
    assert type(pipeline.runner).__name__ == "FnApiRunner"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("in")
    write_files(sample_frame(6000, seed=5), directory, n_files=2, row_group_size=1500)
    return sorted(str(p) for p in directory.glob("*.parquet"))


def _outputs(run_dir):
    names = ("operating_points.parquet", "operating_points.jsonl", "pn_curves.parquet",
             "accounting.json")
    return {name: (run_dir / name).read_bytes() for name in names}


def test_outputs_are_byte_identical_with_and_without_type_inference(inputs, tmp_path):
    config = base_config()
    written = []
    for type_check in (True, False):
        run = RunDirectory(str(tmp_path / f"out_{type_check}"), config.digest, "r1")
        pipeline = make_pipeline([], type_check=type_check)
        build_recalibrate(pipeline, inputs, config, run.run_dir, run.run_id, unit_rows=1500)
        pipeline.run().wait_until_finish()
        written.append(_outputs(tmp_path / f"out_{type_check}" / "runs" / "r1"))
    assert written[0] == written[1]
    assert written[0]["operating_points.jsonl"].count(b"\n") > 3  # several groups written


def test_a_published_run_writes_the_same_records_as_the_unpublished_graph(inputs, tmp_path):
    config = base_config()
    manifest = run_recalibrate(config, inputs, str(tmp_path / "published"), run_id="r1")
    assert manifest["published"] and manifest["dead_letter_files"] == 0
    run = RunDirectory(str(tmp_path / "plain"), config.digest, "r1")
    pipeline = make_pipeline([], type_check=False)
    build_recalibrate(pipeline, inputs, config, run.run_dir, run.run_id)
    pipeline.run().wait_until_finish()
    assert _outputs(tmp_path / "published" / "runs" / "r1") == _outputs(
        tmp_path / "plain" / "runs" / "r1")
    assert not (tmp_path / "published" / "runs" / "r1" / "shards").exists()


def _leaves(pipeline) -> list[str]:
    names = []

    class Leaves(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            names.append(node.full_label)

    pipeline.visit(Leaves())
    return names


def test_the_batch_graph_has_no_per_run_counting_combines():
    """Every transform costs construction, translation and a bundle processor's set-up on every
    run: the batch graph gets the run's last stage going with one impulse and side inputs."""
    config = base_config()
    pipeline = make_pipeline([], type_check=False)
    spec = PublishSpec(output="/o", run_id="r1", inputs=[], runner="FnApiRunner",
                       started_utc="2026-01-01T00:00:00+00:00", settings=None, override=None,
                       baseline=None)
    build_recalibrate(pipeline, ["/in/a.parquet"], config, "/o/runs/r1", "r1", publish=spec,
                      unit_rows=None)
    leaves = _leaves(pipeline)
    assert not [n for n in leaves if "Count" in n or "ToList" in n or "DoOnce" in n], leaves
    assert leaves[-1] == "Publish"
    assert len(leaves) <= 24, leaves  # 52 before issue 12's fixed-cost work
