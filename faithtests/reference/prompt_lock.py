"""What each bundled reference model was trained on: a digest of its training tasks' prompts and answers.

The reference models learn the suites' own questions (each protocol's ``training.py`` builds its examples
with the protocol's prompt module), so a reworded prompt asks the committed checkpoints something they
never saw: their gates then measure the rewording, not the model. ``fixtures/trained_prompts.json``
records, per checkpoint, a digest of a fixed sample of every task's prompts and answers as they were
when it was trained; :func:`train_reference` rewrites the checkpoint's entry, and
``tests/reference/test_prompt_lock.py`` fails, naming each changed task, the checkpoints trained on it
and the retraining command, when the current prompts differ from any entry.

The sample is seeded and small (cheap to redraw in a test), so a change that only a rare draw would show
can slip through; every prompt module's fixed texts reach the sample (each task's first draws cover its
question forms).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

LOCK_NAME = "trained_prompts.json"
#: Draws per task: enough that every question form of a task (same / different, each count) appears.
SAMPLES = 48
SEED = 20261130
#: Reference checkpoints trained on the VLM tasks and on the omni tasks, in training order.
VLM_MODELS = ("vlm", "vlm-textbiased", "vlm-positionbiased", "vlm-sameprior", "vlm-diffblind")
OMNI_MODELS = ("omni", "omni-deaf")
#: How each is retrained (fixtures/README.md has the recipes; a twin is fine-tuned from ``vlm``).
RETRAIN = {**{m: f"faithtests train-reference {m}" for m in VLM_MODELS},
           **{m: f"faithtests train-reference {m} --threads 1" for m in OMNI_MODELS}}


def _digest(draw: Callable[[np.random.Generator], tuple[str, str]]) -> dict[str, str]:
    """sha256 over the task's :data:`SAMPLES` seeded (prompt, answer) draws, and its first prompt."""
    h = hashlib.sha256()
    first = ""
    for i in range(SAMPLES):
        prompt, answer = draw(np.random.default_rng([SEED, i]))
        first = first or prompt
        h.update(json.dumps([prompt, answer]).encode("utf-8"))
    return {"sha256": h.hexdigest(), "first_prompt": first}


def vlm_tasks() -> dict[str, dict[str, str]]:
    """Digest of every VLM training task (the grounding tasks and each protocol's ``Manifest.training``)."""
    from faithtests.reference.vlm_tasks import training_tasks  # lazy: train.py imports this module

    def draw(maker: Callable[..., object]) -> Callable[[np.random.Generator], tuple[str, str]]:
        def one(rng: np.random.Generator) -> tuple[str, str]:
            ex = maker(rng, "faithful")
            return ex.prompt.text, ex.answer  # type: ignore[attr-defined]
        return one

    return {name: _digest(draw(maker)) for name, maker in training_tasks().items()}


def omni_tasks() -> dict[str, dict[str, str]]:
    """Digest of the omni model's IMAVB clip questions, without and with speech premises."""
    from faithtests.reference.omni_tasks import SPLITS, sample_example  # lazy: only for the omni models

    weights = dict.fromkeys(SPLITS, 1.0)

    def draw(speech: bool) -> Callable[[np.random.Generator], tuple[str, str]]:
        def one(rng: np.random.Generator) -> tuple[str, str]:
            ex = sample_example(rng, weights, speech=speech)
            return ex.prompt.text, ex.answer
        return one

    return {"premise_clip": _digest(draw(False)), "premise_clip_speech": _digest(draw(True))}


def current(models: Iterable[str]) -> dict[str, dict[str, dict[str, str]]]:
    """model -> task -> digest, as the prompts are now, for the prompt-trained ``models``."""
    wanted = list(models)
    vlm = vlm_tasks() if any(m in VLM_MODELS for m in wanted) else {}
    omni = omni_tasks() if any(m in OMNI_MODELS for m in wanted) else {}
    return {m: vlm if m in VLM_MODELS else omni for m in wanted if m in RETRAIN}


def read_lock(root: Path) -> dict[str, dict[str, dict[str, str]]]:
    path = root / LOCK_NAME
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("models", {}))


def write_lock(root: Path, models: Iterable[str]) -> Path:
    """Record ``models`` (those of them trained on prompts) as trained on the current prompts."""
    entries = read_lock(root)
    entries.update(current(models))
    path = root / LOCK_NAME
    path.write_text(json.dumps({
        "about": "what each reference checkpoint was trained on: per training task, a sha256 of "
                 f"{SAMPLES} seeded (prompt, answer) draws (faithtests/reference/prompt_lock.py); "
                 "rewritten by faithtests train-reference",
        "models": dict(sorted(entries.items())),
    }, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def stale(root: Path, models: Iterable[str] = (*VLM_MODELS, *OMNI_MODELS)) -> list[str]:
    """One line per (task, checkpoints) whose prompts or answers are not what the checkpoints were
    trained on, with the task's first prompt now and the commands that retrain them; [] when current."""
    wanted = [m for m in models if (root / m).is_dir()]
    locked, now = read_lock(root), current(wanted)
    changed: dict[str, list[str]] = {}
    for model in wanted:
        was = locked.get(model, {})
        for task in sorted(set(was) | set(now.get(model, {}))):
            if was.get(task, {}).get("sha256") != now.get(model, {}).get(task, {}).get("sha256"):
                changed.setdefault(task, []).append(model)
    out = []
    for task, trained in changed.items():
        first = next((now[m][task]["first_prompt"] for m in trained if task in now.get(m, {})),
                     "(task removed)")
        commands = "; ".join(RETRAIN[m] for m in trained)
        out.append(f"training task {task!r}: its prompts or answers are not what {', '.join(trained)} "
                   f"{'was' if len(trained) == 1 else 'were'} trained on ({root / LOCK_NAME}); first prompt "
                   f"now: {first[:160]!r}. Retrain (fixtures/README.md): {commands}")
    return out
