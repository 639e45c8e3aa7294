"""Both sides of the audio gates on the bundled omni references, run as a user would (``pytest
suites/test_premise_rejection.py --faith-vlm reference:omni[-deaf]`` in a subprocess) and read back from
the scorecard: the omni reference that hears passes std_a, mis_a, the full Bal (Eq. 1) and both rejection
gaps; its deaf twin (audio input masked in a short fine-tune) fails an audio gate (mis_a or std_a) and the
audio rejection gap (a floor: beyond std_a), and still passes the vision gates. Only the accuracy and Bal
tests run, on the first ``LIMIT`` clips, to stay near a minute per model on 2 cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faithtests.testing.suite_run import Card, env_cache_args, run_suite, value

ROOT = Path(__file__).resolve().parents[3]
#: Clips per run: every checked split needs >= 10 rows for a verdict (``[coverage]`` min_n).
LIMIT = 16
ONLY = ("-k", "test_premise_accuracy or test_balanced_accuracy", "--faith-limit", str(LIMIT))


@pytest.fixture(scope="module")
def card(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cards: dict[str, Card] = {}

    def get(vlm: str) -> Card:
        if vlm not in cards:
            report = tmp_path_factory.mktemp(vlm.replace(":", "_")) / "report"
            # $FAITH_TEST_CACHE (CI: its main job's outputs) serves reference:omni's rows
            cards[vlm] = run_suite(ROOT, "suites/test_premise_rejection.py", report, vlm, *ONLY,
                                   *env_cache_args())
        return cards[vlm]

    return get


def _checked(results: list[dict[str, Any]], metric: str, slice: str | None = None) -> dict[str, Any]:
    (row,) = [r for r in results if r["metric"] == metric and r["variant"] == "base" and r["slice"] == slice
              and r["threshold"] is not None]
    return row


def test_the_omni_reference_passes_std_a_mis_a_and_the_full_bal(card: Any) -> None:
    outcomes, results, _ = card("reference:omni")
    base = {t: o for t, o in outcomes.items() if t.endswith("-base]")}
    assert len(base) == 5 and all(o == "passed" for o in base.values()), outcomes
    for metric in ("std_v", "mis_v", "std_a", "mis_a", "Bal"):
        assert _checked(results, metric)["passed"], _checked(results, metric)
    for kind in ("vision", "audio"):
        assert _checked(results, "rejection_gap", kind)["passed"], _checked(results, "rejection_gap", kind)
    # the full Eq. 1 over the four splits, not the vision-only slice
    acc = {m: value(results, m) for m in ("std_v", "mis_v", "std_a", "mis_a")}
    bal = 0.5 * ((acc["std_v"] + acc["std_a"]) / 2 + (acc["mis_v"] + acc["mis_a"]) / 2)
    assert value(results, "Bal") == pytest.approx(bal, abs=1e-9)
    assert not any(r["slice"] == "vision only" for r in results)


def test_the_deaf_twin_fails_the_audio_gates_and_passes_the_vision_gates(card: Any) -> None:
    """A model that cannot hear either never rejects an audio premise (mis_a fails) or rejects them all
    (std_a fails): std_a and mis_a are gated together for that. The twin rejects them all; what it lost
    is the soundtrack's content (std_a), which the reference answers from what it hears, and the link
    between rejecting and the premise being false: the reference rejects misleading audio premises
    far more often than standard ones (at these 16 clips 0.81 vs 0.44 of answers), the twin as often
    either way (0.96 vs 0.98)."""
    outcomes, results, _ = card("reference:omni-deaf")
    failed = {m for m in ("std_a", "mis_a") if not _checked(results, m)["passed"]}
    assert failed, {m: _checked(results, m) for m in ("std_a", "mis_a")}
    assert any(t.endswith("-base]") and "_audio-" in t and o == "failed" for t, o in outcomes.items())
    for metric in ("std_v", "mis_v"):
        assert _checked(results, metric)["passed"], _checked(results, metric)
    _, heard, _ = card("reference:omni")
    assert value(results, "std_a") < value(heard, "std_a") - 0.2, (value(results, "std_a"),
                                                                   value(heard, "std_a"))
    # rejections that follow the audio premise: share of E/F answers, misleading minus standard
    assert _rejection_gap(heard) > 0.15, _rejection_gap(heard)
    assert _rejection_gap(results) < 0.1, _rejection_gap(results)
    # ... the floor that gates it, paired per clip: the twin fails it, beyond std_a
    gap = _checked(results, "rejection_gap", "audio")
    assert gap["verdict"] == "fail" and gap["gate_kind"] == "floor", gap
    assert _checked(results, "rejection_gap", "vision")["passed"]


def _rejection_gap(results: list[dict[str, Any]]) -> float:
    rate = {r["slice"]: r["value"] for r in results
            if r["metric"] == "rejects_E_or_F" and r["variant"] == "base"}
    return float(rate["mis_a"] - rate["std_a"])
