"""Both sides of the difference-consistency gates, run as a user would (``pytest
suites/test_difference_consistency.py`` in a subprocess) and read back from the scorecard: the reference
VLM passes every gate; the twin that answers "same?" with Yes by prior fails the CR / contradiction gate
and nothing else; a judge that grounds no claim fails DRF and is named in the card; and the suite runs
on pairs generated from real COCO photos."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faithtests.testing.suite_run import SuiteCards, result, run_suite, value

ROOT = Path(__file__).resolve().parents[3]
SUITE = "suites/test_difference_consistency.py"
JUDGE = "deterministic-v1"


@pytest.fixture(scope="module")
def spd_card(tmp_path_factory: pytest.TempPathFactory) -> SuiteCards:
    return SuiteCards(ROOT, SUITE, tmp_path_factory)


def test_reference_vlm_passes_every_difference_gate(spd_card: Any) -> None:
    outcomes, results, _ = spd_card("reference:vlm")
    assert len(outcomes) == 10, outcomes  # 4 tests x (base, sage), SAGE deltas, the pairs
    assert all(o == "passed" for o in outcomes.values()), outcomes
    assert value(results, "contradiction_rate") <= 0.05 and value(results, "CR") >= 0.9
    assert value(results, "DS") >= 0.8 and value(results, "DRF", slice=f"judge={JUDGE}") >= 0.4
    for variant in ("base", "sage"):  # every headline metric with a CI, both variants side by side
        for metric, where in (("CR", None), ("DS", "subset=multi"), ("TF1", f"judge={JUDGE}"),
                              ("CF1", f"judge={JUDGE}"), ("DRF", f"subset=multi, judge={JUDGE}")):
            assert result(results, metric, variant, where)["ci"] is not None, (metric, variant, where)
    # App. D.3: the per-layer cosine band is recorded (its level is the model's: the reference VLM's
    # last layers carry the answer itself, which differs between the two questions of a consistent pair)
    last = result(results, "cos_same_diff_last_layer", slice="consistent")
    assert -1.0 <= last["ci"][0] <= last["value"] <= last["ci"][1] <= 1.0
    for metric in ("delta_CR", "delta_contradiction_rate", "delta_DS", "delta_DRF"):
        assert result(results, metric)["ci"] is not None


def test_sameprior_twin_fails_the_consistency_gate_only(spd_card: Any) -> None:
    """reference:vlm-sameprior says "Yes" to "same?" on every pair: it contradicts itself on the edited
    ones (Yes to both questions), so the symmetric test fails (CR first); counting and naming pass."""
    outcomes, results, _ = spd_card("reference:vlm-sameprior")
    failed = sorted(t for t, o in outcomes.items() if o != "passed")
    assert failed == ["test_symmetric_consistency[world-reference:vlm-sameprior-base]"], outcomes
    assert value(results, "contradiction_rate") >= 0.7 and value(results, "CR") <= -0.4
    assert value(results, "contradiction_rate", slice="subset=identical") == 0.0
    assert value(results, "yes_rate_same") == 1.0
    gated = {r["metric"]: r["passed"] for r in results if r.get("passed") is not None and r["slice"] is None}
    assert gated["CR"] is False


def test_a_judge_that_grounds_nothing_fails_drf_and_is_named(tmp_path: Path) -> None:
    outcomes, results, _ = run_suite(
        ROOT, SUITE, tmp_path / "report", "reference:vlm", "-k", "naming", "--faith-limit", "20",
        "--faith-spd-judge", "tests.protocols.spdfaith.judges:nothing_grounded")
    name = "judge=tests.protocols.spdfaith.judges:nothing_grounded"
    assert outcomes["test_difference_naming[world-reference:vlm-base]"] == "failed", outcomes
    assert value(results, "DRF", slice=name) == 0.0
    assert not any(r["slice"] and JUDGE in r["slice"] for r in results)


def test_the_suite_runs_on_edited_coco_photos(tmp_path: Path, shared_data: Path) -> None:
    """``--faith-data coco=...``: pairs made from instance masks (cached under --faith-cache), recorded
    with their counts; the reference VLM has never seen a photo, so no verdict is asserted here."""
    pytest.importorskip("cv2", reason="the spdfaith extra (OpenCV) builds the COCO pairs")
    coco = shared_data / "coco-mini"
    outcomes, results, _ = run_suite(
        ROOT, SUITE, tmp_path / "report", "reference:vlm", "-k", "coco and (edit_pairs or symmetric)",
        "--faith-data", f"coco={coco}", "--faith-limit", "4", "--faith-cache", str(tmp_path / "cache"))
    assert outcomes["test_edit_pairs[coco-reference:vlm]"] == "passed", outcomes
    assert value(results, "pairs", slice="subset=single") >= 1
    assert value(results, "pairs", slice="subset=multi") >= 1
    assert result(results, "contradiction_rate", "base", None)["n"] >= 3
    assert any((tmp_path / "cache" / "spdfaith-coco").iterdir())
