"""``tools/flink_cluster.py`` without a cluster: the layout of several TaskManagers, the flags
and configuration it gives, and its refusals (the engine tests run the cluster itself)."""

from __future__ import annotations

import pytest
from flink_support import cluster_module

flink = cluster_module()


def flag(flags: list[str], name: str) -> str:
    (value,) = [f.split("=", 1)[1] for f in flags if f.startswith(f"--{name}=")]
    return value


@pytest.mark.parametrize(("managers", "slots", "batch", "streaming"),
                         [(1, 4, 4, 2), (2, 1, 2, 1), (2, 2, 4, 2), (3, 1, 3, 1), (1, 1, 1, 1)])
def test_flags_spread_a_batch_job_over_every_slot_and_a_stream_over_half(
        tmp_path, managers, slots, batch, streaming):
    cluster = flink.Cluster(flink.Ports(40081), tmp_path, layout=flink.Layout(managers, slots))
    assert flag(cluster.beam_flags(), "parallelism") == str(batch)
    assert flag(cluster.beam_flags("flink"), "parallelism") == str(batch)
    assert flag(cluster.streaming_flags(), "parallelism") == str(streaming)
    assert flag(cluster.beam_flags(), "environment_cache_millis") == "30000"
    assert cluster.names == ("jobmanager", *[f"taskmanager-{i}" for i in range(managers)],
                             "job_server", "worker_pool")


def test_the_layout_start_records_is_what_later_commands_read(tmp_path):
    flink.Layout(2, 1).save(tmp_path / "layout.json")
    cluster = flink.Cluster(flink.Ports(40081), tmp_path)
    assert cluster.layout == flink.Layout(2, 1)
    assert flag(cluster.beam_flags(), "parallelism") == "2"


def test_configuration_of_one_taskmanager_slot_each(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "config.yaml").write_text("env:\n  java:\n    opts:\n      all: -Dx=1\n")
    config = flink.flink_config(home, tmp_path, flink.Ports(40081), flink.Layout(2, 1))
    assert config["taskmanager.numberOfTaskSlots"] == 1
    assert config["parallelism.default"] == 2
    assert config["cluster.evenly-spread-out-slots"] is True
    assert config["classloader.resolve-order"] == "parent-first"
    assert config["env.java.opts.all"] == "-Dx=1"
    assert flink.Layout(1, 4).memory == ("3072m", "768m")
    assert flink.Layout(1, 2).memory == ("2560m", "384m")  # the default
    assert flink.Layout(2, 1).memory == ("2304m", "192m")  # the engine tests'
    assert flink.Layout() == flink.Layout(1, 2)


def test_beam_class_path_leaves_the_flink_jars_to_flink(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("beam-runners-flink-1.19-2.62.0.jar", "flink-core-1.19.0.jar", "gson-2.11.jar"):
        (lib / name).write_bytes(b"")
    path = flink.beam_class_path(tmp_path / "launcher.jar").split(":")
    assert [p.rsplit("/", 1)[1] for p in path] == ["beam-runners-flink-1.19-2.62.0.jar",
                                                   "gson-2.11.jar"]


def test_refusals(tmp_path, capsys):
    cluster = flink.Cluster(flink.Ports(40081), tmp_path, layout=flink.Layout(2, 1))
    with pytest.raises(flink.ClusterError, match="index 2 is not in 0-1"):
        cluster.kill("taskmanager", index=2)
    with pytest.raises(flink.ClusterError, match="index 5"):
        cluster.start_taskmanager(5)
    assert cluster.kill("taskmanager", index=1) is None  # not started: nothing to kill
    with pytest.raises(flink.ClusterError, match="--taskmanagers must be 1-16"):
        flink.Layout(0, 1)
    with pytest.raises(SystemExit):
        flink.main(["flags", "--taskmanagers", "2", "--state-dir", str(tmp_path)])
    assert "--taskmanagers and --slots are for start" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        flink.main(["kill", "--state-dir", str(tmp_path)])
    assert "kill takes the process" in capsys.readouterr().err
