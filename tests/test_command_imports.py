"""Commands that run no pipeline do not import Apache Beam (nor pandas, scipy, scikit-learn),
and status, unlock and clean not even the config schema's validator or the package metadata.

Each command runs in a fresh interpreter on a real demo output; the interpreter then reports
what ``sys.modules`` holds. Local files are served without Beam by
:mod:`costlib_pipelines.io.filesystems`, checked here against Beam's own ``FileSystems``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from apache_beam.io.filesystems import FileSystems as BeamFileSystems

from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.filesystems import FileSystems

HEAVY = ("apache_beam", "pandas", "scipy", "sklearn", "matplotlib", "jsonschema",
         "importlib.metadata")

_PROBE = f"""
import json, sys
from costlib_pipelines.commands.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("imports") / "demo"
    assert main(["demo", "--output", str(out), "--n-items", "5000", "--no-plots"]) == 0
    return out / "recalibrate"


def _run(argv: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("command", ["status", "publish", "unlock", "report", "clean"])
def test_commands_without_a_pipeline_do_not_import_beam(demo, tmp_path, command):
    run_id = (demo / "LATEST").read_text().strip()
    argv = {
        "status": ["status", "--output", str(demo)],
        "publish": ["publish", "--output", str(demo), "--run-id", run_id, "--by", "test",
                    "--reason", "republish"],
        "unlock": ["unlock", "--output", str(demo), "--run-id", run_id],
        "report": ["report", "--run", str(demo), "--out", str(tmp_path / "report.html")],
        "clean": ["clean", "--output", str(demo), "--dry-run"],
    }[command]
    seen = _run(argv)
    assert seen["code"] == 0
    # the report draws figures; publish and report read the run's config (its schema)
    allowed = {"report": {"matplotlib", "jsonschema"}, "publish": {"jsonschema"}}.get(command,
                                                                                  set())
    assert set(seen["loaded"]) <= allowed, seen


def _tree(root):
    for name in ("a/x.parquet", "a/y.json", "a/b/z.parquet", "a/b/c/w.parquet", "a/.hidden",
                 "d/_tmp.parquet", "top.parquet"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())


@pytest.mark.parametrize("pattern", [
    "a/*.parquet", "a/**", "a/**/*.parquet", "*/x.parquet", "a/b", "a/b/", "a/?.json",
    "a/[xy].*", "a/[!x].*", "missing/*", "a/x.parquet", "a", "*.parquet", "d/*",
])
def test_local_match_finds_what_beam_finds(tmp_path, pattern):
    _tree(tmp_path)
    full = f"{tmp_path}/{pattern}"
    ours = FileSystems.match([full])[0]
    beam = BeamFileSystems.match([full])[0]
    assert sorted(m.path for m in ours.metadata_list) == sorted(m.path for m in beam.metadata_list)
    assert sorted(m.size_in_bytes for m in ours.metadata_list) == sorted(
        m.size_in_bytes for m in beam.metadata_list)


def test_local_files_are_created_moved_and_deleted_as_beam_does(tmp_path):
    for fs, root in ((FileSystems, tmp_path / "ours"), (BeamFileSystems, tmp_path / "beam")):
        with fs.create(f"{root}/new/deep/file.bin") as fh:  # parents are made
            fh.write(b"payload")
        fs.rename([f"{root}/new/deep/file.bin"], [f"{root}/new/moved.bin"])
        with fs.open(f"{root}/new/moved.bin") as fh:
            assert fh.read() == b"payload"
        assert fs.exists(f"{root}/new/moved.bin") and not fs.exists(f"{root}/new/deep/file.bin")
        fs.delete([f"{root}/new"])  # a directory goes with its contents
        assert not fs.exists(f"{root}/new")
        with pytest.raises(OSError):
            fs.delete([f"{root}/new"])
        with pytest.raises(OSError):
            fs.rename([f"{root}/gone"], [f"{root}/there"])
    assert sorted(p.relative_to(tmp_path / "ours") for p in (tmp_path / "ours").rglob("*")) == \
        sorted(p.relative_to(tmp_path / "beam") for p in (tmp_path / "beam").rglob("*"))
