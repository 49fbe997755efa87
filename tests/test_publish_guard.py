"""The publish guard: suspicious runs are held for a person; overrides and rollbacks recorded."""

import json
import math

import pytest
from pipeline_data import base_config, sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import (
    GuardSettings,
    Override,
    PublishRefused,
    guard_violations,
    publish_run,
)


def _record(group, thresholds, *, status="ok", pos=100.0, neg=100.0, fallback=None,
            method="graph"):
    return {"group": group, "method": method, "window_start": None, "status": status,
            "thresholds": thresholds, "classifiers": ["a", "b"], "rated_positives": pos,
            "rated_negatives": neg, "fallback_group": fallback}


def test_threshold_moves_beyond_the_limit_are_violations():
    old = [_record("g", [0.5, 0.7]), _record("h", [0.5, math.inf])]
    new = [_record("g", [0.55, 0.7]), _record("h", [0.5, 0.9])]
    settings = GuardSettings(max_threshold_change=0.1)
    violations = guard_violations(old, new, settings)
    # g moved 0.05 (allowed); h switched classifier b on: an infinite move.
    assert len(violations) == 1 and "'h'" in violations[0] and "b: inf -> 0.9" in violations[0]
    assert guard_violations(old, new, GuardSettings(max_threshold_change=None)) == []
    assert guard_violations(None, new, settings) == []  # nothing published yet


def test_thin_data_counts_the_grid_the_thresholds_came_from():
    new = [
        _record("__all__", [0.5, 0.5], pos=300, neg=300),
        _record("small", [0.5, 0.5], status="fallback", pos=2, neg=3, fallback="__all__"),
        _record("thin", [0.4, 0.6], pos=10, neg=20),
        _record("none", None, status="insufficient_data", pos=1, neg=1),
    ]
    violations = guard_violations(None, new, GuardSettings(min_rated=50))
    # "small" rests on the parent's 600 rows; "thin" on 30; "none" on nothing.
    assert [v.split(":")[0] for v in violations] == ["group 'none'", "group 'thin'"]
    assert guard_violations(None, new, GuardSettings(min_rated=0)) == []


def test_thin_groups_whose_thresholds_do_not_change_are_no_violation():
    """min_rated holds thresholds that rest on few rows; publishing the thresholds already
    published changes nothing, whatever the status (kept, or ok at the point in force)."""
    old = [_record("kept", [0.5, 0.5]), _record("still", [0.4, math.inf]),
           _record("moved", [0.4, 0.6]), _record("was_none", None)]
    new = [_record("kept", [0.5, 0.5], status="kept", pos=3, neg=4),
           _record("still", [0.4, math.inf], pos=3, neg=4),
           _record("moved", [0.45, 0.6], pos=3, neg=4),
           _record("was_none", [0.5, 0.5], pos=3, neg=4)]
    violations = guard_violations(old, new, GuardSettings(min_rated=50))
    assert [v.split(":")[0] for v in violations] == ["group 'moved'", "group 'was_none'"]
    other_rule = [{**r, "rule": "all"} for r in new]  # the same thresholds flag other rows
    assert len(guard_violations([{**r, "rule": "any"} for r in old], other_rule,
                                GuardSettings(min_rated=50))) == 4
    assert len(guard_violations(None, new, GuardSettings(min_rated=50))) == 4  # first run


def test_only_the_decision_method_is_guarded():
    old = [_record("g", [0.1, 0.1], method="hull")]
    new = [_record("g", [0.9, 0.9], method="hull")]
    assert guard_violations(old, new, GuardSettings(max_threshold_change=0.01)) == []


def test_override_needs_who_and_why():
    with pytest.raises(ValueError, match="who"):
        Override(by="", reason="x")


@pytest.fixture
def two_inputs(tmp_path):
    frame = sample_frame(20_000, seed=4)
    first = write_files(frame, tmp_path / "first", n_files=2)
    shifted = frame.copy()
    for column in ("text_model", "image_model"):  # every score pushed up: thresholds move
        shifted[column] = shifted[column] ** 0.4
    second = write_files(shifted, tmp_path / "second", n_files=2)
    return first, second


