"""Both sides of the affective-conflict gates on the bundled reference VLMs, run as a user would
(``pytest suites/test_affective_conflict.py`` in a subprocess, one per model shared by every test here)
and read back from the scorecard; and the suite on AC-Bench / EmoSet files written here, bad rows
counted by kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faithtests.protocols.acbench.fixtures import cap_images, parse_window
from faithtests.protocols.acbench.sources import Loaded, world_records
from faithtests.testing.suite_run import Card, SuiteCards, result, run_suite, value

ROOT = Path(__file__).resolve().parents[3]
SUBSETS = ("S-Adj", "S-Opp", "O-Obj", "O-Attr", "O-Beh")


def run_ac(tmp_path: Path, vlm: str, *extra: str) -> Card:
    """(test name → outcome, results, test name → invalid entries) of one suite run on ``vlm``."""
    return run_suite(ROOT, "suites/test_affective_conflict.py", tmp_path / "report", vlm, *extra)


@pytest.fixture(scope="module")
def ac_card(tmp_path_factory: pytest.TempPathFactory) -> SuiteCards:
    """One suite subprocess per model, shared by every test of this module."""
    return SuiteCards(ROOT, "suites/test_affective_conflict.py", tmp_path_factory)


def _ci(
    results: list[dict[str, Any]], metric: str, variant: str = "base", slice: str | None = None
) -> list[float]:
    ci: list[float] = result(results, metric, variant, slice)["ci"]
    return ci


def test_reference_vlm_passes_every_affective_gate(ac_card: Any) -> None:
    outcomes, results, _ = ac_card("reference:vlm")
    # 3 gated tests x 2 modes x 2 variants, 2 baselines, LSS, CECS
    assert len(outcomes) == 16, outcomes
    assert all(o == "passed" for o in outcomes.values()), outcomes
    assert value(results, "P_img") > 0.9 and value(results, "TBR") < 0.1
    assert value(results, "aligned_acc") > 0.9
    for s in SUBSETS:  # every subset recorded with a CI, in both answer modes and both variants
        for variant in ("base", "cecs"):
            for where in (s, f"{s}, mode=constrained"):
                assert 0.0 <= value(results, "P_img", variant, where) <= 1.0
                assert _ci(results, "P_img", variant, where) is not None
    # the benchmark's validity check: both signals recognisable alone
    assert value(results, "image_only_acc") > 0.9 and value(results, "text_only_acc") > 0.9


def test_textbiased_vlm_fails_the_image_and_text_bias_gates(ac_card: Any) -> None:
    """reference:vlm-textbiased follows the description: P_img and TBR fail on the base variant in the
    paper's answer mode (generation), per subset, and only there (CECS and the constrained mode are
    recorded, not gated); it is right on aligned records, so the aligned gate passes (it cannot tell a
    text follower from a faithful model)."""
    outcomes, results, _ = ac_card("reference:vlm-textbiased")
    failed = sorted(t for t, o in outcomes.items() if o != "passed")
    assert failed == [
        "test_conflict_shares[world-reference:vlm-textbiased-generation-base]",
        "test_text_bias_ratio[world-reference:vlm-textbiased-generation-base]",
    ], outcomes
    gated = {(r["metric"], r["slice"]): r for r in results if r["passed"] is not None}
    assert gated[("P_img", "S-Opp")]["passed"] is False and gated[("TBR", "S-Opp")]["passed"] is False
    assert {r["gate_kind"] for r in gated.values()} == {"paper"}
    assert value(results, "P_img") < 0.3 and value(results, "TBR") > 0.7
    assert value(results, "TBR", slice="S-Opp") > 0.9
    assert value(results, "aligned_acc") > 0.9


@pytest.mark.parametrize("vlm", ["reference:vlm", "reference:vlm-textbiased"])
def test_cecs_is_recorded_with_its_checks_and_its_window(ac_card: Any, vlm: str) -> None:
    """Mass preservation on real attentions (every modified row sums to 1 within 1e-6), Default Mode
    below the gate, the window and its rule, LSS for both variants, and paired deltas vs base."""
    outcomes, results, _ = ac_card(vlm)
    assert outcomes[f"test_cecs_intervention[world-{vlm}]"] == "passed"
    for where in ("s=1 check", "CECS runs"):
        assert 0.0 <= value(results, "cecs_mass_max_err", slice=where) <= 1e-6
    assert value(results, "cecs_gate_closed_max_logprob_diff") <= 1e-4
    first = next(r for r in results if r["metric"] == "cecs_window_first")
    assert first["slice"].startswith("window_from_lss on the base S-Opp LSS")
    for variant in ("base", "cecs"):
        assert value(results, "LSS_peak", variant, "S-Opp") > 0.0
    assert -1.0 <= value(results, "delta_P_img", slice="S-Opp") <= 1.0


def test_cecs_lowers_the_sink_in_its_window(ac_card: Any) -> None:
    """Fig. 9's check on the text-biased model: inside the window the description-over-image ratio
    falls under CECS (the reallocation drains the sink where it acts)."""
    _, results, _ = ac_card("reference:vlm-textbiased")
    base = next(r for r in results if r["metric"] == "LSS_window_mean" and r["variant"] == "base")
    cecs = next(r for r in results if r["metric"] == "LSS_window_mean" and r["variant"] == "cecs")
    assert base["slice"] == cecs["slice"] and cecs["value"] < base["value"]


def test_window_option_and_limit() -> None:
    assert parse_window("17-24") == (17, 24) and parse_window(" 2:3 ") == (2, 3) and parse_window("") is None
    for bad in ("24-17", "a-b", "3"):
        with pytest.raises(pytest.UsageError):
            parse_window(bad)
    loaded = Loaded(records=world_records(3, seed=0), total=18)
    capped = cap_images(loaded, 2)
    assert len(capped.records) == 12 and len({r.stimulus_id for r in capped.records}) == 2
    assert len(loaded.records) == 18 and cap_images(loaded, None) is loaded


def test_suite_on_acbench_and_emoset_files_counts_bad_rows_by_kind(tmp_path: Path) -> None:
    """AC-Bench JSONL (two images x six records, plus an unknown label, an empty description, a missing
    image and an undecodable one) and EmoSet annotations (two images, one unknown label): every bad row is
    counted by kind in the scorecard; EmoSet (image-only) runs the image-only baseline and skips the rest;
    ``--faith-cecs-window`` sets the window."""
    recs = world_records(2, seed=3)
    rows = []
    for r in recs:
        path = tmp_path / f"{r.stimulus_id.replace('/', '_')}.png"
        r.load_image().save(path)
        rows.append(
            {
                "id": r.item_id,
                "image": path.name,
                "image_emotion": r.image_emotion,
                "subset": r.subset,
                "description": r.description,
                "description_emotion": r.text_emotion,
            }
        )
    (tmp_path / "corrupt.jpg").write_bytes(b"not an image")
    base = {"subset": "S-Opp", "image_emotion": "awe", "description_emotion": "fear", "description": "d"}
    rows += [
        {**base, "id": "bad-label", "image": rows[0]["image"], "description_emotion": "joy"},
        {**base, "id": "empty", "image": rows[0]["image"], "description": "  "},
        {**base, "id": "missing", "image": "nowhere.png"},
        {**base, "id": "corrupt", "image": "corrupt.jpg"},
    ]
    (tmp_path / "ac.jsonl").write_text("\n".join(json.dumps(x) for x in rows))
    emo = tmp_path / "emoset"
    (emo / "annotation").mkdir(parents=True)
    for i, r in enumerate(recs[::6]):
        (emo / "image" / r.image_emotion).mkdir(parents=True, exist_ok=True)
        r.load_image().save(emo / "image" / r.image_emotion / f"e{i}.jpg")
        (emo / "annotation" / f"e{i}.json").write_text(
            json.dumps({"emotion": r.image_emotion, "image_id": f"e{i}"})
        )
    (emo / "annotation" / "bad.json").write_text(json.dumps({"emotion": "joy", "image_id": "e9"}))
    # 12 records of two images: too few for the default coverage rule (min_n 10 per metric), which this
    # test is not about; a user's own file lowers it the same way
    (tmp_path / "small.toml").write_text("[coverage]\nmin_n = 1\n")
    outcomes, results, invalid = run_ac(
        tmp_path,
        "reference:vlm",
        "-k",
        "acbench or emoset",
        "--faith-data",
        f"acbench={tmp_path / 'ac.jsonl'}",
        "--faith-data",
        f"emoset={emo}",
        "--faith-cecs-window",
        "1-2",
        "--faith-thresholds",
        str(tmp_path / "small.toml"),
    )
    ac = {t: o for t, o in outcomes.items() if "[acbench-" in t}
    assert len(ac) == 16 and all(o == "passed" for o in ac.values()), ac
    kinds = {
        i["kind"]: i["count"] for i in invalid["test_conflict_shares[acbench-reference:vlm-constrained-base]"]
    }
    assert kinds == {
        "unknown emotion label": 1,
        "empty description": 1,
        "missing image": 1,
        "unreadable image": 1,
    }
    assert value(results, "P_img") > 0.9  # 10 conflict records of the two world images
    first = next(r for r in results if r["metric"] == "cecs_window_first")
    assert (first["slice"], first["value"]) == ("option --faith-cecs-window", 1.0)
    emoset = {t: o for t, o in outcomes.items() if "[emoset-" in t}
    assert {t for t, o in emoset.items() if o == "passed"} == {
        "test_unimodal_baselines[emoset-reference:vlm-constrained]",
        "test_unimodal_baselines[emoset-reference:vlm-generation]",
    }
    assert all(o == "skipped" for t, o in emoset.items() if "unimodal" not in t), emoset
    emo_kinds = {
        i["kind"]: i["count"] for i in invalid["test_unimodal_baselines[emoset-reference:vlm-constrained]"]
    }
    assert emo_kinds == {"unknown emotion label": 1}
