"""Running SPD-Faith on a VLM: the only module of this protocol that calls a model (§3, App. B.2, D.3, E).

* :func:`usable` — the records whose two images load (each pair decoded once; a failure is counted by
  kind, the rest go on).
* :func:`run_variant` — every answer one variant gives on the usable pairs:
  - the symmetric questions "Are the two pictures the same?" / "... different?" read from the Yes / No
    logits at the answer position (``decide``: one forward per prompt through the prefix cache), with
    the pre-answer states of every layer for the residual-stream check (App. D.3);
  - the count question, the argmax over :data:`~.prompts.COUNT_WORDS` of the answer-position logits
    (a tie at the top is no count: counted, never guessed);
  - the self-consistency naming prompt filled with the model's own count (App. B.2, DRF: "There are
    {n} differences in the picture. Can you find them?"), greedy, read by the judge. A pair the model
    counts as having no difference gets no naming prompt (there is nothing to find): counted.
* Variants: ``base`` (no hooks) and ``sage`` (§5, App. E): stages 1-2 as hooks on every call, stage 3 as
  contrastive decoding against the same prompt on the pair masked where the model's own step reading
  puts it (``sage.SageStep``: token activation map ∩ attention, every decoding step; decisions are one
  step: the logits combined by ``sage.contrast_logits``; generation: ``Hooks.contrast``).
  ``sage-oracle`` (a diagnostic, recorded, never gated): stage 3's mask from the pair's pixel change
  instead, once per prompt (``sage.oracle_aux_prompts``): handed the edits' location, an upper bound.
* Generated answers (``generated``: why, ``models.letters.generated_by``; a model without option
  log-probabilities, or ``--faith-answer-mode generated``): the Yes / No and count questions answered by
  greedy generation and read by :func:`~.prompts.parse_yes_no` / :func:`~.prompts.parse_count`. P(Yes)
  is then 1 or 0; no states are read; a pair whose reply to either symmetric question is neither Yes
  nor No is counted (:data:`NO_YES_NO`) and left out of the symmetric metrics, as a reply that states
  no count is (:data:`NO_COUNT`) of the count metrics; the coverage rule then decides whether enough
  is left for a verdict. Only ``base`` runs: SAGE steers option logits and attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

import numpy as np
from numpy.typing import NDArray

from faithtests.data.invalid import NONFINITE, Counted
from faithtests.data.load_errors import ImageLoadError
from faithtests.models.capabilities import require
from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import Contrast, Hooks, Prompt, VisionLanguageModel
from faithtests.models.letters import generated_choice
from faithtests.protocols.spdfaith.judge import Judge, Judgement
from faithtests.protocols.spdfaith.prompts import (
    COUNT_WORDS,
    YES_NO,
    count_prompt,
    different_prompt,
    find_prompt,
    parse_count,
    parse_yes_no,
    same_prompt,
)
from faithtests.protocols.spdfaith.records import DiffRecord
from faithtests.protocols.spdfaith.sage import (
    SageConfig,
    contrast_logits,
    decision_aux_prompts,
    oracle_aux_prompts,
    sage_contrast,
    sage_hooks,
)

if TYPE_CHECKING:
    import torch
    from PIL import Image

VARIANTS: Final[tuple[str, ...]] = ("base", "sage", "sage-oracle")
#: Greedy tokens of a naming answer: five claims of the world's grammar take about 50 tokens; a real
#: model's prose needs more room ("First, the red car near the gas station ...").
MAX_NEW_TOKENS: Final = 96
UNREADABLE: Final = "unreadable pair image"
NON_FINITE: Final = NONFINITE  # the one non-finite kind; which outputs broke is the example's detail
COUNT_TIE: Final = "tied top count logits (no count, never guessed)"
NO_NAMING: Final = "counted no difference (no naming prompt asked)"
NO_YES_NO: Final = "reply is neither Yes nor No (counted, never guessed)"
NO_COUNT: Final = "reply states no count (counted, never guessed)"
Pair = tuple["Image.Image", "Image.Image"]


@dataclass
class Usable(Counted):
    """The records whose pair loaded, their decoded pairs, and ``total`` records given."""

    records: list[DiffRecord] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    total: int = 0


def usable(records: Sequence[DiffRecord]) -> Usable:
    out = Usable(total=len(records))
    for r in records:
        try:
            a, b = r.images()
        except (ImageLoadError, OSError) as e:
            out.reject(UNREADABLE, f"{r.item_id}: {e}")
            continue
        out.records.append(r)
        out.pairs.append((a, b))
    return out


@dataclass
class Answers:
    """One variant's answers on the usable records (row i = ``Usable.records[i]``).

    ``p_yes_*`` are P(Yes) of the Yes / No pair (NaN where the logits were not finite); ``states_*`` the
    pre-answer residual states [layers, N, D]; ``count`` the model's count (-1: none); ``replies`` and
    ``judgements`` the naming answers (None where no naming prompt was asked)."""

    variant: str
    p_yes_same: NDArray[np.float64]
    p_yes_diff: NDArray[np.float64]
    states_same: NDArray[np.float32]
    states_diff: NDArray[np.float32]
    count: NDArray[np.int64]
    count_logits: NDArray[np.float64]
    replies: list[str | None]
    judgements: list[Judgement | None]
    counted: Counted
    judge: str
    #: generated answers only: the pairs whose reply to a symmetric question was not read (:data:`NO_YES_NO`)
    no_reply: NDArray[np.bool_] | None = None

    @property
    def answered(self) -> NDArray[np.bool_]:
        """Pairs whose P(Yes) to both questions and pre-answer states are finite (the others are counted
        once as :data:`NON_FINITE` in ``counted``) and, generated, whose replies were both read."""
        ok = (np.isfinite(self.p_yes_same) & np.isfinite(self.p_yes_diff)
              & _finite_states(self.states_same) & _finite_states(self.states_diff))
        return np.asarray(ok if self.no_reply is None else ok & ~self.no_reply, dtype=bool)


def _finite_states(states: NDArray[np.float32]) -> NDArray[np.bool_]:
    """[L, N, D] -> [N]: every value of the pair's states finite."""
    return np.asarray(np.isfinite(states).all(axis=(0, 2)), dtype=bool)


