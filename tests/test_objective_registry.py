"""The objective registry: every list of objectives derives from it (schema enum, command-line
choices, capacity), and the files that state the built-in list agree with it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import costlib_schemas
from costlib.thresholds import Target, ThresholdGrid, optimize
from costlib.thresholds.capacity import capacity_spec, group_frontiers
from costlib.thresholds.point import (
    Objective,
    capacity_objective_names,
    objective_names,
    register_objective,
    unregister_objective,
)
from costlib_pipelines.commands.cli import build_parser
from costlib_pipelines.config import run_config_schema

ROOT = Path(__file__).resolve().parent.parent
BUILT_IN = ("linear", "fbeta", "f1", "precision_at_volume")
BUILT_IN_CAPACITY = ("linear", "true_positives")


@dataclass(frozen=True)
class TwiceTruePositives(Objective):
    """A toy objective: ``2 TP - FP`` (a linear utility with slope 1/2, scaled)."""

    name: ClassVar[str] = "toy_two_tp"
    for_capacity: ClassVar[bool] = True

    @classmethod
    def build(cls, *, slope: float | None, **params: Any) -> Objective:
        return cls()

    @classmethod
    def for_allocation(cls, target: Any) -> Objective:
        return cls()

    def values(self, tp, fp, total_positives):
        return 2.0 * tp - fp


@pytest.fixture
def toy():
    register_objective(TwiceTruePositives)
    yield TwiceTruePositives
    unregister_objective(TwiceTruePositives)


def _choices(command: str, flag: str) -> tuple[str, ...]:
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices
               and command in a.choices).choices[command]
    return tuple(next(a for a in sub._actions if flag in a.option_strings).choices)


def test_the_built_in_objectives():
    assert objective_names() == BUILT_IN
    assert capacity_objective_names() == BUILT_IN_CAPACITY


def test_a_registered_objective_is_seen_everywhere(toy):
    assert "toy_two_tp" in objective_names()
    assert "toy_two_tp" in capacity_objective_names()
    schema = run_config_schema()["properties"]
    assert "toy_two_tp" in schema["objective"]["properties"]["name"]["enum"]
    assert "toy_two_tp" in schema["capacity"]["properties"]["objective"]["enum"]
    assert "toy_two_tp" in _choices("recalibrate", "--objective")
    assert "toy_two_tp" in _choices("recalibrate", "--capacity-objective")
    assert capacity_spec(objective="toy_two_tp").objective.name == "toy_two_tp"
    # it chooses a point: the exhaustive argmax of 2 TP - FP over every cell (hull method)
    rng = np.random.default_rng(0)
    scores = rng.random((400, 2))
    labels = rng.random(400) < scores.max(axis=1) ** 2
    grid = ThresholdGrid.from_scores(scores, labels, [np.linspace(0, 1, 9)] * 2)
    point = optimize(grid, method="hull", objective="toy_two_tp")
    tp, fp = grid.counts("any")
    assert point.objective == (2 * tp - fp).max()
    assert point.objective_name == "toy_two_tp"
    frontiers = group_frontiers({"g": grid}, capacity_spec(objective="linear",
                                                           target=Target(slope=0.5)))
    assert frontiers["g"].volume.size > 0


def test_unregistered_it_is_gone(toy):
    unregister_objective(toy)
    assert "toy_two_tp" not in objective_names()
    register_objective(toy)  # the fixture removes it again


def test_the_files_state_the_built_in_lists():
    schema = costlib_schemas.load("run_config.schema.json")["properties"]
    assert tuple(schema["objective"]["properties"]["name"]["enum"]) == objective_names()
    assert tuple(schema["capacity"]["properties"]["objective"]["enum"]) == \
        capacity_objective_names()
    point = costlib_schemas.load("operating_point.json")
    field = next(f for f in point["fields"] if f["name"] == "objective")
    assert tuple(field["enum"]) == objective_names()
    metadata = json.loads((ROOT / "deploy" / "dataflow" / "metadata.json").read_text())
    parameter = next(p for p in metadata["parameters"] if p["name"] == "objective")
    assert parameter["regexes"] == [f"^({'|'.join(objective_names())})$"]
    example = (ROOT / "schemas" / "example_config.yaml").read_text().splitlines()
    comment = next(line for line in example if line.startswith("  name: ")).split("#")[1]
    assert [word.split()[0] for word in comment.split("|")] == list(objective_names())
    comment = next(line for line in example if line.startswith("  objective: ")).split("#")[1]
    assert [word.split()[0] for word in comment.split("|")] == list(capacity_objective_names())
    config_page = (ROOT / "docs" / "reference" / "config.md").read_text()
    assert "one of " + ", ".join(f"`{n}`" for n in objective_names()) in config_page


def test_registering_twice_or_a_non_objective_is_refused(toy):
    with pytest.raises(ValueError, match="registered already"):
        register_objective(toy)
    with pytest.raises(TypeError, match="subclass of Objective"):
        register_objective(int)  # type: ignore[arg-type]


def test_every_objective_parameter_has_a_record_column_and_a_schema_key():
    from costlib.thresholds.point import parameter_owners
    from costlib_pipelines.io.records import OBJECTIVE_PARAMETER_FIELDS

    schema = costlib_schemas.load("run_config.schema.json")["properties"]["objective"]
    columns = {f["name"] for f in costlib_schemas.load("operating_point.json")["fields"]}
    assert parameter_owners() == {"beta": ("fbeta", 1.0), "volume": ("precision_at_volume", None)}
    for key in parameter_owners():
        assert key in OBJECTIVE_PARAMETER_FIELDS and f"objective_{key}" in columns
        assert key in schema["properties"]