def test_a_large_move_holds_the_run_and_leaves_latest(tmp_path, two_inputs):
    first, second = two_inputs
    config = base_config(methods=["graph"])
    out = tmp_path / "out"
    one = run_recalibrate(config, first, str(out), max_threshold_change=0.05)
    assert one["published"] and one["guard"]["violations"] == []
    with pytest.raises(PublishRefused, match="held for review") as refused:
        run_recalibrate(config, second, str(out), max_threshold_change=0.05, run_id="second")
    assert "thresholds moved by" in str(refused.value)
    assert (out / "LATEST").read_text().strip() == one["run_id"]
    held = json.loads((out / "runs" / "second" / "manifest.json").read_text())
    assert held["status"] == "complete" and held["published"] is False
    assert held["guard"]["compared_with_run"] == one["run_id"]
    assert held["guard"]["violations"] and held["guard"]["override"] is None

    # A person releases it after review; then rolls back. Both are recorded.
    publish_run(str(out), "second", by="ana", reason="score recalibration was intended")
    assert (out / "LATEST").read_text().strip() == "second"
    rolled = publish_run(str(out), one["run_id"], by="ben", reason="roll back: spike in FPs")
    assert (out / "LATEST").read_text().strip() == one["run_id"]
    entry = rolled["publications"][-1]
    assert (entry["by"], entry["previous_latest"]) == ("ben", "second")


def test_override_publishes_and_records_who_and_why(tmp_path, two_inputs):
    first, second = two_inputs
    config = base_config(methods=["graph"])
    out = tmp_path / "out"
    run_recalibrate(config, first, str(out))
    manifest = run_recalibrate(config, second, str(out), max_threshold_change=0.05,
                               override=Override(by="cam", reason="new model version"))
    assert manifest["published"] is True
    assert manifest["guard"]["violations"]
    assert manifest["guard"]["override"]["by"] == "cam"
    assert (out / "LATEST").read_text().strip() == manifest["run_id"]


def test_cli_exit_codes_and_messages(tmp_path, two_inputs, capsys):
    first, second = two_inputs
    config = tmp_path / "c.yaml"
    config.write_text(
        "classifiers: [text_model, image_model]\ntarget: {marginal_precision: 0.3}\n"
        "columns: {weight: weight}\nmethods: [graph]\ngrid: {bins: 24}\n"
        "publish: {max_threshold_change: 0.05, min_rated: 10}\n"
    )
    out = str(tmp_path / "out")
    base = ["recalibrate", "--config", str(config), "--output", out]
    assert main([*base, "--input", first]) == 0
    assert main([*base, "--input", second]) == 3
    err = capsys.readouterr().err
    assert "held for review" in err and "costlib publish --output" in err
    assert main([*base, "--input", second, "--override-guard"]) == 2
    assert "needs --override-by" in capsys.readouterr().err
    assert main([*base, "--input", second, "--override-guard", "--override-by", "dee",
                 "--override-reason", "planned"]) == 0
    assert "overridden by dee" in capsys.readouterr().out
    # Thin data per the CLI flag.
    assert main([*base, "--input", first, "--min-rated", "1e9"]) == 3
    run_id = (tmp_path / "out" / "LATEST").read_text().strip()
    assert main(["publish", "--output", out, "--run-id", run_id, "--by", "eve",
                 "--reason", "check"]) == 0
    assert main(["publish", "--output", out, "--run-id", "nope", "--by", "eve",
                 "--reason", "x"]) == 2


def test_thresholds_are_compared_by_classifier_name():
    old = [{**_record("g", [0.5, 0.9]), "classifiers": ["x", "y"]}]
    reordered = [{**_record("g", [0.9, 0.5]), "classifiers": ["y", "x"]}]
    assert guard_violations(old, reordered, GuardSettings(max_threshold_change=0.2)) == []
    changed = [{**_record("g", [0.5, 0.9, 0.1]), "classifiers": ["x", "y", "z"]}]
    (violation,) = guard_violations(old, changed, GuardSettings(max_threshold_change=0.2))
    assert "classifiers changed" in violation


def test_a_group_that_disappears_is_a_violation():
    old = [_record("g", [0.5, 0.5]), _record("h", [0.5, 0.5])]
    new = [_record("g", [0.5, 0.5])]
    (violation,) = guard_violations(old, new, GuardSettings(max_threshold_change=0.1))
    assert "'h'" in violation and "missing" in violation


