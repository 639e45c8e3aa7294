"""The train-reference entry point: argument handling and clear errors (training itself is the cards'
job: fixtures/README.md records each run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.reference.train import RECIPES, main, train_reference


def test_known_names() -> None:
    assert set(RECIPES) == {"clip", "clip-colorblind", "vlm", "vlm-textbiased", "vlm-positionbiased",
                            "vlm-sameprior", "vlm-diffblind", "omni", "omni-deaf"}


def test_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown reference model 'nope'"):
        train_reference("nope")
    with pytest.raises(SystemExit):
        main(["nope"])


def test_twin_without_its_base_checkpoint_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="train-reference vlm"):
        main(["vlm-textbiased", "--out", str(tmp_path / "vlm-textbiased")])


def test_omni_resume_bounds_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--from-phase applies to the phased vlm and omni recipes only"):
        train_reference("clip", tmp_path / "clip", from_phase=2)
    from faithtests.reference.train_omni import FIRST_RESUMABLE_STAGE, RESUMABLE_STAGES

    last = FIRST_RESUMABLE_STAGE + len(RESUMABLE_STAGES) - 1
    with pytest.raises(ValueError, match=rf"omni must be 1 or in 4\.\.{last}, got 3"):
        train_reference("omni", tmp_path / "omni", from_phase=3)
    with pytest.raises(FileNotFoundError, match=r"has no training\.json"):
        train_reference("omni", tmp_path / "omni", from_phase=8)


def test_omni_resume_trains_only_the_later_stages_and_keeps_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--from-phase 8`` resumes the stored checkpoint as stage 7's result: it trains premise5 (paired
    draws, its own stream), then the speech stages, the last into ``out``, and keeps stages 1-7's
    records in order."""
    import json

    from faithtests.reference import train_omni as t

    out = tmp_path / "omni"
    out.mkdir()
    earlier = [{"stage": f"s{k}"} for k in range(1, 7)]
    (out / "training.json").write_text(json.dumps({"stage": "s7", "stages": earlier,
                                                   "total_train_seconds": 100.0}))
    calls: list[dict[str, object]] = []

    def fake_finetune(src: Path, dst: Path, seed: int, steps: int, lr: float,
                      **kw: object) -> dict[str, object]:
        assert (src / "training.json").is_file()  # resumes a copy of the stored checkpoint
        calls.append({"dst": dst, "seed": seed, "steps": steps, "lr": lr, **kw})
        dst.mkdir(parents=True, exist_ok=True)
        (dst / "training.json").write_text("{}")
        return {"stage": "premise"}

    def fake_speech(self: object, src: Path, dst: Path, seed: int) -> dict[str, object]:
        calls.append({"dst": dst, "stage": "speech_audio"})
        dst.mkdir(parents=True, exist_ok=True)
        (dst / "training.json").write_text("{}")
        return {"stage": "speech_audio"}

    monkeypatch.setattr(t, "finetune", fake_finetune)
    monkeypatch.setattr(t.SpeechAudioStage, "run", fake_speech)
    monkeypatch.setattr(t, "store_half", lambda path: None)
    final = t.train_omni(out, 0, from_stage=8)
    premise = [c for c in calls if "stage" not in c]
    assert [(c["steps"], c["lr"], c["stream"], c["paired"], c["speech"]) for c in premise] == [
        (t.PREMISE5_STEPS, t.PREMISE5_LR, 10, True, False),
        *[(s.steps, s.lr, s.stream, True, True) for s in t.RESUMABLE_STAGES[6:]
          if isinstance(s, t.PremiseStage)]]
    assert calls[-1]["dst"] == out and all(c["dst"] != out for c in calls[:-1])
    assert sum(c.get("stage") == "speech_audio" for c in calls) == 1
    n = len(t.RESUMABLE_STAGES) + 3
    assert [m["stage"] for m in final["stages"]][:7] == [f"s{k}" for k in range(1, 8)]
    assert len(final["stages"]) == n - 1
    assert 100.0 <= final["total_train_seconds"] < 160.0  # the resumed stages' seconds are kept
    assert not any(p.name.startswith(".omni-") for p in tmp_path.iterdir())  # the temporary copies are gone
    # the result is the last stage's now: resuming it as stage 7's would train stage 8 twice
    with pytest.raises(ValueError, match=f"records {n} stages"):
        t.train_omni(out, 0, from_stage=8)
