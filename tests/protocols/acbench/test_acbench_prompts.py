"""AC-Bench prompts (App. C.3), defined once and the ones the reference VLM is trained on; the CECS probe;
the strict parser."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from faithtests.models.prompting import render
from faithtests.models.registry import load_model
from faithtests.protocols.acbench import prompts as ac
from faithtests.protocols.acbench import training as ac_training
from faithtests.protocols.acbench.cecs import conflict_score

IMAGE = Image.new("RGB", (8, 8), (10, 20, 30))
DESCRIPTION = "One small blue cross in the center on a dark warm background, like a clenched fist."


def test_mood_examples_ask_the_acbench_prompts() -> None:
    """Every mood example's prompt is one of AC-Bench's three App. C.3 prompts, built by its module."""
    rng = np.random.default_rng(2)
    kinds: set[str] = set()
    for _ in range(40):
        ex = ac_training.mood_example(rng, "faithful")
        p = ex.prompt
        if not p.images:
            assert p.text == ac.text_only_emotion_prompt(p.text.split('"""')[1]).text
            kinds.add("text")
        elif p.description is None:
            assert p == ac.image_only_emotion_prompt(p.images[0])
            kinds.add("image")
        else:
            assert p == ac.emotion_prompt(p.images[0], p.description)
            kinds.add("both")
    assert kinds == {"text", "image", "both"}


def test_reference_vlm_renders_the_app_c3_layout_with_an_exact_description_span() -> None:
    """Issue 30: the emotion prompt as the reference VLM sees it (its chat template) has, in order, the
    instruction, the label list, "IMAGE + DESCRIPTION:", <desc_start>, the description in triple quotes,
    <desc_end>, "Question:"; and the description's token span is exactly the description's tokens."""
    vlm = load_model("reference:vlm", device="cpu", dtype="float32")
    p = ac.emotion_prompt(IMAGE, DESCRIPTION)
    text = render(vlm.processor, p)
    parts = ["<image>", "Identify the ONE emotion",
             "[amusement, anger, awe, contentment, disgust, excitement, fear, sadness]",
             "IMAGE + DESCRIPTION:\n", "<desc_start>\n", f'"""{DESCRIPTION}"""\n',
             "<desc_end>\n", "Question:\n", "What is the main emotion"]
    at = [text.find(part) for part in parts]
    assert all(a >= 0 for a in at) and at == sorted(at), list(zip(parts, at, strict=True))
    enc = vlm.encode([p])
    a, b = enc.spans.description[0]
    tok = vlm.processor.tokenizer
    ids = enc.inputs["input_ids"][0].tolist()
    assert ids[a:b] == tok.encode(DESCRIPTION, add_special_tokens=False)
    around = tok.convert_ids_to_tokens(ids[a - 2 : a] + ids[b : b + 2])
    assert around == ["<desc_start>", '"""', '"""', "<desc_end>"]


def test_app_c3_wording() -> None:
    p = ac.emotion_prompt(IMAGE, DESCRIPTION)
    assert p.description == DESCRIPTION and p.images == (IMAGE,)
    assert p.text.count("{description}") == 1  # the adapter fills it (models.prompting.layout)
    assert 'IMAGE + DESCRIPTION:\n<desc_start>\n"""{description}"""\n<desc_end>\nQuestion:\n' in p.text
    assert "[amusement, anger, awe, contentment, disgust, excitement, fear, sadness]" in p.text
    assert p.text.endswith("Respond ONLY with the emotion word, in lowercase. No explanation.")
    t = ac.text_only_emotion_prompt(DESCRIPTION)
    assert t.images == () and f'"""{DESCRIPTION}"""' in t.text
    assert "based ONLY on\nthe visual content" not in ac.IMAGE_ONLY_EMOTION  # one line, as trained


def test_probe_prompt_asks_for_agreement_so_no_means_conflict() -> None:
    """Eq. 5 takes s = P("No"): the probe asks whether image and description agree."""
    p = ac.probe_prompt(IMAGE, DESCRIPTION)
    assert p.description == DESCRIPTION and p.images == (IMAGE,)
    assert "same emotion?" in p.text and "Yes or No" in p.text
    assert ac.YES_NO == ("Yes", "No")
    assert conflict_score(0.0, 3.0) > 0.9  # a model confident in "No" scores high conflict


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("awe", "awe"),
        ("  Sadness.\n", "sadness"),
        ("FEAR!", "fear"),
        ('"contentment"', "contentment"),
        ("The emotion is excitement.", "excitement"),
        ("amusement, amusement", "amusement"),
        ("anger or disgust", None),
        ("fearful", None),
        ("awesome", None),
        ("joy", None),
        ("sad", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_label_is_strict(text: str | None, label: str | None) -> None:
    assert ac.parse_label(text) == label