def test_the_published_run_id_cannot_be_reused_and_readers_never_follow_latest_to_a_held_run(
    tmp_path, two_inputs
):
    from costlib_pipelines.io.files import InputError
    from costlib_pipelines.io.runs import load_operating_points

    first, second = two_inputs
    config = base_config(methods=["graph"])
    out = tmp_path / "out"
    run_recalibrate(config, first, str(out), run_id="daily")
    with pytest.raises(InputError, match="is the published run"):
        run_recalibrate(config, second, str(out), run_id="daily")
    with pytest.raises(PublishRefused):
        run_recalibrate(config, second, str(out), run_id="held", max_threshold_change=0.01)
    (out / "LATEST").write_text("held\n")  # e.g. written by hand by mistake
    with pytest.raises(InputError, match="held for review"):
        load_operating_points(str(out))


def test_rollback_works_when_latest_is_broken(tmp_path, two_inputs):
    first, _ = two_inputs
    out = tmp_path / "out"
    good = run_recalibrate(base_config(methods=["graph"]), first, str(out))
    (out / "LATEST").write_text("gone\n")
    manifest = publish_run(str(out), good["run_id"], by="fay", reason="LATEST was broken")
    assert manifest["publications"][-1]["previous_latest"] == "gone"
    assert (out / "LATEST").read_text().strip() == good["run_id"]


# --------------------------------------------------------------------------- guard off
GUARDLESS_CONFIG = ("classifiers: [text_model, image_model]\ntarget: {marginal_precision: 0.3}\n"
                    "columns: {weight: weight}\nmethods: [graph]\ngrid: {bins: 24}\n")


def test_the_guard_is_off_by_default_and_the_summary_and_manifest_say_so(
        tmp_path, two_inputs, capsys):
    """The defaults (max_threshold_change null, min_rated 0) publish without checks: said in
    one line of the summary and as guard.off in the manifest; either setting turns it on."""
    assert GuardSettings().off
    assert not GuardSettings(max_threshold_change=0.2).off and not GuardSettings(min_rated=1).off
    first, _ = two_inputs
    config = tmp_path / "c.yaml"
    config.write_text(GUARDLESS_CONFIG)
    out = tmp_path / "out"
    base = ["recalibrate", "--config", str(config), "--input", first, "--output", str(out)]
    assert main([*base, "--run-id", "off"]) == 0
    printed = capsys.readouterr().out
    assert ("warning: publish guard off (publish.max_threshold_change, publish.min_rated "
            "unset): published without checks") in printed
    manifest = json.loads((out / "runs" / "off" / "manifest.json").read_text())
    assert manifest["guard"]["off"] is True
    assert (manifest["guard"]["max_threshold_change"], manifest["guard"]["min_rated"]) == (None, 0)
    for flags in (["--min-rated", "10"], ["--max-threshold-change", "0.5"]):
        run_id = "on" + flags[0]
        assert main([*base, "--run-id", run_id, *flags]) == 0
        assert "publish guard off" not in capsys.readouterr().out
        manifest = json.loads((out / "runs" / run_id / "manifest.json").read_text())
        assert manifest["guard"]["off"] is False


