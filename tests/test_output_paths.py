"""Every command that writes refuses an impossible output path the same way: exit 2 and one
line on stderr naming the path, never a traceback (exit 1), and nothing written."""

from __future__ import annotations

import os

import pytest
from pipeline_data import sample_frame, write_files

from costlib_pipelines.commands.cli import main

CONFIG = ("classifiers: [text_model, image_model]\ntarget: {marginal_precision: 0.3}\n"
          "columns: {weight: weight}\nmethods: [hull]\ndecision_method: hull\n"
          "grid: {edges: uniform, bins: 16}\nmin_rated: {positives: 5, negatives: 5}\n")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A config, an input and a recalibrate output with a published run."""
    root = tmp_path_factory.mktemp("paths")
    (root / "c.yaml").write_text(CONFIG)
    inputs = write_files(sample_frame(6_000, seed=3), root / "in", n_files=1)
    assert main(["recalibrate", "--config", str(root / "c.yaml"), "--input", inputs,
                 "--output", str(root / "points")]) == 0
    (root / "a_file").write_text("a file, not a directory")
    return {"root": root, "config": str(root / "c.yaml"), "input": inputs,
            "points": str(root / "points")}


def hostile(root):
    """Paths no filesystem call should turn into a traceback: on a virtual filesystem, under
    a file, with a NUL byte or a line break, blank."""
    return {"proc": "/proc/costlib-out", "proc_file": "/proc/report.html",
            "read_only": "/sys/costlib-out",  # sysfs: not writable, for root too
            "under_a_file": str(root / "a_file" / "out"), "nul": str(root / "a\0b"),
            "newline": str(root / "a\nb"), "blank": " "}


def commands(made, path):
    return {
        "recalibrate": ["recalibrate", "--config", made["config"], "--input", made["input"],
                        "--output", path],
        "decide": ["decide", "--config", made["config"], "--input", made["input"],
                   "--operating-points", made["points"], "--output", path],
        "report": ["report", "--run", made["points"], "--out", path],
        "report --history": ["report", "--output", made["points"], "--history", "--out", path],
    }


@pytest.mark.parametrize("command", ["recalibrate", "decide", "report", "report --history"])
@pytest.mark.parametrize("kind", ["proc", "proc_file", "read_only", "under_a_file", "nul",
                                  "newline", "blank"])
def test_an_impossible_output_path_is_exit_2_in_one_line(made, command, kind, capsys):
    path = hostile(made["root"])[kind]
    before = sorted(os.listdir(made["root"]))
    assert main(commands(made, path)[command]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"costlib {command.split()[0]}: error:")
    assert "Traceback" not in err
    assert sorted(os.listdir(made["root"])) == before  # nothing written beside
    if kind == "read_only":
        assert "not writable" in err
    if kind == "under_a_file":
        assert "a_file" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
@pytest.mark.parametrize("command", ["recalibrate", "decide", "report", "report --history"])
def test_a_read_only_directory_is_exit_2_in_one_line(made, command, capsys, tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert main(commands(made, str(locked / "out"))[command]) == 2
    finally:
        locked.chmod(0o755)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not writable" in err
