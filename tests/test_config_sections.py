"""The typed views of the run config (grid, audit, publish) and the in-force policy: one field
per schema key with the schema's default, built once from the validated config, and the policy
refuses what the schema refuses when built directly."""

from __future__ import annotations

import dataclasses
import math

import pytest

import costlib_schemas
from costlib.thresholds import InForcePolicy
from costlib_pipelines.config import RunConfig
from costlib_pipelines.config_sections import AuditSection, GridSection, PublishSection

SECTIONS = {"grid": GridSection, "audit": AuditSection, "publish": PublishSection,
            "in_force": InForcePolicy}


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_each_view_has_one_field_per_schema_key_with_its_default(section):
    schema = costlib_schemas.load("run_config.schema.json")["properties"][section]["properties"]
    view = SECTIONS[section]
    names = [f.name for f in dataclasses.fields(view)]
    assert sorted(names) == sorted(schema)
    for field in dataclasses.fields(view):
        default = (field.default_factory() if field.default is dataclasses.MISSING
                   else field.default)
        if "default" in schema[field.name]:
            assert default == schema[field.name]["default"], field.name


def test_the_views_read_the_validated_config():
    config = RunConfig.from_dict({
        "classifiers": ["a", "b"], "target": {"marginal_precision": 0.25},
        "grid": {"edges": "uniform", "bins": 32, "range": [0.0, 10.0]},
        "audit": {"enabled": True, "floor": 0.002},
        "publish": {"max_threshold_change": 0.1},
        "in_force": {"evidence_z": None, "unseen_rows": 2.5}})
    assert (config.grid.edges, config.grid.bins, config.grid.range) == ("uniform", 32,
                                                                        [0.0, 10.0])
    assert config.audit.enabled and config.audit.floor == 0.002
    assert config.audit.strata == config.raw["audit"]["strata"]
    assert (config.publish.max_threshold_change, config.publish.min_rated) == (0.1, 0)
    assert config.policy == InForcePolicy(evidence_z=None, unseen_rows=2.5)
    assert config.policy is config.policy  # built once
    for name in ("grid", "audit", "publish"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            getattr(config, name).enabled = False


@pytest.mark.parametrize("settings, key", [
    ({"evidence_z": -1.0}, "evidence_z"), ({"min_gain_z": math.nan}, "min_gain_z"),
    ({"unseen_rows": 101.0}, "unseen_rows"), ({"max_added_edges": 5000}, "max_added_edges"),
    ({"evidence": 1.0}, "unknown setting"),
])
def test_the_policy_refuses_what_the_schema_refuses(settings, key):
    with pytest.raises(ValueError, match=key):
        InForcePolicy.from_settings(settings)
