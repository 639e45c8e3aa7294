"""Both sides of the premise-rejection gates on the bundled reference VLMs, run as a user would
(``pytest suites/test_premise_rejection.py`` in a subprocess, one per model shared by every test here)
and read back from the scorecard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faithtests.testing.suite_run import SuiteCards, value

ROOT = Path(__file__).resolve().parents[3]
#: the twin's run, without the prompt variants A2-A7 that no test here reads of it (A5 alone generates
#: 400 x 256 tokens: most of the run; the good reference's are checked above)
TEXTBIASED = ("reference:vlm-textbiased", "-k", "not prompt_variant")


@pytest.fixture(scope="module")
def premise_card(tmp_path_factory: pytest.TempPathFactory) -> SuiteCards:
    """One suite subprocess per model, shared by every test of this module."""
    return SuiteCards(ROOT, "suites/test_premise_rejection.py", tmp_path_factory)


def test_reference_vlm_passes_every_premise_gate(premise_card: Any) -> None:
    outcomes, results, invalid = premise_card("reference:vlm")
    # 2 splits x 2 variants, Bal x 2 variants, gap, PGLA, prompts A2 to A7 (A6/A7: not applicable here);
    # the audio half (2 splits x 2 variants, the probe asymmetry) skipped: it takes no audio
    heard = {t for t in outcomes if "_audio-" in t or t.startswith("test_probe_asymmetry")}
    assert len(outcomes) == 19 and len(heard) == 5, outcomes
    assert all(o == ("skipped" if t in heard else "passed") for t, o in outcomes.items()), outcomes
    assert value(results, "mis_v") > 0.8
    for prompt in ("A6", "A7"):  # trimming needs a video timeline: reported, with the reason, not missing
        (test,) = [t for t in invalid if t.startswith("test_prompt_variant[") and t.endswith(f"-{prompt}]")]
        (na,) = [e for e in invalid[test] if e["kind"] == f"{prompt} not applicable"]
        assert na["count"] == 400 and "image stimulus" in na["examples"][0]
    for prompt in ("A2", "A3", "A4", "A5"):  # the prompt variants are recorded beside A1, with ΔBal
        assert 0.0 <= value(results, "Bal", slice=f"prompt={prompt}") <= 1.0
        assert -1.0 <= value(results, "delta_Bal_vs_A1", slice=f"prompt={prompt}") <= 1.0


def test_textbiased_vlm_fails_misleading_rejection_but_its_states_encode_the_mismatch(
    premise_card: Any,
) -> None:
    """reference:vlm-textbiased accepts misleading premises: mis_v and Bal fail; its probe at l* still
    beats the text-only baselines (the representation–action gap), and PGLA in the fixed order (as in
    Table 4) lifts its Bal."""
    outcomes, results, _ = premise_card(*TEXTBIASED)
    failed = sorted(t for t, o in outcomes.items() if o != "passed")
    assert failed == [
        "test_balanced_accuracy[world-reference:vlm-textbiased-base]",
        *(f"test_premise_accuracy[world-reference:vlm-textbiased-{s}-{v}]"
          for s in ("misleading_audio", "misleading_vision", "standard_audio") for v in ("base", "pgla")
          if s.endswith("audio") or v == "base"),
        "test_probe_asymmetry[world-reference:vlm-textbiased]",
    ], outcomes
    assert all(outcomes[t] == "skipped" for t in failed if "audio" in t or "asymmetry" in t), outcomes
    assert value(results, "mis_v") < 0.2
    assert value(results, "probe_margin") > 0.05
    # PGLA in the paper's protocol (one fixed option order, Table 4) lifts its Bal by far more than noise
    assert value(results, "PGLA_delta_Bal", slice="fixed order") > 0.1
    assert value(results, "PGLA_delta_Bal") > 0.05  # under the suite's shuffles too


@pytest.mark.parametrize("vlm", ["reference:vlm", "reference:vlm-textbiased"])
def test_scorecard_reports_ties_like_for_like_rows_and_complete_pareto_rows(
    premise_card: Any, vlm: str
) -> None:
    """Nothing silent: every accuracy test reports its tied top logits; base and pgla both carry the
    PGLA evaluation rows as a slice (like for like); every Pareto budget row is a number over all folds."""
    outcomes, results, invalid = premise_card(*(TEXTBIASED if vlm == TEXTBIASED[0] else (vlm,)))
    ran = (t for t, o in outcomes.items() if o != "skipped")  # the audio half skips: it takes no audio
    for test in (t for t in ran if t.startswith(("test_premise_accuracy", "test_balanced_accuracy"))):
        assert any(i["kind"] == "tied top logit" for i in invalid[test]), (test, invalid[test])
    for variant in ("base", "pgla"):
        assert 0.0 <= value(results, "Bal", variant, "rows=pgla_eval") <= 1.0
        assert 0.0 <= value(results, "mis_v", variant, "rows=pgla_eval") <= 1.0
    # pgla's own rows are the evaluation rows: its main Bal is its rows=pgla_eval Bal
    assert value(results, "Bal", "pgla", "rows=pgla_eval") == value(results, "Bal", "pgla", "vision only")
    for b in ("1", "2", "3", "10"):
        d = value(results, "PGLA_delta_Bal", slice=f"std budget <= {b} pp")
        assert d == d and d >= -0.2  # finite (never NaN from a dropped fold)
