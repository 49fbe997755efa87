"""Each bounded parameter's interval is declared once (costlib.bounds.BOUNDS) and read by all.

The schema is checked against the table (it stays a plain JSON file), the command-line flags
are checked to carry the table's intervals and to accept exactly the values inside them, and
the library's objects are checked to refuse exactly the values outside them.
"""

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from costlib.bounds import BOUNDS, Interval
from costlib.thresholds import Constraints, InForcePolicy, Objective, Target, ThresholdGrid
from costlib.thresholds.grid._recall_bounds import _check_level
from costlib.thresholds.loop import confidence_intervals
from costlib_pipelines.commands.cli import build_parser

SCHEMA = json.loads((Path(__file__).parents[1] / "schemas" / "run_config.schema.json")
                    .read_text())
BOUND_WORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

#: flag of a command -> the config key it sets
FLAGS = {
    ("recalibrate", "--max-unrated-share"): "coverage.max_unrated_share",
    ("recalibrate", "--beta"): "objective.beta",
    ("recalibrate", "--volume"): "objective.volume",
    ("recalibrate", "--min-precision"): "constraints.min_precision",
    ("recalibrate", "--min-recall"): "constraints.min_recall",
    ("recalibrate", "--max-volume"): "constraints.max_volume",
    ("recalibrate", "--max-false-positives"): "constraints.max_false_positives",
    ("recalibrate", "--capacity"): "capacity.total",
    ("recalibrate", "--max-threshold-change"): "publish.max_threshold_change",
    ("recalibrate", "--min-rated"): "publish.min_rated",
    ("demo", "--min-recall"): "constraints.min_recall",
    ("demo", "--target-marginal-precision"): "target.marginal_precision",
}


def _schema_node(key):
    node = SCHEMA
    for part in key.split("."):
        node = node["properties"][part]
    return node


def _edge_values(interval):
    """Values at, just inside and just outside each finite end, and non-finite values."""
    values = [math.nan, math.inf, -math.inf, 0.5, 7.0]
    for end in (interval.low, interval.high):
        if math.isfinite(end):
            values += [end, end - 1e-6, end + 1e-6]
    return [float(v) for v in values]


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_the_schema_states_the_declared_interval(key):
    node = _schema_node(key)
    stated = {word: node[word] for word in BOUND_WORDS if word in node}
    assert stated == BOUNDS[key].json_schema(), key


def test_every_schema_bound_of_a_flag_or_library_key_is_declared():
    """A bounded schema key that a command flag sets is in the table (no second statement)."""
    def bounded_keys(node, path):
        for name, child in node.get("properties", {}).items():
            key = f"{path}.{name}" if path else name
            if any(word in child for word in BOUND_WORDS):
                yield key
            yield from bounded_keys(child, key)

    flags = {flag.lstrip("-").replace("-", "_") for _, flag in FLAGS}
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("recalibrate", "demo", "decide"):
        for action in subparsers.choices[command]._actions:
            if getattr(action.type, "kind", None) == "number":
                name = action.option_strings[-1]
                assert (command, name) in FLAGS or not any(
                    key.endswith("." + name.lstrip("-").replace("-", "_"))
                    for key in bounded_keys(SCHEMA, "")), (command, name)
    undeclared = [k for k in bounded_keys(SCHEMA, "")
                  if k.split(".")[-1] in flags and k not in BOUNDS]
    assert undeclared == []


@pytest.mark.parametrize(("command", "flag"), sorted(FLAGS))
def test_each_flag_takes_its_keys_interval(command, flag):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in subparsers.choices[command]._actions if flag in a.option_strings)
    interval = BOUNDS[FLAGS[command, flag]]
    assert action.type.interval is interval
    for value in _edge_values(interval):
        if value in interval:
            assert action.type(repr(value)) == value
        else:
            with pytest.raises(argparse.ArgumentTypeError,
                               match=re.escape(f"must be a finite number {interval.text()}")):
                action.type(repr(value))


def _grid():
    edges = (np.array([0.5]),)
    return ThresholdGrid(edges=edges, pos=np.array([1.0, 2.0]), neg=np.array([3.0, 1.0]),
                         unrated=np.array([0.0, 1.0]))


#: config key -> a library call that validates a value of it
LIBRARY = {
    "constraints.min_precision": lambda v: Constraints(min_precision=v),
    "constraints.min_recall": lambda v: Constraints(min_recall=v),
    "constraints.max_volume": lambda v: Constraints(max_volume=v),
    "constraints.max_false_positives": lambda v: Constraints(max_false_positives=v),
    "objective.beta": lambda v: Objective.make("fbeta", beta=v),
    "objective.volume": lambda v: Objective.make("precision_at_volume", volume=v),
    "target.marginal_precision": Target.from_marginal_precision,
    "target.fp_per_tp": Target.from_fp_per_tp,
    "target.slope": Target,
    "coverage.max_unrated_share": lambda v: _grid().covered("any", v),
    "in_force.min_gain_z": lambda v: InForcePolicy(min_gain_z=v),
    "in_force.evidence_z": lambda v: InForcePolicy(evidence_z=v),
    "in_force.unseen_rows": lambda v: InForcePolicy(unseen_rows=v),
    "recall.level": _check_level,
    "bootstrap.level": lambda v: _bootstrap_level(v),
}


def _bootstrap_level(level):
    """confidence_intervals checks its level first; an accepted one reaches the (absent)
    replicate grids."""
    try:
        confidence_intervals(None, level=level)
    except AttributeError:
        pass


@pytest.mark.parametrize("key", sorted(LIBRARY))
def test_the_library_refuses_exactly_the_values_outside(key):
    interval = BOUNDS[key]
    for value in _edge_values(interval):
        if value in interval:
            LIBRARY[key](value)
        else:
            with pytest.raises(ValueError, match=re.escape(interval.text())):
                LIBRARY[key](value)


def test_messages_read_as_before():
    with pytest.raises(ValueError, match=r"^min_recall must be in \(0, 1\], got 0.0$"):
        Constraints(min_recall=0.0)
    with pytest.raises(ValueError, match=r"^max_volume must be finite and >= 0, got -1.0$"):
        Constraints(max_volume=-1.0)
    with pytest.raises(ValueError, match=r"^in_force.max_added_edges must be in \[0, 4096\], "
                                         r"got 4097$"):
        InForcePolicy(max_added_edges=4097)


def test_interval_membership_text_and_schema():
    unit = Interval(0.0, 1.0, low_open=True)
    assert 1.0 in unit and 0.0 not in unit and "x" not in unit and math.nan not in unit
    assert unit.text() == "in (0, 1]" and Interval(0.0).text() == ">= 0"
    assert unit.json_schema() == {"exclusiveMinimum": 0, "maximum": 1}
    assert Interval(0.0, 0.5, high_open=True).json_schema() == {"minimum": 0,
                                                                "exclusiveMaximum": 0.5}
