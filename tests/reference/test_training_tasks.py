"""The reference trainer's tasks come from the protocols' manifests; each prompt constant is defined once."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

import faithtests.reference.grounding_prompts as ref
import faithtests.reference.vlm_tasks as vt
from faithtests.manifest import load_attr
from faithtests.protocols import manifests
from faithtests.protocols.acbench import training as ac_training
from faithtests.protocols.imavb import training as imavb_training
from faithtests.protocols.imavb.prompts import a1_text
from faithtests.protocols.s3e import training as s3e_training
from faithtests.protocols.spdfaith import training as spd_training
from faithtests.reference.tokenizer import words, world_vocab

PACKAGE = Path(vt.__file__).resolve().parents[1]


def test_tasks_are_collected_from_the_manifests() -> None:
    """What the trainer collects equals the grounding tasks plus each protocol's TASKS imported
    directly (the manifests' ``training`` strings name exactly these)."""
    direct = {**imavb_training.TASKS, **ac_training.TASKS, **spd_training.TASKS, **s3e_training.TASKS}
    assert vt.training_tasks() == {**vt.GROUNDING_TASKS, **direct}
    named = {m.name: m.training for m in manifests() if m.training is not None}
    protocols = ("acbench", "imavb", "s3e", "spdfaith")
    assert named == {p: f"faithtests.protocols.{p}.training:TASKS" for p in protocols}
    assert {k for m in named.values() for k in load_attr(m)} == set(direct)


def test_every_mixture_names_only_collected_tasks() -> None:
    tasks = vt.training_tasks()
    for name, weights in vt.MIXTURES.items():
        assert set(weights) <= set(tasks), name


def test_every_declared_task_is_sampled_by_a_mixture() -> None:
    """A task a manifest declares that no mixture names would never be trained (the mixtures are the
    bundled checkpoints' recipe, phase by phase): a new protocol's task fails here, named."""
    sampled = {task for weights in vt.MIXTURES.values() for task in weights}
    unsampled = sorted(set(vt.training_tasks()) - sampled)
    assert not unsampled, (f"training task(s) {unsampled} are in no mixture of "
                           "faithtests/reference/vlm_tasks.py MIXTURES: the reference VLM never learns them")


@pytest.fixture(scope="module")
def vocabulary() -> dict[str, int]:
    return world_vocab(lowercase=False)  # the VLM's (cased; the checkpoints save the same one)


@pytest.mark.parametrize("task", sorted(vt.training_tasks()))
def test_every_word_a_task_trains_on_is_in_the_reference_vocabulary(task: str, vocabulary: dict[str, int]
                                                                     ) -> None:
    """A prompt or answer word missing from the reference tokenizer's corpus
    (``faithtests/reference/tokenizer.py``, ``world_corpus``) would be [UNK] to the reference VLM: a
    protocol whose task asks new words fails here, naming the task and the words."""
    make = vt.training_tasks()[task]
    missing: set[str] = set()
    for policy in vt.POLICIES:
        rng = np.random.default_rng(0)
        for _ in range(12):
            ex = make(rng, policy)
            missing |= {w for w in words(ex.prompt.text) + words(ex.answer) if w not in vocabulary}
    assert not missing, f"training task {task!r} asks words the reference vocabulary lacks: {sorted(missing)}"


def test_a_new_word_in_a_tasks_prompt_fails_naming_the_task(monkeypatch: pytest.MonkeyPatch,
                                                             vocabulary: dict[str, int]) -> None:
    import faithtests.protocols.spdfaith.prompts as spd_prompts

    monkeypatch.setattr(spd_prompts, "COUNT_QUESTION", "How many zorgs are there between the two pictures?")
    with pytest.raises(AssertionError, match=r"training task 'count' asks words the reference vocabulary "
                                             r"lacks: \['zorgs'\]"):
        test_every_word_a_task_trains_on_is_in_the_reference_vocabulary("count", vocabulary)


def test_a_task_declared_twice_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    twice = replace(next(m for m in manifests() if m.name == "s3e"), name="twice",
                    training="faithtests.reference.vlm_tasks:GROUNDING_TASKS")
    monkeypatch.setattr(vt, "manifests", lambda: (*manifests(), twice))
    with pytest.raises(ValueError, match=r"protocol 'twice' declares training task\(s\) already declared"):
        vt._collected.__wrapped__()


def test_a_mixture_naming_an_undeclared_task_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vt, "training_tasks", lambda: dict(vt.GROUNDING_TASKS))
    with pytest.raises(ValueError, match="names task 'ab', which no protocol's manifest declares"):
        for seed in range(50):  # "decision" is half "ab", half "verify" (declared here)
            vt.sample_example(np.random.default_rng(seed), "faithful", "decision")


def test_premise_examples_ask_imavb_a1() -> None:
    """The reference VLM is trained on IMAVB's own A1 text (the suite's prompt), options as displayed."""
    rng = np.random.default_rng(4)
    for _ in range(10):
        ex = imavb_training.premise_example(rng, "faithful")
        question = ex.prompt.text.split("\n")[1]
        options = [line.split(". ", 1)[1] for line in ex.prompt.text.split("\n")[3:9]]
        assert ex.prompt.text == a1_text(question, options)


def _module_level_definitions(name: str) -> list[tuple[str, Any]]:
    """(module path, literal value or None) of every module-level assignment of ``name`` in faithtests."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
            for t in targets:
                if isinstance(t, ast.Name) and t.id == name:
                    value = node.value
                    try:
                        literal = ast.literal_eval(value) if value is not None else None
                    except ValueError:
                        literal = None
                    out.append((str(path.relative_to(PACKAGE)), literal))
    return out


@pytest.mark.parametrize("name", [
    "OPTION_E", "OPTION_F", "EMOTIONS", "EMOTION_TASK", "EMOTION_DESCRIPTION", "EMOTION_QUESTION",
    "IMAGE_ONLY_EMOTION", "TEXT_ONLY_EMOTION", "S3E_TEMPLATE", "SAME_QUESTION", "DIFFERENT_QUESTION",
    "COUNT_QUESTION", "A1_INSTRUCTION", "VERIFY_TEMPLATE", "CAPTION_QUESTION",
])
def test_each_prompt_constant_is_defined_once(name: str) -> None:
    found = _module_level_definitions(name)
    assert len(found) == 1, found


def test_the_six_option_letters_are_defined_once() -> None:
    """IMAVB's A-F letters (``LETTERS``; S3E's A/B choice is another constant of the same name)."""
    six = [f for f in _module_level_definitions("LETTERS") if f[1] == ("A", "B", "C", "D", "E", "F")]
    assert [path for path, _ in six] == ["protocols/imavb/records.py"]


def test_the_reference_prompt_module_holds_only_the_grounding_prompts() -> None:
    image = Image.new("RGB", (8, 8))
    texts = {name for name in vars(ref) if name.isupper() and isinstance(getattr(ref, name), str)}
    assert texts == {"CAPTION_QUESTION", "VERIFY_TEMPLATE"}
    assert ref.verify_prompt(image, "a red circle").text.endswith('Caption: "a red circle"')
