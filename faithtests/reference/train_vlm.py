"""Train the reference VLMs (``vlm`` and its degraded twins) as Hugging Face LLaVA checkpoints.

Architecture: ``LlavaForConditionalGeneration`` with a tiny CLIP vision tower (96 px, patch 16 -> 36
image tokens, 3 layers, width 96) and a tiny Llama (6 layers, width 128, tied embeddings), a word-level
``PreTrainedTokenizerFast`` over the world vocabulary (case kept; ``<image>`` special) and a
``LlavaProcessor`` whose chat template renders ``USER: <image> ... text ASSISTANT:``. Everything loads
with ``AutoModelForImageTextToText`` / ``AutoProcessor`` from the directory, like a user's checkpoint.

Recipe of ``vlm`` (seeded; :data:`VLM_PHASES`):
1. vision warm-up (500 steps, lr 1e-3): each patch token of the tower predicts the colour, shape, size
   of the object in its patch and the patch's position slot (:mod:`faithtests.reference.warmup`);
2. the projector starts as that readout (:func:`seed_projector`) and the attribute words' embeddings
   get the matching image-token units (:func:`align_word_embeddings`); the tower is then frozen (as in
   LLaVA's stages);
3. next-token cross-entropy on the answer tokens (+ end of sequence), batch 24 in two length-sorted
   micro-batches, AdamW, one-cycle schedule, plus training-only objectives: in-context captioning of
   the true caption of A/B and verification prompts (weight 0.5) and dense truth targets read by
   linear heads that are not saved (:func:`train_vlm`): per noun and per clause of a quoted caption,
   and (``extra_targets``) on a premise question's premise and per patch of an image pair's second image;
4. phases (:data:`VLM_PHASES`): the caption decisions alone (A/B in both orders, verification), then
   the multi-task mixtures of :mod:`faithtests.reference.vlm_tasks` (A/B, verification, slot questions,
   captioning, premise questions with rejection, mood, same/different, difference counting and naming)
   with the lagging tasks weighted up phase by phase; the last (:data:`LAYOUT_PHASE`) moves AC-Bench's
   emotion prompt to App. C.3's layout and adds its tokens to the tokenizer.
Twins are fine-tuned from ``vlm`` for ``TWIN_STEPS`` steps on the full mixture with another answer
policy (``textbiased``, ``positionbiased``, ``sameprior``, ``diffblind``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoProcessor,
    CLIPImageProcessor,
    CLIPVisionConfig,
    LlamaConfig,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
)

from faithtests.reference.tokenizer import add_layout_tokens, build_tokenizer
from faithtests.reference.vlm_encode import IMAGE_TOKENS, approx_len, encode
from faithtests.reference.vlm_progress import quick_ab, quick_mood, quick_premise
from faithtests.reference.vlm_tasks import sample_example
from faithtests.reference.warmup import READOUTS, dense_warmup, make_heads, readout_unit
from faithtests.world.captions import PLURAL, SYNONYMS
from faithtests.world.examples import Example
from faithtests.world.patches import PATCH
from faithtests.world.scene import CANVAS, SIZES

TWIN_STEPS = 300  # fine-tuning steps of a degraded twin from the vlm checkpoint
#: Vision warm-up learning rate: at 3e-3 (the CLIP recipe's) this tower's per-patch loss fell to ~1.6,
#: then diverged (9.9 after 500 steps); at 1e-3 it reaches 0.02 in 300 steps.
VISION_LR = 1e-3
#: Residual streams (index into ``hidden_states``: 0 = embeddings) read by the clause-truth head and by
#: the noun head (one look at the image: early).
TRUTH_LAYER = 4
NOUN_LAYER = 2
#: ... and by the patch-difference head (second image of a pair: does this patch differ from the first's).
PATCH_LAYER = 3
#: ... and by the option head (premise questions, phase 7: is this displayed option true of the image).
OPTION_LAYER = 5
#: Training phases of ``vlm``: the first from scratch, each next one resumes the previous checkpoint on a
#: fresh data stream (seed + k). The caption decisions come first and alone ("decision": A/B and
#: verification with their clause and noun targets): mixed with the other tasks from step 0, the
#: per-clause check was not learnt in 4,000 steps (targets at their base rate, A/B at chance), while
#: alone it starts to form within 600. Then every other task joins ("focus" mixture); after it A/B was
#: at 0.96 strict-correct but premise questions were always answered "E" and same/different always
#: "different", so a phase weights those tasks up ("rest"), without the clause/noun targets (their
#: heads are not carried across phases, and fresh ones would pull on the decision states). Mood was then
#: solved, but premise questions still got "E" and pairs "different": the last phase adds dense targets
#: for them (premise truth on the premise's last word, per-patch difference on the second image) and
#: same/different was learnt within 1,500 steps. That phase turns the clause/noun heads back on with fresh
#: weights on purpose: the A/B accuracy dipped for about 500 steps and came back (validation strict 0.84
#: -> 0.98), and the premise and patch targets need the same residual streams. Standard premise questions
#: were then still at 0.235 (chance 1/6): a last phase gives premise questions half of the batch
#: ("premise" mixture) and lifts them to 0.39 (misleading ones rejected at 0.83). Under the suite's
#: shuffles of all six options that was 0.24 (the model said E to 53% of standard questions, as training
#: showed half of the questions in the fixed order, E fifth): phase 7 shuffles every premise question
#: and adds a per-option target (is this option true of the image) on each option's last token.
#: Phase 8 (issue 30): AC-Bench's emotion prompt moved to App. C.3's layout (the description between
#: "IMAGE + DESCRIPTION:" and "Question:", in ``<desc_start>`` / triple quotes / ``<desc_end>``; the
#: tokenizer gains the markers, the embeddings two rows). Phase 7's mixture with mood weighted up and
#: premise questions half in the fixed order ("layout"; shuffled-only at lr 1e-3, fixed-order standard
#: questions fell from 0.745 to 0.605, "E" to 0.185 of them); no clause/noun/option heads (fresh ones
#: made A/B dip for ~500 steps in phase 5, longer than this phase), so only the answers are trained.
LAYOUT_PHASE: dict[str, Any] = {"steps": 150, "lr": 5e-4, "mixture": "layout", "truth_weight": 0.0,
                                "eval_every": 75}
VLM_PHASES: tuple[dict[str, Any], ...] = (
    {"steps": 600, "mixture": "decision", "grounding_frac": 0.0, "align_scale": 0.5},
    {"steps": 2000, "lr": 1e-3, "mixture": "decision"},
    {"steps": 3000, "lr": 1e-3, "mixture": "focus"},
    {"steps": 4000, "lr": 1e-3, "mixture": "rest", "truth_weight": 0.0},
    {"steps": 4000, "lr": 1e-3, "mixture": "rest", "extra_targets": True},
    {"steps": 4000, "lr": 1e-3, "mixture": "premise", "extra_targets": True},
    {"steps": 3000, "lr": 1e-3, "mixture": "premise_shuffled", "extra_targets": True},
    LAYOUT_PHASE,
)
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}USER:"
    "{%- elif message['role'] == 'assistant' -%}ASSISTANT:"
    "{%- else -%}SYSTEM:{%- endif -%}"
    "{%- if message['content'] is string %} {{ message['content'] }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' %} <image>"
    "{%- elif item['type'] == 'text' %} {{ item['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' %}</s>{%- endif %}\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}ASSISTANT:{%- endif -%}"
)
IMAGE_MEAN = [0.5, 0.5, 0.5]
IMAGE_STD = [0.25, 0.25, 0.25]


def build_processor() -> Any:
    tok = build_tokenizer(lowercase=False, add_bos_eos=False)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    add_layout_tokens(tok)
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": CANVAS}, crop_size={"height": CANVAS, "width": CANVAS},
        image_mean=IMAGE_MEAN, image_std=IMAGE_STD, do_convert_rgb=True,
    )
    return LlavaProcessor(  # type: ignore[no-untyped-call]
        image_processor=image_processor, tokenizer=tok, patch_size=PATCH,
        vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE, image_token="<image>",
        num_additional_image_tokens=1,
    )


def load_processor(path: Path) -> Any:
    return AutoProcessor.from_pretrained(str(path), local_files_only=True)  # type: ignore[no-untyped-call]


def build_model(processor: Any, seed: int) -> Any:
    tok = processor.tokenizer
    vision = CLIPVisionConfig(
        hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
        image_size=CANVAS, patch_size=PATCH, hidden_act="gelu", projection_dim=96,
    )
    text = LlamaConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=6,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id,
        tie_word_embeddings=True,
    )
    cfg = LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=processor.image_token_id,
        image_seq_length=IMAGE_TOKENS, vision_feature_layer=-1, vision_feature_select_strategy="default",
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


def seed_projector(model: Any, heads: Any) -> None:
    """Start the projector as the warm-up's attribute readout: image token = GELU(attribute logits).

    The tower's tokens hold shape in low-variance directions; with a randomly initialised projector the
    LM learnt size, colour and position but never shape (per-token loss on shape words stayed at ln 4
    after 2,500 steps). Here the projector's first layer is the warm-up's linear readouts (colour,
    shape, size, slot logits), its other units start at zero, and the second layer passes the readouts
    through unchanged: image tokens start as clean attribute codes, and everything stays trainable.
    """

    lin1 = model.model.multi_modal_projector.linear_1
    lin2 = model.model.multi_modal_projector.linear_2
    w = torch.cat([h.weight for h in heads])
    b = torch.cat([h.bias for h in heads])
    k = w.shape[0]
    if k > min(lin1.out_features, lin2.out_features):
        raise ValueError(f"projector has {lin1.out_features} units, the readout needs {k}")
    with torch.no_grad():
        lin1.weight.zero_()
        lin1.bias.zero_()
        lin1.weight[:k] = w
        lin1.bias[:k] = b
        lin2.weight.zero_()
        lin2.bias.zero_()
        lin2.weight[:k, :k] = torch.eye(k)


def align_word_embeddings(model: Any, tokenizer: Any, scale: float = 0.5) -> list[str]:
    """Give each attribute word the image-token unit of its attribute (after :func:`seed_projector`).

    Image tokens start as GELU(readout logits): one large unit per attribute of the patch (colour,
    shape, size, position slot). Adding ``scale`` times that unit to the embedding of "red", "circle",
    "circles", "large", "big", "left", "middle", ... makes a caption word and the patches that show it
    similar from step 0, so matching a caption against the image is a dot product the LM can use at
    once instead of a code it must discover from one answer bit per prompt. Everything stays trainable.
    Returns the words aligned.
    """


    # every surface form of a value: plurals of shapes, the synonyms of sizes and of "center"
    forms = {**{sh: (pl,) for sh, pl in PLURAL.items()}, **{sz: (SYNONYMS[sz],) for sz in SIZES},
             "center": ("middle",)}
    words: dict[str, int] = {}
    for attribute, values in READOUTS:
        for value in values:
            for word in (value, *forms.get(value, ())):
                words[word] = readout_unit(attribute, value)
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        for w, unit in words.items():
            tid = tokenizer.convert_tokens_to_ids(w)
            if tid is None or tid == tokenizer.unk_token_id:
                raise KeyError(f"attribute word {w!r} is not in the tokenizer")
            emb[tid, unit] += scale
    return sorted(words)


def _token_losses(logits: Any, labels: Any) -> tuple[Any, Any]:
    """Per-example mean next-token loss over labelled positions, and whether a row has any label."""

    tgt = labels[:, 1:]
    per_tok = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none", ignore_index=-100
    ).view(tgt.shape)
    mask = (tgt != -100).float()
    count = mask.sum(1)
    return (per_tok * mask).sum(1) / count.clamp(min=1), count > 0


def store_half(path: Path) -> None:
    """Re-save a finished checkpoint with float16 weights: ``vlm`` has 1.36 M parameters, 5.5 MB in
    float32 against the 5 MB budget of a committed fixture. Loaders cast back to the dtype asked for
    (``--faith-dtype``, float32 by default); the model cards are measured on the stored weights."""

    model: Any = LlavaForConditionalGeneration.from_pretrained(str(path), local_files_only=True,
                                                               dtype=torch.float32)
    model.half().save_pretrained(str(path))


def _vocab_of(path: Path) -> int:
    return int(json.loads((path / "config.json").read_text())["text_config"]["vocab_size"])


def _fresh_model(processor: Any, seed: int, rng: np.random.Generator, vision_steps: int,
                 align_scale: float, log: bool) -> Any:
    """A new LLaVA whose vision tower is warmed up on the patch readouts and whose projector (and, with
    ``align_scale``, attribute word embeddings) start from that readout."""
    model = build_model(processor, seed)
    t_v = time.time()
    tower = model.model.vision_tower
    heads = make_heads(tower.config.hidden_size, slots=True)
    v_losses = dense_warmup(
        lambda pix: tower(pixel_values=pix).last_hidden_state[:, 1:],  # LLaVA "default" drops CLS
        lambda ims: processor.image_processor(ims, return_tensors="pt")["pixel_values"],
        heads, list(tower.parameters()), rng, vision_steps, lr=VISION_LR,
    )
    if vision_steps >= 200 and np.mean(v_losses[-20:]) > 0.25:
        # a tower that cannot read its patches makes every later step wasted: stop here
        raise RuntimeError(f"vision warm-up did not converge (loss {np.mean(v_losses[-20:]):.3f} after "
                           f"{vision_steps} steps at lr {VISION_LR})")
    seed_projector(model, heads)
    if align_scale > 0:
        align_word_embeddings(model, processor.tokenizer, align_scale)
    if log:
        print(f"vision pretraining {vision_steps} steps {time.time() - t_v:.0f}s "
              f"loss {np.mean(v_losses[:10]):.2f} -> {np.mean(v_losses[-10:]):.3f}", flush=True)
    return model


def _resumed_model(processor: Any, init_from: Path) -> Any:
    """``init_from`` in float32 whatever the stored dtype (a committed checkpoint is stored in float16,
    :func:`store_half`); a checkpoint from before the App. C.3 layout gains its tokens' embedding rows."""
    model = LlavaForConditionalGeneration.from_pretrained(str(init_from), local_files_only=True,
                                                          dtype=torch.float32)
    if add_layout_tokens(processor.tokenizer):
        model.resize_token_embeddings(len(processor.tokenizer))
    return model


