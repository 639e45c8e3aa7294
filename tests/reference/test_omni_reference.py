"""The reference omni model (``fixtures/omni``) and its deaf twin (``fixtures/omni-deaf``): a
Qwen2.5-Omni thinker grown from the reference VLM (faithtests/reference/train_omni.py).

- the transplant is exact: a text-only prompt gives the VLM's logits (multimodal RoPE with equal axes is
  1-D RoPE; the q/k/v biases are zero);
- both checkpoints load through the public path (``reference:NAME`` -> ``hf:``) as the omni adapter;
- the card's small held-out sample (fixtures/omni*/heldout.json ``sample``) is recomputed;
- the deaf twin answers audio content questions far worse than the omni model (std_a) and sees as well
  (vision splits). Its mis_a is high: it says F to almost every audio question, where the omni model
  says F more often when the audio premise is false.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from faithtests.models.locations import fixtures_root  # noqa: E402

OMNI = fixtures_root() / "omni"
DEAF = fixtures_root() / "omni-deaf"
#: One clip of 12 may flip (float rounding across machines / torch builds).
TOLERANCE = 1 / 12 + 1e-9


def _card(path: Path) -> dict[str, Any]:
    card: dict[str, Any] = json.loads((path / "heldout.json").read_text())
    return card


def test_text_only_prompt_matches_the_vlm() -> None:
    from transformers import AutoTokenizer

    from faithtests.reference.omni_init import build_initial

    thinker, processor, llava, _ = build_initial(fixtures_root() / "vlm", 0)
    text = "USER: Question: what colour are the circles on the left ? ASSISTANT:"
    ids = AutoTokenizer.from_pretrained(str(fixtures_root() / "vlm"), local_files_only=True)(
        text, return_tensors="pt")["input_ids"]
    assert processor.tokenizer(text, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
    with torch.no_grad():
        want = llava(input_ids=ids).logits
        got = thinker(input_ids=ids).logits[..., : want.shape[-1]]
    assert float((want - got).abs().max()) < 1e-5
    # and the comparison can fail: a non-zero q bias moves the logits
    with torch.no_grad():
        thinker.model.language_model.layers[0].self_attn.q_proj.bias.fill_(0.5)
        moved = thinker(input_ids=ids).logits[..., : want.shape[-1]]
    assert float((want - moved).abs().max()) > 1e-3


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    import faithtests

    return {name: faithtests.load_model(f"reference:{name}") for name in ("omni", "omni-deaf")}


def test_reference_omni_loads_as_the_qwen_omni_thinker(models: dict[str, Any]) -> None:
    from faithtests.models.hf_omni import HFOmniModel

    for name, model in models.items():
        assert isinstance(model, HFOmniModel), name
        assert json.loads((fixtures_root() / name / "config.json").read_text())["model_type"] == (
            "qwen2_5_omni_thinker")
        assert model.accepts_audio


def test_card_sample_is_recomputed(models: dict[str, Any]) -> None:
    from faithtests.reference.omni_tasks import SPLITS, premise_report
    from faithtests.reference.train_omni import HELDOUT_SEED, SAMPLE_CLIPS

    got = {}
    for name, model in models.items():
        want = _card(fixtures_root() / name)["sample"]
        got[name] = premise_report(model, SAMPLE_CLIPS, HELDOUT_SEED, shuffles=1)
        for key in [*SPLITS, "std_a_says_F"]:
            assert abs(got[name][key] - want[key]) <= TOLERANCE, (name, key, got[name], want)
    # content answers about the sound need hearing (the deaf twin says F to almost every audio question,
    # so its mis_a is high: rejection alone does not show hearing)
    assert got["omni-deaf"]["std_a"] < got["omni"]["std_a"], got


def test_deaf_twin_keeps_vision_and_fails_audio_on_the_card() -> None:
    omni, deaf = _card(OMNI)["card"], _card(DEAF)["card"]
    chance = 1 / 6
    assert omni["std_a"] > chance + 0.15, omni  # the omni model answers from the sound
    assert min(deaf["std_a"], deaf["mis_a"]) < 0.3, deaf
    assert deaf["std_a"] < omni["std_a"] - 0.2, (omni, deaf)
    assert abs((deaf["std_v"] + deaf["mis_v"]) - (omni["std_v"] + omni["mis_v"])) < 0.2, (omni, deaf)
    # F follows the audio premise (stage premise5): said more often to misleading than to standard audio
    # questions, which the deaf twin, saying F to nearly all of them, cannot do
    assert omni["mis_a_says_F"] - omni["std_a_says_F"] > 0.15, omni
    assert abs(deaf["mis_a_says_F"] - deaf["std_a_says_F"]) < 0.1, deaf


def test_deaf_twin_without_its_base_names_the_fix(tmp_path: Path) -> None:
    from faithtests.reference.train import main

    with pytest.raises(FileNotFoundError, match="train-reference omni"):
        main(["omni-deaf", "--out", str(tmp_path / "omni-deaf")])


def test_paired_draws_ask_both_audio_questions_of_one_clip() -> None:
    """premise5's draws (``PairedAudio``): per clip its standard and misleading audio question (same
    sound and frames, questions differing in the premise alone; answers a content letter vs F), then
    one of its vision questions; the same generator state gives the same draws."""
    import numpy as np

    from faithtests.protocols.imavb.records import LETTERS, OPTION_F
    from faithtests.reference.omni_tasks import PairedAudio

    def draws(seed: int) -> list[Any]:
        draw, rng = PairedAudio(), np.random.default_rng(seed)
        return [draw(rng) for _ in range(12)]

    got = draws(5)
    assert [e.split for e in got[0::3]] == ["std_a"] * 4 and [e.split for e in got[1::3]] == ["mis_a"] * 4
    assert {e.split for e in got[2::3]} <= {"std_v", "mis_v"}
    for std, mis, vis in zip(got[0::3], got[1::3], got[2::3], strict=True):
        assert std.prompt.audio is not None and mis.prompt.audio is not None and vis.prompt.audio is not None
        assert std.prompt.audio.samples is mis.prompt.audio.samples is vis.prompt.audio.samples  # one clip
        assert std.prompt.video is mis.prompt.video is vis.prompt.video
        assert std.prompt.text != mis.prompt.text
        assert mis.options[LETTERS.index(mis.answer)] == OPTION_F
        assert std.options[LETTERS.index(std.answer)] != OPTION_F
    assert [(e.split, e.answer, e.prompt.text) for e in draws(5)] == [
        (e.split, e.answer, e.prompt.text) for e in got]
    assert [e.prompt.text for e in draws(6)] != [e.prompt.text for e in got]


def test_speech_words_follow_every_earlier_id() -> None:
    """The speech stage appended its words after the media tokens (faithtests/reference/omni_speech.py):
    the media ids the config names are unchanged, and a speech premise tokenizes without [UNK]."""
    from transformers import AutoTokenizer

    from faithtests.protocols.imavb.audio_stimuli import clip_items
    from faithtests.world.speech import PREMISE_WORDS

    tok = AutoTokenizer.from_pretrained(str(OMNI), local_files_only=True)
    config = json.loads((OMNI / "config.json").read_text())
    media = [config[k] for k in ("image_token_index", "audio_token_index", "video_token_index",
                                 "audio_start_token_id", "audio_end_token_id")]
    assert [tok.convert_ids_to_tokens(i) for i in media[:3]] == ["<|IMAGE|>", "<|AUDIO|>", "<|VIDEO|>"]
    ids = [tok.convert_tokens_to_ids(w) for w in PREMISE_WORDS]
    assert min(ids) > max(media) and len(set(ids)) == len(ids), ids
    spoken = [it.standard_audio.question for it in clip_items(60, 0) if it.track.speech is not None]
    assert spoken and all(tok.unk_token_id not in tok(q)["input_ids"] for q in spoken)
    assert config["text_config"]["vocab_size"] == max(ids) + 1
