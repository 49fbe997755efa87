"""docs/recall_per_policy.md runs: its blocks, in order, in fresh processes. Each policy's
recall estimate is checked against the Horvitz–Thompson sums computed here from the stream's
labels and inclusion probabilities, its interval against the true recall of the simulated
harm, and each policy's decisions against its thresholds recomputed from the scores."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "recall_per_policy.md"
BIN = Path(sys.executable).parent

#: Run after the page's reading block, in the same process (``WRITE`` is the page's first
#: block, run again here for the simulated truth it holds: same seed, same file).
CHECKS = """
import math
import numpy as np
exec(WRITE)  # toxic, spam: the truth of every post; posts: the stream as written
truth = {"toxic": (toxic, "toxicity"), "spam": (spam, "spam")}
covered = 0
for row in recall.itertuples():
    if row.group == "__all__":
        continue
    harm, score = truth[row.policy]
    rows = posts[posts["language"] == row.group]
    label = rows[f"is_{row.policy}"]
    weight = 1.0 / rows[f"audit_p_{row.policy}"]
    positive = label.fillna(False).to_numpy(bool)
    p_hat = float(weight[positive].sum())  # Horvitz-Thompson total positives
    (threshold,) = row.thresholds
    fired = rows[score].to_numpy(float) >= threshold
    tp_hat = float(weight[positive & fired].sum())
    assert math.isclose(row.estimated_total_positives, p_hat, rel_tol=1e-9), row
    assert math.isclose(row.estimated_recall, tp_hat / p_hat, rel_tol=1e-9), row
    mask = (posts["language"] == row.group).to_numpy()
    caught = harm[mask] & (posts[score].to_numpy()[mask] >= threshold)
    true_recall = caught.sum() / harm[mask].sum()
    covered += row.estimated_recall_ci_low <= true_recall <= row.estimated_recall_ci_high
    print(row.policy, row.group, round(row.estimated_recall, 4), round(true_recall, 4))
assert covered >= 5, covered  # 6 intervals at 90%: at least 5 cover the true recall
for policy, (_, score) in truth.items():
    points = operating_points_frame(f"points/{policy}")
    chosen = points[points["method"] == "graph"].set_index("group")["thresholds"]
    decided = flags[policy].reindex(posts["post_id"]).to_numpy(bool)
    t = np.array([chosen[g][0] for g in posts["language"]])
    assert (decided == (posts[score].to_numpy(float) >= t)).all(), policy
assert (flags["any_policy"] == (flags["toxic"] | flags["spam"])).all()
print("checked", covered)
"""


def blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", PAGE.read_text(), re.S)


def run(args, cwd):
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done


@pytest.mark.slow
def test_the_recall_per_policy_page_runs_and_its_figures_are_the_data(tmp_path):
    kinds = [lang for lang, _ in blocks()]
    assert kinds == ["python", "yaml", "yaml", "bash", "python", "text"]
    write, toxic, spam, commands, read = [b for lang, b in blocks() if lang != "text"]
    run([sys.executable, "-c", write], tmp_path)
    (tmp_path / "toxic.yaml").write_text(toxic)
    (tmp_path / "spam.yaml").write_text(spam)
    out = run(["bash", "-e", "-c", commands.replace(".venv/bin/", f"{BIN}/")], tmp_path).stdout
    assert out.count("applied the graph points") == 2
    done = run([sys.executable, "-c", f"WRITE = {write!r}\n" + read + CHECKS], tmp_path)
    assert "checked" in done.stdout, done.stdout
    # the figures the page quotes are the ones the block prints
    quoted = blocks()[-1][1].splitlines()
    printed = {(g, f"{float(r):.3f}", f"{float(lo):.3f}", f"{float(hi):.3f}", policy)
               for g, r, lo, hi, policy in re.findall(
                   r"^\s*(\S+)\s+\[[^]]*\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+(\w+)$",
                   done.stdout, re.M) if g != "__all__"}
    assert {tuple(line.split()) for line in quoted[1:7]} == printed
    for line in quoted[7:]:
        assert re.search(rf"^{line.split()[0]}\s+{line.split()[1]}$", done.stdout, re.M), line