#: The training-only truth heads: (loss name, target key of :func:`encode`, residual stream read).
AUX_HEADS: tuple[tuple[str, str, int], ...] = (
    ("clause_aux", "truth_labels", TRUTH_LAYER), ("noun_aux", "noun_labels", NOUN_LAYER),
    ("patch_aux", "patch_labels", PATCH_LAYER), ("option_aux", "option_labels", OPTION_LAYER),
)


def _part_loss(model: Any, processor: Any, part: list[Example], heads: Any, batch: int,
               weights: dict[str, float], extra_targets: bool, losses: dict[str, list[float]]) -> None:
    """Forward and backward one micro-batch (its losses scaled to the whole batch); logs into ``losses``."""
    inputs = encode(processor, part, extra_targets)
    labels = inputs.pop("labels")
    context_labels = inputs.pop("context_labels")
    targets = {key: inputs.pop(key) for _, key, _ in AUX_HEADS}
    out = model(**inputs, output_hidden_states=weights["truth"] > 0)
    logits = out.logits[:, :-1]
    per_ex, _ = _token_losses(logits, labels)  # every example weighs the same, long or short
    loss = per_ex.sum() / batch
    if weights["context"] > 0:
        ctx, has = _token_losses(logits, context_labels)
        loss = loss + weights["context"] * (ctx * has).sum() / batch
    for (name, key, layer), head in zip(AUX_HEADS, heads, strict=True):
        keep = targets[key] >= 0
        if weights["truth"] <= 0 or not bool(keep.any()):
            continue
        z = head(out.hidden_states[layer]).squeeze(-1)[keep]
        bce = torch.nn.functional.binary_cross_entropy_with_logits(z, targets[key][keep].float())
        loss = loss + weights["truth"] * bce * len(part) / batch
        losses.setdefault(name, []).append(float(bce.detach()))
    loss.backward()
    for ex, v in zip(part, per_ex.detach().tolist(), strict=True):
        losses.setdefault(ex.task, []).append(float(v))


