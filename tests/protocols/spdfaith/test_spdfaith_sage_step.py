"""SAGE stage 3 as the paper defines it (SPD-Faith §5.1 Eq. 6, App. D.1 Eqs. 17-18, Alg. 1 lines 26-30):
the token activation map by hand, the step mask from the model's reading alone (never the pair's
pixels), and on the reference VLM the mask recomputed at every decoding step."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from faithtests.models.interfaces import Hooks, Prompt
from faithtests.models.step_contrast import StepContrast, StepReading
from faithtests.protocols.spdfaith.sage import SageConfig, SageStep, sage_contrast, sage_hooks
from faithtests.protocols.spdfaith.sage_mask import token_activation


def test_token_activation_is_eq18_by_hand() -> None:
    """Eq. 18: A(y)_j = h_j · w_y, the row j of Z = H·W_head (Eq. 17) at the column of token y."""
    h = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 1.0]])
    w_y = np.array([2.0, 1.0])
    assert token_activation(h, w_y).tolist() == [4.0, 5.0, 1.0]  # 1·2+2·1, 3·2−1·1, 0·2+1·1
    head = np.array([[0.0, 1.0], [2.0, 1.0]])  # W_head transposed: one row per vocabulary token
    assert np.allclose(token_activation(h, head[1]), (h @ head.T)[:, 1])  # a slice of Eq. 17's Z
    with pytest.raises(ValueError, match="do not match"):
        token_activation(h, np.ones(3))


def reading(
    token_logits: list[float] | None = None, candidates: tuple[int, ...] | None = None
) -> StepReading:
    """One row: 2 head keys, two 2x2 images as keys 2-9, 2 text keys; vocabulary of 3, D = 2.

    Ω_A (attention summed over the two images per cell): [[0.1, 0.4], [0.3, 0.0]] -> top-2 {(0,1), (1,0)}.
    TAM of token 1 (w = (0, 1): the second state coordinate, summed over the images):
    [[1, 5], [0, 4]] -> top-2 {(0,1), (1,1)}; of token 2 (w = (1, 0)): [[9, 0], [7, 1]] -> {(0,0), (1,0)}.
    """
    att = torch.zeros(1, 1, 12)
    att[0, 0, 2:6] = torch.tensor([0.1, 0.2, 0.3, 0.0])
    att[0, 0, 6:10] = torch.tensor([0.0, 0.2, 0.0, 0.0])
    states = torch.tensor([[5.0, 1.0], [0.0, 2.0], [3.0, 0.0], [1.0, 3.0],
                           [4.0, 0.0], [0.0, 3.0], [4.0, 0.0], [0.0, 1.0]])
    head = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    logits = torch.tensor(token_logits or [0.0, 2.0, 1.0])
    return StepReading(0, logits, att, tuple(range(2, 10)), states, head, candidates)


def test_step_mask_is_attention_and_tam_intersected_by_hand() -> None:
    """Eq. 6 with Ω_T = top-k of Eq. 18 for y_t = argmax L_main (Alg. 1 lines 26-27)."""
    step = SageStep(top_k=2)
    assert step.token(reading()) == 1
    # {(0,1), (1,0)} ∩ {(0,1), (1,1)}
    assert step.mask(reading(), 2).tolist() == [[False, True], [False, False]]
    assert step.token(reading([0.0, 1.0, 2.0])) == 2
    assert step.mask(reading([0.0, 1.0, 2.0]), 2).tolist() == [[False, False], [True, False]]
    # a decision: y_t is the top *option*, whatever the vocabulary's argmax
    assert step.token(reading([9.0, 2.0, 1.0], candidates=(2, 1))) == 1
    assert step.token(reading([9.0, 1.0, 2.0], candidates=(2, 1))) == 2
    # no intersection -> Ω_A (the fallback); "none" keeps it empty
    far = SageStep(top_k=1)  # Ω_A = {(0,1)}, token 2's Ω_T = {(0,0)}
    assert far.mask(reading([0.0, 1.0, 2.0]), 2).tolist() == [[False, True], [False, False]]
    assert not SageStep(top_k=1, fallback="none").mask(reading([0.0, 1.0, 2.0]), 2).any()


@pytest.mark.gpu
def test_the_step_mask_reads_an_lm_head_on_cuda() -> None:
    """The unembedding is the LM head itself, on the model's device: on CUDA the mask is the same as on
    the CPU (it failed there once: a CUDA tensor has no .numpy())."""
    r = reading()
    on_cuda = StepReading(r.step, r.logits, r.attention, r.image_positions, r.image_states,
                          r.unembedding.cuda(), r.candidates)
    assert SageStep(top_k=2).mask(on_cuda, 2).tolist() == [[False, True], [False, False]]


def pair(edit_at: tuple[int, int]) -> tuple[Image.Image, Image.Image]:
    """Noise (no cell equals the mean colour) and a copy with a red 4x4 square at ``edit_at`` (x, y)."""
    noise = np.random.default_rng(0).integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    a = Image.fromarray(noise)
    b = a.copy()
    b.paste((250, 0, 0), (edit_at[0], edit_at[1], edit_at[0] + 4, edit_at[1] + 4))
    return a, b


def occluded(img: Image.Image, original: Image.Image) -> list[tuple[int, int]]:
    """The (row, col) cells of a 2x2 grid whose pixels differ from ``original``."""
    x, o = np.asarray(img), np.asarray(original)
    cell = [(slice(4 * i, 4 * i + 4), slice(4 * j, 4 * j + 4), (i, j)) for i in range(2) for j in range(2)]
    return [ij for r, c, ij in cell if not np.array_equal(x[r, c], o[r, c])]


def test_the_mask_does_not_read_the_second_images_pixels() -> None:
    """The same reading, the edit moved in image 2: the same cells are occluded (Ω_T comes from the
    model's logits, not from the pair), unlike the oracle's pixel-change mask."""
    step = SageStep(top_k=2)
    got = []
    for where in [(0, 0), (4, 4), (0, 4)]:
        a, b = pair(where)
        base = Prompt((a, b), "There is one difference in the picture. Can you find it?")
        aux = step(base, reading())
        assert aux is not base and aux.text == base.text
        got.append((occluded(aux.images[0], a), occluded(aux.images[1], b)))
    assert all(g == ([(0, 1)], [(0, 1)]) for g in got)  # cell (0, 1) = x 4-8, y 0-4, in both images
    assert "images" not in SageStep.mask.__code__.co_varnames  # the mask is a function of the reading only


def test_empty_mask_returns_the_base_prompt_itself() -> None:
    base = Prompt(pair((0, 0)), "x")
    assert SageStep(top_k=1, fallback="none")(base, reading([0.0, 1.0, 2.0])) is base  # L_aux = L_main


def test_sage_contrast_is_a_step_contrast_that_pickles() -> None:
    prompts = [Prompt(pair((0, 0)), "x")]
    c = sage_contrast(prompts, SageConfig(top_k=3, eta=0.7))
    assert isinstance(c, StepContrast) and c.eta == 0.7 and c.aux == tuple(prompts)
    assert c.step == SageStep(3, "attention") and "tam" in c.tag
    assert pickle.loads(pickle.dumps(c)).step == c.step  # a process pool ships it with the hooks


# ------------------------------------------------------------------------------------ on the model
@pytest.fixture(scope="module")
def ref() -> Any:
    from faithtests.models.registry import load_model

    return load_model("reference:vlm", device="cpu", dtype="float32")


class Recorder:
    """The SAGE step rule, recording each call's row prompt, step and mask."""

    def __init__(self, step: SageStep) -> None:
        self.step = step
        self.calls: list[tuple[str, int, tuple[bool, ...]]] = []

    def __call__(self, base: Prompt, r: StepReading) -> Prompt:
        self.calls.append((base.text, r.step, tuple(self.step.mask(r, len(base.images)).ravel())))
        assert r.attention.shape[-1] >= max(r.image_positions) + 1 and r.image_states.shape[0] == 72
        return self.step(base, r)


def test_the_mask_is_recomputed_at_every_step(ref: Any) -> None:
    """Alg. 1 lines 26-30 inside the step loop: one mask per generated token per row, and they change."""
    from faithtests.protocols.spdfaith.prompts import find_prompt
    from faithtests.protocols.spdfaith.stimuli import pair_item

    prompts = [find_prompt(*pair_item(2, i).images(), 1) for i in range(3)]
    prompts = [Prompt(p.images, f"{p.text} ({i})") for i, p in enumerate(prompts)]  # rows told apart
    rec = Recorder(SageStep(6))
    hooks = Hooks(contrast=StepContrast(tuple(prompts), 0.5, "test-recorder", step=rec))
    steps = 5  # shorter than every answer: no row ends before
    ref.generate(prompts, steps, hooks)
    for p in prompts:
        mine = [c for c in rec.calls if c[0] == p.text]
        assert [c[1] for c in mine] == list(range(steps))
    assert len({c[2] for c in rec.calls}) > 1  # the masks differ across steps / rows


def test_step_contrast_leaves_the_main_stream_exact(ref: Any) -> None:
    """η = 0: the main stream is plain (SAGE-hooked) greedy decoding; the auxiliary forwards (a copy of
    stage 1's stateful routing) never disturb the main stream's μ_{t−1} state."""
    from faithtests.protocols.spdfaith.prompts import find_prompt
    from faithtests.protocols.spdfaith.stimuli import pair_item

    prompts = [find_prompt(*pair_item(2, i).images(), 1) for i in range(3)]
    sage = sage_hooks(ref.num_layers, SageConfig())
    plain = ref.generate(prompts, 24, sage)
    zero = Hooks(attention=sage.attention, ffn=sage.ffn, tag=sage.tag,
                 contrast=sage_contrast(prompts, SageConfig(eta=0.0)))
    assert ref.generate(prompts, 24, zero) == plain


def test_a_decisions_auxiliary_path_is_the_masked_answer_step(ref: Any) -> None:
    """A decision is one step: its auxiliary prompts are the pair occluded where the answer step's
    reading puts the mask, and their option logits differ from the main path's."""
    from faithtests.protocols.spdfaith.prompts import YES_NO, same_prompt
    from faithtests.protocols.spdfaith.sage import decision_aux_prompts
    from faithtests.protocols.spdfaith.stimuli import pair_item

    prompts = [same_prompt(*pair_item(2, i).images()) for i in range(3)]
    aux = decision_aux_prompts(ref, prompts, YES_NO, None, SageConfig())
    for p, q in zip(prompts, aux, strict=True):
        assert q.text == p.text and all(np.asarray(x).tolist() != np.asarray(y).tolist()
                                        for x, y in zip(p.images, q.images, strict=True))
    assert (ref.option_logits(aux, YES_NO) - ref.option_logits(prompts, YES_NO)).abs().max() > 1e-3