def _numpy(t: torch.Tensor) -> NDArray[np.float64]:
    return np.asarray(t.detach().float().cpu().numpy(), dtype=np.float64)


def p_yes(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(Yes) from [N, 2] logits of ("Yes", "No"): the softmax over the pair; NaN where not finite."""
    ok = np.isfinite(logits).all(axis=1)
    d = np.where(ok, logits[:, 1] - logits[:, 0], 0.0)
    return np.where(ok, 1.0 / (1.0 + np.exp(d)), np.nan)


def argmax_or_tie(logits: NDArray[np.float64]) -> NDArray[np.int64]:
    """Row argmax; -1 where the top value is shared or a logit is not finite."""
    out = np.full(len(logits), -1, dtype=np.int64)
    for i, row in enumerate(logits):
        if np.isfinite(row).all() and (row == row.max()).sum() == 1:
            out[i] = int(row.argmax())
    return out


@dataclass(frozen=True)
class _Plan:
    """How one variant calls the model: hooks on every call, and stage 3's contrast (or none)."""

    hooks: Hooks | None
    cfg: SageConfig | None
    oracle: bool = False

    def aux(
        self, vlm: VisionLanguageModel, prompts: list[Prompt], pairs: Sequence[Pair], options: Sequence[str]
    ) -> list[Prompt] | None:
        """A decision's auxiliary prompts (None: no stage 3)."""
        if self.cfg is None or "generate" not in self.cfg.stages:
            return None
        if self.oracle:
            return oracle_aux_prompts(vlm, prompts, pairs, self.cfg)
        return decision_aux_prompts(vlm, prompts, options, self.hooks, self.cfg)

    def generation_hooks(self, vlm: VisionLanguageModel, prompts: list[Prompt], pairs: Sequence[Pair]
                         ) -> Hooks | None:
        """The hooks of the naming prompts: stage 3 as ``Hooks.contrast`` when on."""
        if self.cfg is None or "generate" not in self.cfg.stages:
            return self.hooks
        if self.oracle:
            aux = oracle_aux_prompts(vlm, prompts, pairs, self.cfg)
            contrast: Contrast = Contrast(tuple(aux), self.cfg.eta, tag=self.cfg.mask_tag(oracle=True))
        else:
            contrast = sage_contrast(prompts, self.cfg)
        return replace(self.hooks or Hooks(), contrast=contrast)


def plan(vlm: VisionLanguageModel, variant: str, cfg: SageConfig | None = None) -> _Plan:
    if variant == "base":
        return _Plan(None, None)
    if variant in ("sage", "sage-oracle"):
        # stage 1 rescales every layer's attention, stage 2 edits FFN updates, stage 3 masks patch-grid
        # cells: a model lacking one (found at its load) makes the variant not applicable, once
        require(vlm, "attention", "residual_hooks", "patch_grid")
        c = cfg or SageConfig()
        return _Plan(sage_hooks(vlm.num_layers, c), c, oracle=variant == "sage-oracle")
    raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")


def _decide(
    vlm: VisionLanguageModel, p: _Plan, prompts: list[Prompt], pairs: Sequence[Pair], options: Sequence[str]
) -> tuple[NDArray[np.float64], NDArray[np.float32]]:
    """Option logits (stage 3 combined when the plan has it) and the main pass's states."""
    d = vlm.decide(prompts, options, p.hooks)
    logits = _numpy(d.logits)
    aux = p.aux(vlm, prompts, pairs, options)
    if aux is not None and p.cfg is not None:
        aux_logits = _numpy(vlm.option_logits(aux, options, p.hooks))
        logits = contrast_logits(logits, aux_logits, p.cfg.eta)
    return logits, np.asarray(d.states.float().cpu().numpy(), dtype=np.float32)


def run_variant(
    vlm: VisionLanguageModel, data: Usable, variant: str, judge: Judge, cfg: SageConfig | None = None,
    generated: str = "",
) -> Answers:
    """Every SPD-Faith answer of ``variant`` on ``data`` (module docstring)."""
    if generated:
        if variant != "base":
            raise NotApplicable(vlm.spec, "logprobs", f"not read: the answers are generated ({generated}), "
                                "and SAGE steers option logits and attention")
        return _generated_answers(vlm, data, judge)
    p = plan(vlm, variant, cfg)
    pairs = data.pairs
    counted = Counted()
    same_logits, states_same = _decide(vlm, p, [same_prompt(a, b) for a, b in pairs], pairs, YES_NO)
    diff_logits, states_diff = _decide(vlm, p, [different_prompt(a, b) for a, b in pairs], pairs, YES_NO)
    ps, pd = p_yes(same_logits), p_yes(diff_logits)
    count_logits, _ = _decide(vlm, p, [count_prompt(a, b) for a, b in pairs], pairs, COUNT_WORDS)
    count = argmax_or_tie(count_logits)
    # one broken pair is counted once, whichever of its outputs the NaN reached (never once per prompt)
    broken: dict[str, NDArray[np.bool_]] = {
        "same": ~np.isfinite(ps), "different": ~np.isfinite(pd),
        "count": np.asarray(~np.isfinite(count_logits).all(axis=1), dtype=bool),
        "states": ~(_finite_states(states_same) & _finite_states(states_diff))}
    for i in np.flatnonzero(np.any(list(broken.values()), axis=0)):
        what = "/".join(k for k, v in broken.items() if v[i])
        counted.reject(NON_FINITE, data.records[i].item_id, detail=f"{what} not finite")
    for i in np.flatnonzero((count < 0) & ~broken["count"]):
        counted.reject(COUNT_TIE, f"{data.records[i].item_id}: count")
    replies, judgements = _named(vlm, data, count, counted, judge, p)
    return Answers(variant, ps, pd, states_same, states_diff, count, count_logits, replies, judgements,
                   counted, judge.name)


def _generated_answers(vlm: VisionLanguageModel, data: Usable, judge: Judge) -> Answers:
    """``base``'s answers by greedy generation (module docstring): indicator P(Yes) and count rows, no
    states, every unread reply counted with the reply itself as its example."""
    pairs, ids = data.pairs, [r.item_id for r in data.records]
    counted = Counted()
    same = generated_choice(vlm, [same_prompt(a, b) for a, b in pairs], YES_NO, parse=parse_yes_no)
    diff = generated_choice(vlm, [different_prompt(a, b) for a, b in pairs], YES_NO, parse=parse_yes_no)
    no_reply = np.asarray(same.unparsed | diff.unparsed)
    for i in np.flatnonzero(no_reply):  # one pair counted once, either reply shown
        shown = same.replies[i] if same.unparsed[i] else diff.replies[i]
        counted.reject(NO_YES_NO, f"{ids[i]}: {shown!r:.60}")
    cnt = generated_choice(vlm, [count_prompt(a, b) for a, b in pairs], COUNT_WORDS, parse=parse_count)
    for i in np.flatnonzero(cnt.unparsed):
        counted.reject(NO_COUNT, f"{ids[i]}: {cnt.replies[i]!r:.60}")
    replies, judgements = _named(vlm, data, cnt.chosen, counted, judge, _Plan(None, None))
    none = np.zeros((0, len(pairs), 0), dtype=np.float32)  # generated: no layer is read
    return Answers("base", same.indicators()[:, 0].astype(np.float64),
                   diff.indicators()[:, 0].astype(np.float64), none, none, cnt.chosen,
                   cnt.indicators().astype(np.float64), replies, judgements, counted,
                   judge.name, no_reply=no_reply)


def _named(vlm: VisionLanguageModel, data: Usable, count: NDArray[np.int64], counted: Counted, judge: Judge,
           p: _Plan) -> tuple[list[str | None], list[Judgement | None]]:
    """The naming prompt for each pair the model counted >= 1 differences in, and its judgement; a pair
    counted as unchanged is noted (:data:`NO_NAMING`)."""
    recs, pairs = data.records, data.pairs
    asked = [i for i in range(len(recs)) if count[i] >= 1]
    for i in np.flatnonzero(count == 0):
        counted.reject(NO_NAMING, recs[i].item_id)
    replies: list[str | None] = [None] * len(recs)
    judgements: list[Judgement | None] = [None] * len(recs)
    if asked:
        prompts = [find_prompt(*pairs[i], int(count[i])) for i in asked]
        hooks = p.generation_hooks(vlm, prompts, [pairs[i] for i in asked])
        for row, text in zip(asked, vlm.generate(prompts, MAX_NEW_TOKENS, hooks), strict=True):
            replies[row] = text
            judgements[row] = judge(text, recs[row])
    return replies, judgements