def _examples(rng: np.random.Generator, policy: str, stage: str, batch: int) -> list[list[Example]]:
    """One batch in two length-sorted micro-batches: prompts range from ~60 to ~200 tokens, so padding a
    mixed batch to its longest row would waste about a third of the compute."""
    examples = [sample_example(rng, policy, stage) for _ in range(batch)]
    order = sorted(range(batch), key=lambda i: approx_len(examples[i]))
    return [[examples[i] for i in chunk] for chunk in (order[: batch // 2], order[batch // 2:])]


def _validate(model: Any, processor: Any, mixture: str, step: int) -> dict[str, float]:
    extra = quick_premise(model, processor) if mixture.startswith("premise") else (
        quick_mood(model, processor) if mixture == "layout" else {})
    return {"step": step + 1, **quick_ab(model, processor), **extra}


def _log_step(log: bool, step: int, steps: int, t0: float, losses: dict[str, list[float]]) -> None:
    """Every 50 steps and at the last: the mean of each loss over its last 100 values."""
    if not log or (step % 50 != 0 and step != steps - 1):
        return
    summary = " ".join(f"{k}={np.mean(v[-100:]):.2f}" for k, v in sorted(losses.items()))
    print(f"step {step:4d} {time.time() - t0:5.0f}s {summary}", flush=True)


def _origin(init_from: Path | None, vision_steps: int, grounding_frac: float,
            align_scale: float) -> dict[str, Any]:
    """The metadata fields that depend on training from scratch or fine-tuning ``init_from``."""
    fresh = init_from is None
    return {"init_from": None if init_from is None else init_from.name,
            "vision_pretrain_steps": vision_steps if fresh else 0,
            "grounding_frac": grounding_frac if fresh else 0.0, "align_scale": align_scale if fresh else 0.0}


def _outcome(model: Any, t0: float, losses: dict[str, list[float]]) -> dict[str, Any]:
    return {"train_seconds": round(time.time() - t0, 1), "torch_threads": torch.get_num_threads(),
            "params": int(sum(p.numel() for p in model.parameters())),
            "final_loss_per_task": {k: round(float(np.mean(v[-100:])), 4) for k, v in losses.items()}}


def _save(model: Any, processor: Any, out_dir: Path, init_from: Path | None) -> None:
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir))
    if init_from is None:
        processor.save_pretrained(str(out_dir))
        return
    # byte-identical processor files (a re-save through transformers adds default fields) ...
    grown = len(processor.tokenizer) != _vocab_of(init_from)
    for f in init_from.iterdir():
        if f.is_file() and f.name not in ("model.safetensors", "config.json", "generation_config.json",
                                          "training.json", "heldout.json"):
            shutil.copyfile(f, out_dir / f.name)
    if grown:  # ... except the tokenizer when it gained the layout tokens
        processor.tokenizer.save_pretrained(str(out_dir))


def train_vlm(out_dir: Path, seed: int, policy: str = "faithful", steps: int = 4000, batch: int = 24,
              lr: float = 1.5e-3, init_from: Path | None = None, vision_steps: int = 500,
              grounding_frac: float = 0.25, context_weight: float = 0.5, truth_weight: float = 1.0,
              align_scale: float = 0.0, extra_targets: bool = False, mixture: str = "full",
              eval_every: int = 250,
              log: bool = True) -> dict[str, Any]:
    """Train (or fine-tune ``init_from``) and save a checkpoint directory; returns training metadata.

    ``truth_weight`` weighs the auxiliary truth losses: linear heads (used in training only, not saved)
    on the residual stream predict, at each clause end of a quoted caption, whether the caption is still
    true there (after :data:`TRUTH_LAYER`) and, at each noun, whether such an object exists (after
    :data:`NOUN_LAYER`). Without them the A/B and verification answers are one bit per prompt and the
    LM never learnt to check a caption (verification 0.58, A/B at chance with a position bias); the
    dense targets teach the check, and the layers above only have to route the two captions' final
    flags to the answer. ``extra_targets`` adds the same kind of target to premise questions (on the
    premise's last word) and a per-patch difference target on the second image of a pair (after
    :data:`PATCH_LAYER`).
    """
    t0 = time.time()
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 11])
    # a fine-tune keeps its checkpoint's tokenizer: a fresh one is built from the current world texts
    # (prompt module strings included), whose word order may have moved since that checkpoint was trained
    processor = build_processor() if init_from is None else load_processor(init_from)
    model = (_fresh_model(processor, seed, rng, vision_steps, align_scale, log) if init_from is None
             else _resumed_model(processor, init_from))
    # Like LLaVA, the (warmed-up) vision tower stays frozen while the projector and LM learn.
    for p in model.model.vision_tower.parameters():
        p.requires_grad_(False)
    width = model.config.text_config.hidden_size
    heads = [torch.nn.Linear(width, 1) for _ in AUX_HEADS]  # clause, noun, patch, option
    trainable = [p for p in model.parameters() if p.requires_grad] + [
        p for head in heads for p in head.parameters()]
    opt = torch.optim.AdamW(trainable, lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    weights = {"context": context_weight, "truth": truth_weight}
    model.train()
    losses: dict[str, list[float]] = {}
    progress: list[dict[str, float]] = []
    for step in range(steps):
        stage = "grounding" if init_from is None and step < grounding_frac * steps else mixture
        opt.zero_grad()
        for part in _examples(rng, policy, stage, batch):
            _part_loss(model, processor, part, heads, batch, weights, extra_targets, losses)
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sched.step()
        _log_step(log, step, steps, t0, losses)
        if eval_every and ((step + 1) % eval_every == 0 or step == steps - 1):
            progress.append(_validate(model, processor, mixture, step))
            if log:
                print(f"validation {progress[-1]}", flush=True)
    _save(model, processor, out_dir, init_from)
    origin = _origin(init_from, vision_steps, grounding_frac, align_scale)
    meta = {  # key order as in the committed checkpoints' training.json
        "policy": policy, "seed": seed, "steps": steps, "batch": batch, "lr": lr,
        **{k: origin[k] for k in ("init_from", "vision_pretrain_steps", "grounding_frac")},
        "context_weight": context_weight, "truth_weight": truth_weight, "truth_layer": TRUTH_LAYER,
        "noun_layer": NOUN_LAYER, "patch_layer": PATCH_LAYER, "option_layer": OPTION_LAYER,
        "extra_targets": extra_targets, "mixture": mixture, "align_scale": origin["align_scale"],
        **_outcome(model, t0, losses), "validation_ab": progress,
    }
    (out_dir / "training.json").write_text(json.dumps(meta, indent=2))
    return meta