def test_a_rating_backlog_is_held_by_max_threshold_change_not_by_min_rated(tmp_path):
    """docs/safe_operations.md, 'Rating backlog': 30% of the flagged rows' labels pending. The
    coverage rule pushes every group above them (flagged volume collapses); the recommended
    max_threshold_change holds the run, min_rated alone does not; the volume check warns by
    default and holds it with publish.on_volume_change: hold."""
    import numpy as np
    import pyarrow.parquet as pq

    config = base_config(methods=["graph"], grid={"edges": "auto"})
    complete = write_files(sample_frame(60_000, seed=4), tmp_path / "complete", n_files=2)
    frame = sample_frame(60_000, seed=5)
    frame["label"] = frame["label"].astype(object)
    rated = np.flatnonzero(frame["label"].notna().to_numpy())
    pending = np.random.default_rng(0).choice(rated, size=int(0.3 * rated.size), replace=False)
    frame.loc[frame.index[pending], "label"] = None
    backlog = write_files(frame, tmp_path / "backlog", n_files=2)

    def volume(out, run_id):
        records = pq.read_table(out / "runs" / run_id / "operating_points.parquet").to_pylist()
        return sum(r["volume"] for r in records if r["group"] != "__all__")

    hold_volume = base_config(methods=["graph"], grid={"edges": "auto"},
                              publish={"on_volume_change": "hold"})
    for name, guard, held, run_config in (
            ("threshold", {"max_threshold_change": 0.2}, "thresholds moved by inf", config),
            ("rated", {"min_rated": 50}, None, config),
            ("volume", {}, "volume: the new points would flag", hold_volume)):
        out = tmp_path / name
        run_recalibrate(run_config, complete, str(out), run_id="complete", **guard)
        if held:
            with pytest.raises(PublishRefused, match=held):
                run_recalibrate(run_config, backlog, str(out), run_id="backlog", **guard)
        else:
            assert run_recalibrate(run_config, backlog, str(out), run_id="backlog",
                                   **guard)["published"]
        assert volume(out, "backlog") < 0.1 * volume(out, "complete")
        assert (out / "LATEST").read_text().strip() == ("complete" if held else "backlog")
        # the volume check sees the collapse on the backlog's own rows, whatever else holds
        manifest = json.loads((out / "runs" / "backlog" / "manifest.json").read_text())
        checked = manifest["guard"]["volume"]
        assert checked["exceeded"] and checked["change"] > 10, checked
        assert checked["new_volume"] < checked["in_force_volume"] / 10
        warned = [n for n in manifest["guard"]["notes"] if n.startswith("volume:")]
        assert bool(warned) == (run_config is config)  # warns by default, holds when asked
        print(name, checked["new_volume"], checked["in_force_volume"], checked["change"])


# --------------------------------------------------------------------------- no point at all
def test_a_run_without_any_operating_point_says_so(tmp_path, capsys):
    """30 rated rows: every group and __all__ insufficient_data. Still published (exit 0: the
    input is not bad), but one note says decide will flag nothing."""
    frame = sample_frame(20_000, seed=4)
    frame["label"] = frame["label"].astype(object)
    rated = frame.index[frame["label"].notna()]
    frame.loc[rated[30:], "label"] = None
    inputs = write_files(frame, tmp_path / "in", n_files=2)
    config = tmp_path / "c.yaml"
    config.write_text(GUARDLESS_CONFIG)
    out = tmp_path / "out"
    assert main(["recalibrate", "--config", str(config), "--input", inputs, "--output",
                 str(out), "--run-id", "thin"]) == 0
    printed = capsys.readouterr().out
    note = ("note: no group has an operating point: decide will flag nothing except floor "
            "audits")
    assert note in printed
    manifest = json.loads((out / "runs" / "thin" / "manifest.json").read_text())
    assert manifest["published"] is True
    (recorded,) = [n for n in manifest["guard"]["notes"] if n.startswith("no group has")]
    assert "__all__ included: insufficient_data 4" in recorded


def test_no_point_note_counts_only_points_decide_can_apply():
    from costlib_pipelines.recalibrate.publish import no_point_note

    settings = GuardSettings()
    none = [_record("__all__", None, status="insufficient_data"),
            {**_record("g", [0.5, 0.5]), "point_status": "infeasible"}]
    assert "infeasible 1, insufficient_data 1)" in no_point_note(none, settings)
    assert no_point_note([*none, _record("h", [0.5, 0.5], status="kept")], settings) is None
    assert no_point_note([*none, _record("h", [0.5, 0.5], status="fallback")], settings) is None
    assert no_point_note([], settings) is None  # no records: the guard holds the run anyway
    assert no_point_note(none, GuardSettings(method="hull")) is None


