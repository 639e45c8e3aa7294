"""Both sides of the difference-consistency gates, run as a user would (``pytest
suites/test_difference_consistency.py`` in a subprocess) and read back from the scorecard: the reference
VLM passes every gate; the twin that answers "same?" with Yes by prior fails exactly the contradiction
(per difficulty) and DS_exist gates; the diffblind degradation (right same / different answers, wrong
counts, random named differences) fails exactly DS_count, DS_count[subset=multi] and DRF; a judge that
grounds no claim fails DRF and is named in the card; and the suite runs on pairs generated from real COCO
photos.

The runs on ``reference:vlm`` and on models that wrap it (diffblind) share one ``--faith-cache`` folder
(``SuiteCards(shared_cache=True)``): the diffblind run reads the reference's rows for every prompt its
degradation leaves unchanged, and the judge test reads its generations; a served row is the bytes the
model computes, so each card is the one an uncached run writes (checked when this was introduced: the
diffblind and reference cards with and without the cache, every result, outcome and invalid entry equal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faithtests.protocols.spdfaith.run import VARIANTS
from faithtests.testing.suite_run import SuiteCards, result, run_suite, value

ROOT = Path(__file__).resolve().parents[3]
SUITE = "suites/test_difference_consistency.py"
JUDGE = "deterministic-v1"
DIFFBLIND = "py:faithtests.testing.spd_degraded:diffblind"
MULTI_DRF = f"subset=multi, judge={JUDGE}"
LEVELS = ("difficulty=easy", "difficulty=medium", "difficulty=hard")
#: A twin's run: the gated variant's tests only (SAGE's variants are recorded, never gated; the reference's
#: full run shows them), which is where every gate of the suite sits.
GATED_ONLY = ("-k", "base")
#: Every gate the suite checks on the world's defaults, (metric, slice) -> its paper row (thresholds.toml).
GATES = {("contradiction_rate", lv) for lv in LEVELS} | {
    ("DS_exist", "subset=multi"), ("false_alarm_rate", "subset=identical"), ("DS_count", None),
    ("DS_count", "subset=multi"), ("DRF", MULTI_DRF)}


def gate_verdicts(results: list[dict[str, Any]]) -> dict[tuple[str, str | None], bool]:
    """(metric, slice) -> passed, for every checked result of the gated (base) variant."""
    return {(r["metric"], r["slice"]): r["passed"] for r in results
            if r["passed"] is not None and r["variant"] == "base"}


@pytest.fixture(scope="module")
def spd_card(tmp_path_factory: pytest.TempPathFactory) -> SuiteCards:
    return SuiteCards(ROOT, SUITE, tmp_path_factory, shared_cache=True)


def test_reference_vlm_passes_every_difference_gate(spd_card: Any) -> None:
    outcomes, results, _ = spd_card("reference:vlm")
    assert len(outcomes) == 4 * len(VARIANTS) + 2, outcomes  # 4 tests per variant, SAGE deltas, the pairs
    assert all(o == "passed" for o in outcomes.values()), outcomes
    verdicts = gate_verdicts(results)
    assert set(verdicts) == GATES and all(verdicts.values()), verdicts
    assert all(value(results, "contradiction_rate", slice=lv) <= 0.05 for lv in LEVELS)
    assert value(results, "DS_exist", slice="subset=multi") >= 0.9 and value(results, "DS_count") >= 0.8
    assert value(results, "DRF", slice=MULTI_DRF) >= 0.18  # seeds 0-9: 0.184-0.347 (floor 0.12)
    assert value(results, "false_alarm_rate", slice="subset=identical") <= 0.05
    # recorded, not gated: CR normalised to [0, 1] (Fig. 34), the multi / identical contradiction slices,
    # the public code's CF1
    assert value(results, "CR") >= 0.9 and 0.0 <= value(results, "CR_clip") <= 1.0
    for where in ("subset=multi", "subset=identical"):
        assert result(results, "contradiction_rate", slice=where)["passed"] is None
    assert result(results, "CF1_code", slice=f"judge={JUDGE}")["passed"] is None
    for variant in ("base", "sage"):  # every headline metric with a CI, both variants side by side
        for metric, where in (("CR", None), ("DS_count", "subset=multi"), ("DS_exist", "subset=multi"),
                              ("TF1", f"judge={JUDGE}"), ("CF1", f"judge={JUDGE}"),
                              ("DRF", f"subset=multi, judge={JUDGE}")):
            assert result(results, metric, variant, where)["ci"] is not None, (metric, variant, where)
    # App. D.3: the per-layer cosine band is recorded (its level is the model's: the reference VLM's
    # last layers carry the answer itself, which differs between the two questions of a consistent pair)
    last = result(results, "cos_same_diff_last_layer", slice="consistent")
    assert -1.0 <= last["ci"][0] <= last["value"] <= last["ci"][1] <= 1.0
    for metric in ("delta_CR", "delta_contradiction_rate", "delta_DS_count", "delta_DRF"):
        assert result(results, metric)["ci"] is not None


def test_sameprior_twin_fails_the_consistency_gates_only(spd_card: Any) -> None:
    """reference:vlm-sameprior says "Yes" to "same?" on every pair: it contradicts itself on the edited
    ones (Yes to both questions) and never identifies a difference by both answers, so exactly the
    contradiction gates (every difficulty) and DS_exist fail, in the symmetric test; counting and naming
    pass."""
    outcomes, results, _ = spd_card("reference:vlm-sameprior", *GATED_ONLY)
    failed = sorted(t for t, o in outcomes.items() if o != "passed")
    assert failed == ["test_symmetric_consistency[world-reference:vlm-sameprior-base]"], outcomes
    verdicts = gate_verdicts(results)
    assert set(verdicts) == GATES, verdicts
    assert {k for k, ok in verdicts.items() if not ok} == {
        ("DS_exist", "subset=multi"), *(("contradiction_rate", lv) for lv in LEVELS)}
    assert all(value(results, "contradiction_rate", slice=lv) >= 0.7 for lv in LEVELS)
    assert value(results, "contradiction_rate", slice="subset=identical") == 0.0
    assert value(results, "yes_rate_same") == 1.0 and value(results, "DS_exist", slice="subset=multi") == 0.0
    assert 0.0 <= value(results, "CR") <= 0.4  # normalised (Fig. 34): contradictions score 0, not -1


def test_a_degraded_counter_and_namer_fails_exactly_ds_count_and_drf(spd_card: Any) -> None:
    """The diffblind degradation of reference:vlm (``faithtests.testing.spd_degraded``): its same /
    different answers are the reference's, every count the reference gets right is swapped for a wrong
    one in 1..6, and it names random objects. DS_count overall and DRF fail (its multi-pair counts,
    0.551, clear the multi floor that exists for a constant count: the overall floor catches it);
    contradiction at every difficulty, DS_exist and the false-alarm floor pass, with the reference's
    values."""
    outcomes, results, _ = spd_card(DIFFBLIND, *GATED_ONLY)
    failed = sorted(t for t, o in outcomes.items() if o != "passed")
    assert [t.split("[")[0] for t in failed] == ["test_difference_count", "test_difference_naming"], outcomes
    assert all(t.endswith("-base]") for t in failed), failed
    verdicts = gate_verdicts(results)
    assert set(verdicts) == GATES, verdicts
    assert {k for k, ok in verdicts.items() if not ok} == {("DS_count", None), ("DRF", MULTI_DRF)}
    _, ref, _ = spd_card("reference:vlm")
    for lv in LEVELS:
        assert value(results, "contradiction_rate", slice=lv) == value(ref, "contradiction_rate", slice=lv)
    assert value(results, "DS_exist", slice="subset=multi") == value(ref, "DS_exist", slice="subset=multi")
    assert value(results, "DQR", slice="subset=single") == 0.0  # every count wrong: DS_count 0 on singles


def test_a_judge_that_grounds_nothing_fails_drf_and_is_named(tmp_path: Path, spd_card: Any) -> None:
    # 50 pairs hold 10 multi ones, the coverage rule's min_n for the DRF gate's slice; the judge reads the
    # model's replies, so the reference run's stored generations serve this run (module doc)
    outcomes, results, _ = run_suite(
        ROOT, SUITE, tmp_path / "report", "reference:vlm", "-k", "naming", "--faith-limit", "50",
        "--faith-spd-judge", "tests.protocols.spdfaith.judges:nothing_grounded", *spd_card.cache_args())
    name = "judge=tests.protocols.spdfaith.judges:nothing_grounded"
    assert outcomes["test_difference_naming[world-reference:vlm-base]"] == "failed", outcomes
    assert value(results, "DRF", slice=name) == 0.0
    assert result(results, "DRF", slice=f"subset=multi, {name}")["passed"] is False
    assert not any(r["slice"] and JUDGE in r["slice"] for r in results)


def test_the_suite_runs_on_edited_coco_photos(tmp_path: Path, shared_data: Path) -> None:
    """``--faith-data coco=...``: pairs made from instance masks (cached under --faith-cache), recorded
    with their counts; the reference VLM has never seen a photo, so no verdict is asserted here."""
    pytest.importorskip("cv2", reason="the spdfaith extra (OpenCV) builds the COCO pairs")
    coco = shared_data / "coco-mini"
    outcomes, results, _ = run_suite(
        ROOT, SUITE, tmp_path / "report", "reference:vlm", "-k", "coco and (edit_pairs or symmetric)",
        "--faith-data", f"coco={coco}", "--faith-limit", "4", "--faith-cache", str(tmp_path / "cache"),
        "--faith-allow-insufficient")  # 4 images: the per-difficulty slices are too small for a verdict
    assert outcomes["test_edit_pairs[coco-reference:vlm]"] == "passed", outcomes
    assert value(results, "pairs", slice="subset=single") >= 1
    assert value(results, "pairs", slice="subset=multi") >= 1
    assert result(results, "contradiction_rate", "base", None)["n"] >= 3
    assert any((tmp_path / "cache" / "spdfaith-coco").iterdir())
