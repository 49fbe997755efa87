"""costlib.audit._sampling: hash-based stratified audit samples, against independent truth."""

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from costlib.audit._sampling import (
    AuditDesign,
    audit_sample,
    audit_uniforms,
    band_scores,
    budget_scale,
    expected_audits,
)

N = 200_000


def rows(n=N, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.choice(10**12, size=n, replace=False)
    scores = rng.uniform(0, 1, size=(n, 2))
    scores[rng.uniform(size=n) < 0.2, 0] = -np.inf  # did not score
    scores[rng.uniform(size=n) < 0.2, 1] = np.nan  # did not score (NaN form)
    flagged = rng.uniform(size=n) < 0.1
    return ids, scores, flagged


# Design used below: strata by the highest score, [-inf, 0.3), [0.3, 0.7), [0.7, inf).
DESIGN = AuditDesign(edges=(0.3, 0.7), weights=(0.0, 1.0, 20.0), floor=0.002,
                     budget_share=0.01)
# pi by hand: max(0.002, 0.01 * 0) = 0.002; 0.01 * 1 = 0.01; 0.01 * 20 = 0.2
PI = np.array([0.002, 0.01, 0.2])


def hand_strata(scores):
    best = np.array([max([v for v in row if np.isfinite(v)], default=-np.inf) for row in scores])
    return np.where(best < 0.3, 0, np.where(best < 0.7, 1, 2))


def test_band_scores_and_strata_by_hand():
    scores = np.array([[0.1, np.nan], [-np.inf, 0.5], [np.nan, -np.inf], [0.7, 0.2],
                       [0.3, 0.29]])
    assert band_scores(scores).tolist() == [0.1, 0.5, -np.inf, 0.7, 0.3]
    assert DESIGN.strata(scores).tolist() == [0, 1, 0, 2, 1]  # edges belong to the upper band


def test_inclusion_probabilities_are_honoured_per_stratum():
    ids, scores, flagged = rows()
    sample = audit_sample(ids, scores, flagged, "run-1", DESIGN)
    strata = hand_strata(scores)
    assert np.array_equal(sample.stratum, strata)
    for h, pi in enumerate(PI):
        unflagged = (strata == h) & ~flagged
        n = int(unflagged.sum())
        assert n > 20_000
        assert np.all(sample.audit_probability[unflagged] == pi)
        share = sample.audit[unflagged].mean()
        assert abs(share - pi) < 3 * np.sqrt(pi * (1 - pi) / n), (h, share, pi)


def test_flagged_rows_are_never_audited_and_have_probability_one():
    ids, scores, flagged = rows()
    sample = audit_sample(ids, scores, flagged, "run-1", DESIGN)
    assert not sample.audit[flagged].any()
    assert np.all(sample.audit_probability[flagged] == 1.0)


def test_floor_holds_for_every_unflagged_row():
    ids, scores, flagged = rows(50_000)
    design = AuditDesign(edges=(0.5,), weights=(0.0, 0.0), floor=0.03, budget_share=0.0)
    sample = audit_sample(ids, scores, flagged, "s", design)
    assert np.all(sample.audit_probability[~flagged] == 0.03)
    # the floor is a real inclusion probability, not a label: rows do get audited
    share = sample.audit[~flagged].mean()
    assert abs(share - 0.03) < 3 * np.sqrt(0.03 * 0.97 / (~flagged).sum())
    # and it holds whatever the weights
    assert (DESIGN.probabilities(0.0) >= DESIGN.floor).all()


def test_same_rows_same_decision_in_any_shard_or_order():
    ids, scores, flagged = rows(40_000, seed=1)
    whole = audit_sample(ids, scores, flagged, "salt", DESIGN)
    rng = np.random.default_rng(7)
    shard = rng.integers(0, 7, size=ids.size)
    audit = np.zeros(ids.size, dtype=bool)
    prob = np.zeros(ids.size)
    for s in range(7):
        rows_s = np.flatnonzero(shard == s)
        order = rng.permutation(rows_s)  # each shard in its own random order
        part = audit_sample(ids[order], scores[order], flagged[order], "salt", DESIGN)
        audit[order] = part.audit
        prob[order] = part.audit_probability
    assert np.array_equal(audit, whole.audit)
    assert np.array_equal(prob, whole.audit_probability)
    assert whole.audit.sum() > 500


def test_salt_changes_the_sample_independently():
    ids = np.arange(N)
    u1, u2 = audit_uniforms(ids, "a"), audit_uniforms(ids, "b")
    assert np.array_equal(u1, audit_uniforms(ids, "a"))
    # uniform on [0, 1) (Kolmogorov-Smirnov), and the two salts uncorrelated
    assert stats.kstest(u1, "uniform").pvalue > 1e-3
    assert stats.kstest(u2, "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(u1, u2)[0, 1]) < 3 / np.sqrt(N)
    both = ((u1 < 0.5) & (u2 < 0.5)).mean()  # independent: 0.25
    assert abs(both - 0.25) < 3 * np.sqrt(0.25 * 0.75 / N)


def test_ids_hash_as_their_string_in_any_container():
    ints = np.array([12, 7, 123456789012, -3])
    strings = np.array(["12", "7", "123456789012", "-3"])
    want = audit_uniforms(strings, "x")
    assert np.array_equal(audit_uniforms(ints, "x"), want)
    assert np.array_equal(audit_uniforms(ints.tolist(), "x"), want)
    assert np.array_equal(audit_uniforms(pa.array(ints), "x"), want)
    assert np.array_equal(audit_uniforms(pa.array(strings), "x"), want)
    assert np.array_equal(audit_uniforms(pa.array(strings, pa.large_string()), "x"), want)
    assert np.array_equal(audit_uniforms(pa.chunked_array([strings[:2], strings[2:]]), "x"),
                          want)
    # fixed values, the same on every machine: a change here changes every run's sample
    assert np.round(audit_uniforms(np.array(["a", "b"]), "salt"), 12).tolist() == \
        PINNED_UNIFORMS


PINNED_UNIFORMS = [0.23522241248, 0.386033076014]


def test_bad_ids_are_refused():
    with pytest.raises(ValueError, match="must not be null"):
        audit_uniforms(pa.array(["a", None]), "s")
    with pytest.raises(ValueError, match="integers or strings"):
        audit_uniforms(np.array([0.5]), "s")


def test_expected_count_and_variance_of_the_budget():
    ids, scores, flagged = rows()
    sample = audit_sample(ids, scores, flagged, "budget", DESIGN)
    strata = hand_strata(scores)
    counts = np.bincount(strata[~flagged], minlength=3)
    mean, var = expected_audits(counts, PI)
    assert mean == pytest.approx(float(np.sum(counts * PI)))
    assert var == pytest.approx(float(np.sum(counts * PI * (1 - PI))))
    assert abs(sample.audit.sum() - mean) < 3 * np.sqrt(var)
    # all weights 1 and floor <= budget_share: exactly budget_share of the unflagged rows
    flat = AuditDesign(floor=0.001, budget_share=0.02)
    flat_sample = audit_sample(ids, scores, flagged, "budget", flat)
    n = (~flagged).sum()
    assert abs(flat_sample.audit.sum() - 0.02 * n) < 3 * np.sqrt(n * 0.02 * 0.98)


def test_budget_scale_hits_the_expected_count():
    ids, scores, flagged = rows()
    counts = np.bincount(hand_strata(scores)[~flagged], minlength=3)
    for wanted in (1_000.0, 3_000.0, 20_000.0):
        c = budget_scale(counts, DESIGN, wanted)
        pi = np.clip(c * np.array([0.0, 1.0, 20.0]), 0.002, 1.0)  # by hand
        assert float(np.sum(counts * pi)) == pytest.approx(wanted, rel=1e-12)
        sample = audit_sample(ids, scores, flagged, "scaled", DESIGN, scale=c)
        _, var = expected_audits(counts, pi)
        assert abs(sample.audit.sum() - wanted) < 3 * np.sqrt(var)
    with pytest.raises(ValueError, match="reachable range"):
        budget_scale(counts, DESIGN, 0.5 * 0.002 * counts.sum())
    with pytest.raises(ValueError, match="reachable range"):
        budget_scale(counts, DESIGN, float(counts.sum()) + 1)


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"edges": (0.5, 0.5), "weights": (1, 1, 1)}, "strata.edges"),
    ({"edges": (0.5,), "weights": (1,)}, "strata.weights"),
    ({"edges": (), "weights": (-1,)}, "strata.weights"),
    ({"floor": 0.0}, "floor"),
    ({"budget_share": 1.5}, "budget_share"),
])
def test_bad_designs_name_the_key(kwargs, key):
    with pytest.raises(ValueError, match=key):
        AuditDesign(**kwargs)
