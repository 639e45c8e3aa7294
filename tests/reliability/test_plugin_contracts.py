"""Issue 31 item 7: what a plug-in model or judge returns is checked per call, and a breach is a
PluginContractError naming the plug-in and the contract, not a TypeError (or a silent broadcast) deep
inside a metric. Plug-ins: ``contract_models.py``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from faithtests.models.errors import PluginContractError
from faithtests.models.interfaces import Decision, ImageTextScorer, Prompt, VisionLanguageModel
from faithtests.models.registry import load_model
from faithtests.protocols.spdfaith.judge import Judgement, callable_judge, world_judge
from faithtests.protocols.spdfaith.records import DiffRecord, EditTruth

IMAGES = [Image.new("RGB", (4, 4), c) for c in ("white", "black", "gray")]
TEXTS = ["a", "bb" * 10, "c" * 60]
PROMPTS = [Prompt((im,), f"Is it {t}? A or B") for im, t in zip(IMAGES, TEXTS, strict=True)]


@pytest.fixture(autouse=True)
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def _load(name: str) -> Any:
    return load_model(f"py:contract_models:{name}", device="cpu")


def _breach(name: str, call: str) -> str:
    model = _load(name)
    with pytest.raises(PluginContractError) as err:
        args = {"similarity": (IMAGES, TEXTS), "encode_images": (IMAGES,), "encode_texts": (TEXTS,),
                "generate": (PROMPTS,), "decide": (PROMPTS, ["A", "B"])}[call]
        getattr(model, call)(*args)
    return str(err.value)


def test_a_scorer_returning_a_list_names_the_plugin_and_contract() -> None:
    assert _breach("list_scorer", "similarity") == (
        "plug-in py:contract_models:list_scorer broke the ImageTextScorer contract: similarity() of 3 pairs "
        "returned list, expected a torch.Tensor [3]")


def test_a_scorer_of_the_wrong_shape_or_too_few_rows() -> None:
    assert _breach("matrix_scorer", "similarity").endswith(
        "similarity() of 3 pairs returned a torch.Tensor [3, 3], expected a torch.Tensor [3]")
    assert _breach("short_scorer", "encode_texts").endswith(
        "encode_texts() of 3 inputs returned a torch.Tensor [2, 2], expected a torch.Tensor [3, *]")


def test_embeddings_that_are_not_unit_length_unless_the_score_is_declared() -> None:
    """Norm-1e-3 embeddings make every cosine-by-dot-product ~1e-6, so LGIP's E_inv (Eq. 2) passed at
    ~2e-6; a scorer whose score is no cosine says so with ``score_kind``."""
    msg = _breach("tiny_norm_scorer", "encode_images")
    assert "encode_images() returned embeddings that are not unit length (row 0 has norm 0.001, 3 of 3" in msg
    assert msg.startswith("plug-in py:contract_models:tiny_norm_scorer broke the ImageTextScorer contract")
    dot = _load("dot_scorer")
    assert dot.encode_texts(TEXTS).norm(dim=-1).max() < 2e-3  # declared: passes through unchanged
    assert dot.similarity(IMAGES, TEXTS).shape == (3,)


def test_nan_rows_are_left_to_the_non_finite_rule() -> None:
    out = _load("nan_row_scorer").encode_texts(TEXTS)
    assert math.isnan(float(out[0, 0])) and out[1:].norm(dim=-1).tolist() == pytest.approx([1.0, 1.0])


def test_a_good_plugin_passes_unchanged_and_keeps_its_protocols() -> None:
    scorer, vlm = _load("nan_row_scorer"), _load("tiny_vlm")
    assert isinstance(scorer, ImageTextScorer) and not isinstance(scorer, VisionLanguageModel)
    assert isinstance(vlm, VisionLanguageModel) and not isinstance(vlm, ImageTextScorer)
    assert vlm.generate(PROMPTS, 5) == [p.text[:5] for p in PROMPTS]
    assert isinstance(vlm.decide(PROMPTS, ["A", "B"]), Decision)
    assert vlm.attentions(PROMPTS).weights[0].shape == (3, 1, 3)
    assert vlm.answer_logprob(PROMPTS, ["yes", "no", "maybe"]).shape == (3, 3)
    vlm.spec = "label"  # assignments reach the plug-in
    assert vlm.fingerprint()["spec"] == "label" and vlm.num_layers == 2


def test_a_vlm_whose_generate_returns_none_or_non_strings() -> None:
    assert _breach("none_vlm", "generate") == (
        "plug-in py:contract_models:none_vlm broke the VisionLanguageModel contract: generate() of 3 "
        "prompts returned NoneType, expected a list of 3 str")
    assert _breach("bytes_vlm", "generate").endswith(
        "generate() of 3 prompts returned a list of 3 (bytes), expected a list of 3 str")


def test_decide_logits_and_states_shapes() -> None:
    assert _breach("few_states_vlm", "decide").endswith(
        "decide() of 3 prompts and 2 options: logits returned a torch.Tensor [2, 2], expected a torch.Tensor "
        "[3, 2]")


def _record() -> DiffRecord:
    return DiffRecord("r1", "r1", "single", None, (EditTruth("color", "circle", "blue"),), "world", "r1",
                      lambda: (IMAGES[0], IMAGES[1]))


@pytest.mark.parametrize("count", [float("nan"), 1.5, "2", True])
def test_a_judge_returning_a_non_count(count: Any) -> None:
    """A NaN ``unparseable`` passed Judgement's own ``>= 0`` check (NaN compares false) and reached
    Eq. 12's denominators."""
    good = world_judge()("The red circle turned blue.", _record())

    def judge(answer: str, record: DiffRecord) -> Judgement:
        return Judgement(good.claims, good.matched, count, "x")

    with pytest.raises(PluginContractError) as err:
        callable_judge(judge, "mypkg.judges:llm")("text", _record())
    assert str(err.value) == (f"judge 'mypkg.judges:llm' broke the Judge contract: returned "
                              f"unparseable={count!r}, expected a count (int >= 0)")


def test_a_judge_whose_claims_are_not_judged_claims() -> None:
    def judge(answer: str, record: DiffRecord) -> Judgement:
        return Judgement(("the circle is blue",), (None,), 0, "x")  # type: ignore[arg-type]

    with pytest.raises(PluginContractError, match=r"claim 0 is a str, not a JudgedClaim$"):
        callable_judge(judge, "mypkg.judges:llm")("text", _record())
