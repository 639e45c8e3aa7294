"""The good reference checkpoints dominate their degraded twins: on every held-out number of the model
cards (``fixtures/NAME/heldout.json``) except the twin's designed defect, the good model is no worse than
the twin beyond the 95% CI of their difference. A twin that beats its good sibling on a slice it was not
built to change means the "good" model is not the reference it claims to be (issue 19: ``clip`` counted
worse than ``clip-colorblind``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
Z95 = 1.959964

#: twin -> (its good sibling, the card keys of its designed defect, by prefix)
TWINS: dict[str, tuple[str, tuple[str, ...]]] = {
    # colour words never reach its text tower; compositional flips swap two colours
    "clip-colorblind": ("clip", ("PR_colour", "PR_compositional")),
    # follows the text: accepts misleading premises and the description's emotion
    "vlm-textbiased": ("vlm", ("premise_", "mood_")),
    # answers by option position in the forced choice
    "vlm-positionbiased": ("vlm", ("ab_",)),
    # says "same" by prior
    "vlm-sameprior": ("vlm", ("diff_same_acc", "diff_contradiction")),
    # sees that two pictures differ, not how: random wrong counts, named differences that did not happen
    "vlm-diffblind": ("vlm", ("diff_count_exact", "diff_claim_precision")),
}
#: card keys where a smaller value is better (every other key is a rate where higher is better)
LOWER_IS_BETTER = ("E_inv_templates", "premise_std_says_E", "diff_contradiction", "diff_unparseable",
                   "mood_P_txt_conflict", "mood_TBR")


def _heldout(name: str) -> dict[str, Any]:
    path = FIXTURES / name / "heldout.json"
    if not path.is_file():
        pytest.fail(f"reference checkpoint {name} has no recorded evaluation at {path}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _n(card: dict[str, Any], key: str) -> int:
    h = card["heldout"]
    return int(h.get("n_" + key.removeprefix("PR_"), h.get("n_" + key, card["n"])))


def difference_ci(key: str, good: dict[str, Any], twin: dict[str, Any]) -> tuple[float, float]:
    """95% CI of (good - twin) on one card key: Agresti-Caffo for rates (one success and one failure
    added to each side, so a 0 / 1 rate still has a width), normal for a mean with a recorded standard
    error (``se_KEY``)."""
    g, t = good["heldout"][key], twin["heldout"][key]
    se_key = "se_" + key
    if se_key in good["heldout"] and se_key in twin["heldout"]:
        se = math.hypot(good["heldout"][se_key], twin["heldout"][se_key])
        return g - t - Z95 * se, g - t + Z95 * se
    ng, nt = _n(good, key), _n(twin, key)
    pg, pt = (g * ng + 1) / (ng + 2), (t * nt + 1) / (nt + 2)
    se = math.sqrt(pg * (1 - pg) / (ng + 2) + pt * (1 - pt) / (nt + 2))
    return pg - pt - Z95 * se, pg - pt + Z95 * se


def worse_beyond_ci(key: str, good: dict[str, Any], twin: dict[str, Any]) -> bool:
    lo, hi = difference_ci(key, good, twin)
    return hi < 0 if not key.startswith(LOWER_IS_BETTER) else lo > 0


def compared_keys(twin: str) -> list[str]:
    sibling, defect = TWINS[twin]
    a, b = _heldout(sibling)["heldout"], _heldout(twin)["heldout"]
    return [k for k in a if k in b and not k.startswith(("n_", "se_")) and not k.startswith(defect)]


def test_difference_ci_by_hand() -> None:
    """0.9 of 100 vs 0.8 of 100: Agresti-Caffo p = 91/102, 81/102, SE = sqrt(sum p(1-p)/102)."""
    good = {"n": 100, "heldout": {"PR_x": 0.9}}
    twin = {"n": 100, "heldout": {"PR_x": 0.8}}
    pg, pt = 91 / 102, 81 / 102
    se = math.sqrt(pg * (1 - pg) / 102 + pt * (1 - pt) / 102)
    assert difference_ci("PR_x", good, twin) == pytest.approx((pg - pt - Z95 * se, pg - pt + Z95 * se))
    assert not worse_beyond_ci("PR_x", good, twin)
    assert worse_beyond_ci("PR_x", twin, good) is False  # -0.098 +- 0.1: inside the CI
    far = {"n": 100, "heldout": {"PR_x": 0.5}}
    assert worse_beyond_ci("PR_x", far, good)
    # lower is better, with recorded standard errors
    a = {"n": 1, "heldout": {"E_inv_templates": 0.02, "se_E_inv_templates": 0.003}}
    b = {"n": 1, "heldout": {"E_inv_templates": 0.005, "se_E_inv_templates": 0.001}}
    assert worse_beyond_ci("E_inv_templates", a, b) and not worse_beyond_ci("E_inv_templates", b, a)


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_good_checkpoint_is_no_worse_than_its_twin_outside_the_defect(twin: str) -> None:
    sibling = TWINS[twin][0]
    good, bad = _heldout(sibling), _heldout(twin)
    keys = compared_keys(twin)
    assert len(keys) >= 5, keys
    worse = [f"{k}: {sibling} {good['heldout'][k]:.3f} vs {twin} {bad['heldout'][k]:.3f} (n={_n(good, k)})"
             for k in keys if worse_beyond_ci(k, good, bad)]
    assert not worse, f"{sibling} is worse than its twin {twin} beyond the CI on: " + "; ".join(worse)


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_the_twin_shows_its_defect(twin: str) -> None:
    """The other side: on its defect the twin is worse than its sibling beyond the CI on at least one key."""
    sibling, defect = TWINS[twin]
    good, bad = _heldout(sibling), _heldout(twin)
    keys = [k for k in good["heldout"] if k.startswith(defect) and k in bad["heldout"]]
    assert any(worse_beyond_ci(k, bad, good) for k in keys), (twin, keys)
