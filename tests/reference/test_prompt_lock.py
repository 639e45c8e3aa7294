"""A prompt change the bundled reference models were not trained on fails here (issue 48), naming the
training task, the checkpoints trained on it and the command that retrains them; retraining rewrites
the checkpoint's entry of ``fixtures/trained_prompts.json`` (faithtests/reference/prompt_lock.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import faithtests.protocols.spdfaith.prompts as spd_prompts
import faithtests.reference.train as train
from faithtests.reference.prompt_lock import LOCK_NAME, OMNI_MODELS, RETRAIN, VLM_MODELS, read_lock, stale

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_every_reference_model_was_trained_on_the_current_prompts() -> None:
    assert set(read_lock(FIXTURES)) == set(RETRAIN) == {*VLM_MODELS, *OMNI_MODELS}
    problems = stale(FIXTURES)
    assert not problems, "\n".join(problems)


def test_a_reworded_prompt_names_its_task_the_checkpoints_and_the_commands(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spd_prompts, "COUNT_QUESTION", "How many things differ between the two pictures?")
    problems = stale(FIXTURES)
    assert len(problems) == 1, problems  # only the count task asks it; the omni models never did
    assert problems[0].startswith(
        "training task 'count': its prompts or answers are not what vlm, vlm-textbiased, vlm-positionbiased, "
        "vlm-sameprior, vlm-diffblind were trained on")
    assert "first prompt now: 'How many things differ between the two pictures?'" in problems[0]
    assert problems[0].endswith(
        "Retrain (fixtures/README.md): faithtests train-reference vlm; faithtests train-reference "
        "vlm-textbiased; faithtests train-reference vlm-positionbiased; faithtests train-reference "
        "vlm-sameprior; faithtests train-reference vlm-diffblind")


def test_retraining_one_checkpoint_rewrites_its_entry_only(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Retrained on a reworded prompt, ``vlm``'s entry is current; its twins, fine-tuned from the old
    ``vlm``, still say they need retraining (a recipe stand-in: training itself takes minutes)."""
    for name in (*VLM_MODELS, *OMNI_MODELS):
        (tmp_path / name).mkdir()
    shutil.copy(FIXTURES / LOCK_NAME, tmp_path / LOCK_NAME)
    monkeypatch.setattr(spd_prompts, "COUNT_QUESTION", "How many things differ between the two pictures?")
    monkeypatch.setitem(train.RECIPES, "vlm", lambda out, seed, phase: {})
    train.train_reference("vlm", tmp_path / "vlm")
    problems = stale(tmp_path)
    assert len(problems) == 1 and "not what vlm-textbiased, vlm-positionbiased, vlm-sameprior, " \
        "vlm-diffblind were trained on" in problems[0], problems
    assert read_lock(tmp_path)["omni"] == read_lock(FIXTURES)["omni"]


def test_a_missing_lock_says_every_checkpoint_needs_its_record(tmp_path: Path) -> None:
    (tmp_path / "omni").mkdir()
    problems = stale(tmp_path)
    assert [p.split(":")[0] for p in problems] == ["training task 'premise_clip'",
                                                   "training task 'premise_clip_speech'"]
    assert all(p.endswith("faithtests train-reference omni --threads 1") for p in problems)