# --------------------------------------------------------------------------- decide
def test_decide_refuses_a_run_that_is_not_published_unless_allowed(tmp_path, two_inputs,
                                                                  capsys):
    """A held run (or its file) given to decide explicitly: exit 2, nothing decided; with
    --allow-unpublished applied with a warning and recorded. The published run, the output
    directory and a hand-made file outside any output are accepted."""
    first, second = two_inputs
    config = tmp_path / "c.yaml"
    config.write_text(GUARDLESS_CONFIG)
    out = tmp_path / "out"
    recal = ["recalibrate", "--config", str(config), "--output", str(out)]
    assert main([*recal, "--input", first, "--run-id", "one"]) == 0
    assert main([*recal, "--input", second, "--run-id", "held",
                 "--max-threshold-change", "0.05"]) == 3
    capsys.readouterr()

    def decide(points, run_id, *flags):
        code = main(["decide", "--config", str(config), "--input", first, "--operating-points",
                     str(points), "--output", str(tmp_path / "dec"), "--run-id", run_id,
                     *flags])
        printed = capsys.readouterr()
        manifest = tmp_path / "dec" / "runs" / run_id / "manifest.json"
        points = json.loads(manifest.read_text())["operating_points"] if code == 0 else None
        return code, printed, points

    held = out / "runs" / "held"
    for points in (held, held / "operating_points.parquet"):
        code, printed, _ = decide(points, "refused")
        assert code == 2, printed.err
        assert "run held is held for review by the publish guard" in printed.err
        assert "--allow-unpublished" in printed.err
        assert not (tmp_path / "dec" / "runs" / "refused").exists()

    code, printed, points = decide(held, "allowed", "--allow-unpublished")
    assert code == 0, printed.err
    assert "warning: applied operating points that are not published" in printed.out
    assert (points["published"], points["run_id"], points["allow_unpublished"]) == (
        False, "held", True)
    assert "held for review" in points["published_reason"]

    for n, source in enumerate((out, out / "runs" / "one",
                                out / "runs" / "one" / "operating_points.parquet")):
        code, printed, points = decide(source, f"published-{n}")
        assert code == 0, printed.err
        assert "warning:" not in printed.out
        assert (points["published"], points["run_id"]) == (True, "one")

    hand_made = tmp_path / "hand" / "points.parquet"  # e.g. written by hand: no run around it
    hand_made.parent.mkdir()
    hand_made.write_bytes((out / "runs" / "one" / "operating_points.parquet").read_bytes())
    code, printed, points = decide(hand_made, "hand")
    assert code == 0, printed.err
    assert (points["published"], points["run_id"]) == (None, None)
    assert "whether it was published is unknown" in points["published_reason"]
    assert "note: " in printed.out

    # After the held run is released, the run published before it is no longer LATEST.
    publish_run(str(out), "held", by="gil", reason="reviewed")
    code, printed, _ = decide(out / "runs" / "one", "earlier")
    assert code == 2 and "not the published run" in printed.err and "LATEST names held" in \
        printed.err


def test_points_publication_of_files_inside_runs(tmp_path):
    """Which files of a run count as the published run; runs outside an output do not."""
    from costlib_pipelines.io.runs import MARKER, points_publication

    out = tmp_path / "out"
    run = out / "runs" / "w1"
    (run / "windows" / "a").mkdir(parents=True)
    (run / "windows" / "b").mkdir()
    (run / "manifest.json").write_text(json.dumps({"published": True, "guard": {"windows": [
        {"window": "a", "state": "applied"}, {"window": "b", "state": "held"}]}}))
    (out / "LATEST").write_text("w1\n")
    assert points_publication(str(run))["published"] is True
    assert points_publication(str(run / "windows" / "a" / "operating_points.parquet"))[
        "published"] is True
    window_b = points_publication(str(run / "windows" / "b" / "operating_points.parquet"))
    assert window_b["published"] is False and "window b" in window_b["reason"]
    in_force = points_publication(str(run / "points_in_force.parquet"))
    assert in_force["published"] is False and in_force["run_id"] == "w1"
    (out / "LATEST").write_text("../w1\n")  # tampered: never followed, never published
    assert points_publication(str(run))["published"] is False
    incomplete = out / "runs" / "r2"
    incomplete.mkdir()
    (incomplete / MARKER).write_text("{}")
    got = points_publication(str(incomplete / "operating_points.parquet"))
    assert got["published"] is False and "incomplete" in got["reason"]
    elsewhere = tmp_path / "copy" / "r3"
    elsewhere.mkdir(parents=True)
    (elsewhere / "manifest.json").write_text(json.dumps({"published": True}))
    got = points_publication(str(elsewhere))
    assert got["published"] is False and "not inside a recalibrate output" in got["reason"]
    assert points_publication(str(tmp_path / "loose.parquet"))["published"] is None
