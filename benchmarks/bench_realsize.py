"""Benchmark: real-size VLM speed without weights, and the expected suite wall time of 2B and 7B VLMs on GPU.

Models are built with random weights from the public configs in ``benchmarks/configs/`` (the cost of a
forward does not depend on the weights): SmolVLM-256M-Instruct (Idefics3 layout), Qwen2-VL-2B-Instruct,
and open_clip's ViT-B-32 (``pretrained=None``). Inputs are synthetic token ids and pixels with the real
image-token counts:

* SmolVLM-256M: one 512x512 tile (no image splitting) = 1024 SigLIP patches -> pixel shuffle x4 -> 64 tokens;
* Qwen2-VL: a 448x448 image = 32x32 patches of 14 px (1024, temporal patch 2) -> 2x2 merge -> 256 tokens.

Per VLM, one run measures
(a) full forwards/s of a prompt (image + a 20-token question, ``logits_to_keep=1``) at batch 1 and 8;
(b) the prefix-cache ratio for scoring 8 captions of 12 tokens of one image: 8 full forwards (image +
    question + caption; also as one batch-8 forward) vs one prefix forward (image + question, vision tower
    included) whose KV cache is forked to batch 8 (``faithtests.models.prefix.fork_cache``) for the 8
    caption suffixes; the largest logit difference between the two paths is recorded.
For ViT-B/32: images/s and texts/s at batch 32.

Each forward's FLOPs come from the config (2 x parameters x tokens, plus attention and the kept LM-head
positions); the CPU's achieved GFLOP/s per forward is reported beside a plain GEMM's in the same run.
The same FLOP model, with the GPU assumptions in ``GPU`` stated in the result, turns the default run's
workload (counted here from the suites' own workload builders) into an expected wall time per suite for
Qwen2-VL-2B and Qwen2-VL-7B (``configs/qwen2-vl-7b-instruct.json``, never built with weights: its sizes
come from a meta-device build).

    python benchmarks/bench_realsize.py [--threads 2] [--quick] [--device cpu]
        [--out benchmarks/results/realsize.json]

On CPU Qwen2-VL-2B runs fp32 at batch 1 only (a batch-8 forward is ~8 single forwards of ~1-2 min each
on 2 cores: pass ``--qwen-batch8`` to run it anyway); ``--quick`` runs SmolVLM at batch 1 and CLIP only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from _common import environment, write_result

from faithtests.models.prefix import fork_cache

CONFIGS = Path(__file__).resolve().parent / "configs"
QUESTION_TOKENS = 20
CAPTION_TOKENS = 12
CAPTIONS = 8
BATCH = 8
CLIP_BATCH = 32

#: Assumptions of the GPU estimate (no GPU measurement was available when these numbers were written).
GPU: dict[str, Any] = {
    "device": "one NVIDIA H100 SXM 80GB",
    "dtype": "bfloat16",
    "peak_dense_tflops": 989.0,
    "achieved_fraction": 0.40,  # of peak, for HF forwards of >= a few thousand tokens (GEMM-bound)
    "hbm_tb_per_s": 3.35,
    "hbm_fraction": 0.75,  # a forward reads every weight once at least: a floor for small batches
    "overhead_ms_per_layer": 0.3,  # eager-mode kernel launches + Python per transformer block, per call
    "batch_size": 16,  # --faith-batch-size default
}
#: Text lengths of the workload: world captions are counted in words; Qwen2's BPE gives ~1.3 tokens/word
#: on such English captions. Template tokens: Qwen2-VL's chat template (system turn, user turn, vision
#: start/end, assistant turn) around the instruction.
TOKENS_PER_WORD = 1.3
TEMPLATE_TOKENS = 30
CAPTION_END_TOKENS = 2  # <|im_end|> and newline after the caption, in the suffix but not scored


# ------------------------------------------------------------------------------------------- models
@dataclass(frozen=True)
class Arch:
    """The sizes that set a forward's FLOPs."""

    name: str
    family: str
    params_total: int
    vision_params: int  # vision tower, applied per patch
    vision_layers: int
    vision_dim: int
    patches_per_image: int
    connector_params: int  # connector / merger, applied per image token
    image_tokens: int
    lm_params: int  # decoder blocks + final norm, applied per token (no embeddings, no head)
    lm_layers: int
    q_dim: int  # attention heads x head dim
    hidden: int
    vocab: int

    def vision_flops(self, images: int) -> float:
        per = (2 * self.vision_params * self.patches_per_image
               + 4 * self.vision_layers * self.vision_dim * self.patches_per_image**2
               + 2 * self.connector_params * self.image_tokens)
        return float(images * per)

    def lm_flops(self, rows: int, new: int, past: int = 0, kept: int = 1, head: bool = True) -> float:
        body = 2 * self.lm_params * new + 4 * self.lm_layers * self.q_dim * (new * past + new * new / 2)
        return float(rows * (body + (2 * self.hidden * self.vocab * kept if head else 0)))

    def weight_bytes(self, bytes_per_param: int = 2) -> int:
        return self.params_total * bytes_per_param


def load_config(name: str) -> Any:
    from transformers import AutoConfig

    raw = json.loads((CONFIGS / f"{name}.json").read_text(encoding="utf-8"))
    model_type = raw.pop("model_type")
    raw.pop("architectures", None)
    return AutoConfig.for_model(model_type, **raw)


def build(name: str, device: str, dtype: torch.dtype, meta: bool = False) -> tuple[Any, Arch]:
    from transformers import AutoModelForImageTextToText

    auto: Any = AutoModelForImageTextToText  # from_config is untyped
    config = load_config(name)
    if meta:
        with torch.device("meta"):
            model = auto.from_config(config)
    else:
        torch.manual_seed(0)
        model = auto.from_config(config, dtype=dtype).to(device).eval()
    return model, arch_of(name, config, model)


def _count(named: Iterable[tuple[str, torch.nn.Parameter]], keep: Callable[[str], bool]) -> int:
    return sum(p.numel() for n, p in named if keep(n))


def arch_of(name: str, config: Any, model: Any) -> Arch:
    named = list(model.named_parameters())
    text, vision = config.get_text_config(), config.vision_config
    total = sum(p.numel() for _, p in named)
    if config.model_type == "idefics3":
        side = vision.image_size // vision.patch_size
        patches = side * side
        return Arch(
            name, "idefics3", total,
            _count(named, lambda n: ".vision_model." in n and "position_embedding" not in n),
            vision.num_hidden_layers, vision.hidden_size, patches,
            _count(named, lambda n: ".connector." in n), patches // config.scale_factor**2,
            _count(named, lambda n: ".text_model." in n and "embed_tokens" not in n),
            text.num_hidden_layers, text.num_attention_heads * text.head_dim, text.hidden_size,
            text.vocab_size,
        )
    if config.model_type == "qwen2_vl":
        side = 448 // vision.patch_size
        patches = side * side
        return Arch(
            name, "qwen2_vl", total,
            _count(named, lambda n: ".visual." in n and ".merger." not in n),
            vision.depth, vision.embed_dim, patches,
            _count(named, lambda n: ".merger." in n), patches // vision.spatial_merge_size**2,
            _count(named, lambda n: ".language_model." in n and "embed_tokens" not in n),
            text.num_hidden_layers, text.hidden_size, text.hidden_size, text.vocab_size,
        )
    raise ValueError(f"no FLOP model for {config.model_type}")


# ------------------------------------------------------------------------------------------- inputs
def _text(n: int, gen: torch.Generator) -> list[int]:
    return [int(t) for t in torch.randint(100, 40000, (n,), generator=gen)]  # below every special id


def prompt_inputs(model: Any, arch: Arch, rows: int, caption: Sequence[Sequence[int]] | None,
                  gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``rows`` copies of [text, image tokens, question] (+ that row's caption), one image per row."""
    config = model.config
    head, question = _text(5, gen), _text(QUESTION_TOKENS, gen)
    if arch.family == "idefics3":
        image = [config.image_token_id] * arch.image_tokens
        base = [1, *head, *image, *question]
        pixels = {"pixel_values": torch.randn(rows, 1, 3, 512, 512, generator=gen)}
    else:
        image = [config.vision_start_token_id, *[config.image_token_id] * arch.image_tokens,
                 config.vision_end_token_id]
        base = [*head, *image, *question]
        side = math.isqrt(arch.patches_per_image)
        pixels = {"pixel_values": torch.randn(rows * arch.patches_per_image, 3 * 2 * 14 * 14, generator=gen),
                  "image_grid_thw": torch.tensor([[1, side, side]] * rows)}
    ids = torch.tensor([base + (list(caption[r]) if caption is not None else []) for r in range(rows)])
    out = {"input_ids": ids, "attention_mask": torch.ones_like(ids), **pixels}
    if arch.family == "qwen2_vl":
        out["mm_token_type_ids"] = (ids == config.image_token_id).int()
    return out


# ------------------------------------------------------------------------------------------- timing
def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best, out


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def load() -> float:
    return round(os.getloadavg()[0], 2)


def gemm_gflops(device: str, dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    t, _ = timed(lambda: a @ b, repeats)
    return round(2 * n**3 / t / 1e9, 1)


def to(inputs: dict[str, torch.Tensor], device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: v.to(device, dtype=dtype if v.is_floating_point() else v.dtype) for k, v in inputs.items()}


@torch.inference_mode()
def bench_vlm(name: str, device: str, dtype: torch.dtype, repeats: int, batch8: bool,
              serial8: bool) -> dict[str, Any]:
    start = time.perf_counter()
    model, arch = build(name, device, dtype)
    built_s = time.perf_counter() - start
    gen = torch.Generator().manual_seed(0)
    res: dict[str, Any] = {"arch": asdict(arch), "dtype": str(dtype).removeprefix("torch."),
                           "build_seconds": round(built_s, 1), "load_before": load()}

    def forward(inputs: dict[str, torch.Tensor], kept: int, **kw: Any) -> Any:
        return model(**to(inputs, device, dtype), logits_to_keep=kept, **kw)

    # (a) prompt forwards, batch 1 and 8
    one = prompt_inputs(model, arch, 1, None, gen)
    prompt_len = int(one["input_ids"].shape[1])
    res["tokens"] = {"image_tokens_per_image": arch.image_tokens, "prompt": prompt_len,
                     "question": QUESTION_TOKENS, "caption": CAPTION_TOKENS}
    if repeats > 1:
        forward(one, 1, use_cache=False)  # warm-up
    t1, _ = timed(lambda: forward(one, 1, use_cache=False), repeats)
    flops1 = arch.vision_flops(1) + arch.lm_flops(1, prompt_len)
    a: dict[str, Any] = {"batch1": {"seconds": round(t1, 3), "forwards_per_s": round(1 / t1, 3),
                                    "gflop": round(flops1 / 1e9, 1),
                                    "achieved_gflop_per_s": round(flops1 / t1 / 1e9, 1)}}
    if batch8:
        eight = prompt_inputs(model, arch, BATCH, None, gen)
        t8, _ = timed(lambda: forward(eight, 1, use_cache=False), 1)
        flops8 = arch.vision_flops(BATCH) + arch.lm_flops(BATCH, prompt_len)
        a["batch8"] = {"seconds": round(t8, 3), "forwards_per_s": round(BATCH / t8, 3),
                       "gflop": round(flops8 / 1e9, 1), "achieved_gflop_per_s": round(flops8 / t8 / 1e9, 1)}
    else:
        a["batch8"] = {"not_run": "a batch-8 forward is ~8 batch-1 forwards on this CPU; see batch1"}
    res["prompt_forward"] = a

    # (b) 8 captions of one image: full forwards vs one prefix forward + forked cache
    caps = [_text(CAPTION_TOKENS, gen) for _ in range(CAPTIONS)]
    full_in = prompt_inputs(model, arch, CAPTIONS, caps, gen)
    row0 = {k: (v[:1] if k not in ("pixel_values", "image_grid_thw") else v) for k, v in full_in.items()}
    if arch.family == "qwen2_vl":
        row0["pixel_values"] = full_in["pixel_values"][: arch.patches_per_image]
        row0["image_grid_thw"] = full_in["image_grid_thw"][:1]
    else:
        row0["pixel_values"] = full_in["pixel_values"][:1]
    keep = CAPTION_TOKENS + 1  # the last question token predicts the first caption token
    cut = prompt_len - 1  # the prefix stops before the first wanted position (as ForwardRunner.shared)
    t_one, out_one = timed(lambda: forward(row0, keep, use_cache=False), 1)
    full_logits0 = out_one.logits[0, :CAPTION_TOKENS].float()
    flops_row = arch.vision_flops(1) + arch.lm_flops(1, prompt_len + CAPTION_TOKENS, kept=keep)
    b: dict[str, Any] = {"captions": CAPTIONS, "caption_tokens": CAPTION_TOKENS, "prefix_tokens": cut}
    if serial8:
        t_rest, _ = timed(lambda: [forward(row0, keep, use_cache=False) for _ in range(CAPTIONS - 1)], 1)
        b["full_8_serial_seconds"] = round(t_one + t_rest, 3)
        b["full_8_serial"] = "measured: 8 batch-1 forwards"
    else:
        b["full_8_serial_seconds"] = round(CAPTIONS * t_one, 3)
        b["full_8_serial"] = "8 x one measured batch-1 caption forward"
    if batch8:
        t_b8, _ = timed(lambda: forward(full_in, keep, use_cache=False), 1)
        b["full_batch8_seconds"] = round(t_b8, 3)

    prefix_in = {k: (v[:, :cut] if k in ("input_ids", "attention_mask", "mm_token_type_ids") else v)
                 for k, v in row0.items()}
    suffix_ids = full_in["input_ids"][:, cut:]

    def shared() -> Any:
        out = forward(prefix_in, 1, use_cache=True)
        cache = fork_cache(out.past_key_values, CAPTIONS)
        return model(input_ids=suffix_ids.to(device), past_key_values=cache, use_cache=True,
                     logits_to_keep=keep)

    if repeats > 1:
        shared()
    t_shared, out_shared = timed(shared, repeats)
    flops_shared = (arch.vision_flops(1) + arch.lm_flops(1, cut)
                    + arch.lm_flops(CAPTIONS, keep, past=cut, kept=keep))
    b["shared_seconds"] = round(t_shared, 3)
    b["speedup_vs_8_serial"] = round(b["full_8_serial_seconds"] / t_shared, 2)
    if "full_batch8_seconds" in b:
        b["speedup_vs_batch8"] = round(b["full_batch8_seconds"] / t_shared, 2)
    b["flop_ratio"] = round(CAPTIONS * flops_row / flops_shared, 2)
    b["max_abs_logit_diff_row0"] = float((out_shared.logits[0, :CAPTION_TOKENS].float() - full_logits0)
                                         .abs().max())
    res["prefix_cache"] = b
    res["load_after"] = load()
    return res


@torch.inference_mode()
def bench_clip(device: str, dtype: torch.dtype, repeats: int) -> dict[str, Any]:
    import open_clip

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32", pretrained=None).to(device, dtype=dtype).eval()
    vis = sum(p.numel() for n, p in model.named_parameters() if n.startswith("visual."))
    txt = sum(p.numel() for n, p in model.named_parameters()
              if not n.startswith("visual.") and n not in ("token_embedding.weight", "positional_embedding"))
    images = torch.randn(CLIP_BATCH, 3, 224, 224, device=device, dtype=dtype)
    texts = torch.randint(1, 49000, (CLIP_BATCH, 77), device=device)
    model.encode_image(images)
    model.encode_text(texts)
    t_img, _ = timed(lambda: model.encode_image(images), repeats)
    t_txt, _ = timed(lambda: model.encode_text(texts), repeats)
    img_flops = 2 * vis * 50 + 4 * 12 * 768 * 50**2
    txt_flops = 2 * txt * 77 + 4 * 12 * 512 * 77**2
    return {"model": "open_clip ViT-B-32 (pretrained=None)", "batch": CLIP_BATCH,
            "dtype": str(dtype).removeprefix("torch."), "vision_params": vis, "text_params": txt,
            "images_per_s": round(CLIP_BATCH / t_img, 1), "texts_per_s": round(CLIP_BATCH / t_txt, 1),
            "gflop_per_image": round(img_flops / 1e9, 2), "gflop_per_text": round(txt_flops / 1e9, 2),
            "achieved_gflop_per_s": {"image": round(CLIP_BATCH * img_flops / t_img / 1e9, 1),
                                     "text": round(CLIP_BATCH * txt_flops / t_txt / 1e9, 1)},
            "load": load()}


# ------------------------------------------------------------------------------------------- workload
def workload() -> dict[str, Any]:
    """The default run's work for one VLM and one CLIP, from the suites' own workload builders."""
    from PIL import Image

    from faithtests.protocols.lgip.fixtures import WORLD_IMAGES
    from faithtests.protocols.lgip.run import BATCHES_PER_CHUNK
    from faithtests.protocols.lgip.sources import world_workload
    from faithtests.protocols.s3e.fixtures import S3E_WORLD_RECORDS
    from faithtests.protocols.s3e.prompts import PROMPT_SLOTS, record_prompts
    from faithtests.protocols.s3e.stimuli import s3e_records

    wl = world_workload(WORLD_IMAGES, seed=0)
    words = {t: len(t.split()) for p in wl.pairs for t in (p.caption, p.perturbed)}
    subsets = {"invariance": [p for p in wl.pairs if p.family == "paraphrase"],
               "flip_sensitivity": [p for p in wl.pairs if p.family != "paraphrase"],
               "both": list(wl.pairs)}
    out: dict[str, Any] = {"world_images": len(wl.images), "pairs": len(wl.pairs),
                           "mean_caption_words": round(sum(words.values()) / len(words), 1)}
    bs = int(GPU["batch_size"])
    for suite, pairs in subsets.items():
        # the row order of lgip.run._score_each_pair, chunked as it chunks, grouped as
        # prompt_keys.image_groups does
        seen: set[tuple[str, str]] = set()
        batches: list[tuple[int, bool]] = []
        for keys in ([(p.image_id, p.caption) for p in pairs], [(p.image_id, p.perturbed) for p in pairs]):
            todo = [k for k in dict.fromkeys(keys) if k not in seen]
            first = {i: n for n, i in enumerate(dict.fromkeys(i for i, _ in todo))}
            todo.sort(key=lambda k: first[k[0]])
            seen.update(todo)
            for s in range(0, len(todo), bs * BATCHES_PER_CHUNK):
                chunk = todo[s:s + bs * BATCHES_PER_CHUNK]
                by_image: dict[str, int] = {}
                for image_id, _ in chunk:
                    by_image[image_id] = by_image.get(image_id, 0) + 1
                singles = 0
                for n in by_image.values():
                    for r in range(0, n, bs):
                        k = min(bs, n - r)
                        if k > 1:
                            batches.append((k, True))
                        else:
                            singles += 1
                batches += [(min(bs, singles - r), False) for r in range(0, singles, bs)]
        flip_texts = {t for p in pairs if p.family != "paraphrase" for t in (p.caption, p.perturbed)}
        texts = {t for p in pairs for t in (p.caption, p.perturbed)}
        out[suite] = {"images": len({p.image_id for p in pairs}), "caption_rows": len(seen),
                      "shared_batches": [k for k, s in batches if s], "full_batches": [k for k, s in batches
                                                                                       if not s],
                      "text_embeddings": len(flip_texts), "clip_texts": len(texts)}
    tiny = Image.new("RGB", (8, 8))
    world = s3e_records(S3E_WORLD_RECORDS, seed=0)
    prompts = [record_prompts(w.record, tiny) for w in world]
    lens = [[len(p.text.split()) for p in ps] for ps in prompts]
    common = [_shared_words([p.text.split() for p in ps]) for ps in prompts]
    out["s3e"] = {"records": len(world), "prompts_per_record": len(PROMPT_SLOTS),
                  "prompts": sum(len(ps) for ps in prompts),
                  "mean_prompt_words": round(sum(sum(x) for x in lens) / sum(len(x) for x in lens), 1),
                  "mean_shared_words": round(sum(common) / len(common), 1)}
    for key in ("shared_batches", "full_batches"):
        for suite in subsets:
            v = out[suite][key]
            out[suite][key] = {"count": len(v), "rows": sum(v)}
            out[suite][f"_{key}"] = v
    return out


def _shared_words(rows: Sequence[Sequence[str]]) -> int:
    n = 0
    while all(len(r) > n for r in rows) and len({r[n] for r in rows}) == 1:
        n += 1
    return n


def gpu_seconds(flops: float, arch: Arch, layers: int) -> float:
    compute = flops / (GPU["peak_dense_tflops"] * GPU["achieved_fraction"] * 1e12)
    weights = arch.weight_bytes() / (GPU["hbm_tb_per_s"] * GPU["hbm_fraction"] * 1e12)
    return float(max(compute, weights) + layers * GPU["overhead_ms_per_layer"] / 1000)


def suite_estimates(arch: Arch, wl: dict[str, Any]) -> dict[str, Any]:
    """Expected GPU seconds of each suite's model work for one VLM (as scorer for 1 / 2a, A/B for 2b)."""
    cap = round(wl["mean_caption_words"] * TOKENS_PER_WORD)
    prefix = arch.image_tokens + TEMPLATE_TOKENS
    suffix = cap + CAPTION_END_TOKENS
    layers_full = arch.vision_layers + arch.lm_layers
    out: dict[str, Any] = {}
    for suite in ("invariance", "flip_sensitivity", "both"):
        w = wl[suite]
        t = 0.0
        for k in w["_shared_batches"]:
            t += gpu_seconds(arch.vision_flops(1) + arch.lm_flops(1, prefix), arch, layers_full)
            t += gpu_seconds(arch.lm_flops(k, suffix, past=prefix, kept=cap), arch, arch.lm_layers)
        for k in w["_full_batches"]:
            t += gpu_seconds(arch.vision_flops(k) + arch.lm_flops(k, prefix + suffix, kept=cap), arch,
                             layers_full)
        if suite != "invariance":  # flip strength: text embeddings through the decoder, batch 16
            n = w["text_embeddings"]
            for s in range(0, n, int(GPU["batch_size"])):
                k = min(int(GPU["batch_size"]), n - s)
                t += gpu_seconds(arch.lm_flops(k, cap, head=False), arch, arch.lm_layers)
        out[suite] = round(t, 1)
    s3e = wl["s3e"]
    shared = round(s3e["mean_shared_words"] * TOKENS_PER_WORD) + TEMPLATE_TOKENS + arch.image_tokens
    rest = round((s3e["mean_prompt_words"] - s3e["mean_shared_words"]) * TOKENS_PER_WORD) + 5
    per_record = (gpu_seconds(arch.vision_flops(1) + arch.lm_flops(1, shared), arch, layers_full)
                  + gpu_seconds(arch.lm_flops(s3e["prompts_per_record"], rest, past=shared), arch,
                                arch.lm_layers))
    out["s3e_forced_choice"] = round(s3e["records"] * per_record, 1)
    out["default_run_total"] = round(out["both"] + out["s3e_forced_choice"], 1)
    return out


def clip_estimate(clip: dict[str, Any], wl: dict[str, Any]) -> dict[str, Any]:
    """ViT-B/32 as the scorer of suites 1 / 2a: GPU seconds from FLOPs, and this CPU's from its rates."""
    bs = int(GPU["batch_size"])
    rate = GPU["peak_dense_tflops"] * GPU["achieved_fraction"] * 1e12
    out: dict[str, Any] = {}
    for suite in ("invariance", "flip_sensitivity", "both"):
        w = wl[suite]
        n_img, n_txt = w["images"], w["clip_texts"]
        calls = math.ceil(n_img / bs) + math.ceil(n_txt / bs)
        flops = n_img * clip["gflop_per_image"] * 1e9 + n_txt * clip["gflop_per_text"] * 1e9
        overhead = calls * 12 * GPU["overhead_ms_per_layer"] / 1000
        out[suite] = {"gpu_seconds": round(flops / rate + overhead, 2),
                      "cpu_seconds_measured_rates": round(n_img / clip["images_per_s"]
                                                          + n_txt / clip["texts_per_s"], 1)}
    return out


def markdown(est: dict[str, dict[str, Any]], clip_est: dict[str, Any]) -> str:
    names = {"invariance": "1 invariance (VLM as scorer)",
             "flip_sensitivity": "2a flip sensitivity (VLM as scorer)",
             "s3e_forced_choice": "2b forced choice (S3E)",
             "default_run_total": "default `pytest suites/` (all)"}
    lines = ["| suite | Qwen2-VL-2B | Qwen2-VL-7B |", "|---|---|---|"]
    for key, label in names.items():
        lines.append(f"| {label} | {_fmt(est['qwen2-vl-2b'][key])} | {_fmt(est['qwen2-vl-7b'][key])} |")
    clip = _fmt(clip_est["both"]["gpu_seconds"])
    lines.append(f"| 1 + 2a on a ViT-B/32 CLIP (`--faith-model`) | {clip} | |")
    return "\n".join(lines)


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


# ------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    parser.add_argument("--quick", action="store_true",
                        help="SmolVLM-256M at batch 1 and CLIP only, one repeat")
    parser.add_argument("--qwen-batch8", action="store_true", help="also run Qwen2-VL-2B at batch 8 on CPU")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "realsize.json"))
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    cuda = args.device.startswith("cuda")
    dtype = getattr(torch, args.dtype or ("bfloat16" if cuda else "float32"))
    started = time.perf_counter()
    env_before = environment()
    repeats = 1 if args.quick else 2
    result: dict[str, Any] = {
        "benchmark": "realsize", "device": args.device, "threads": args.threads,
        "gemm_gflop_per_s": {"float32": gemm_gflops(args.device, torch.float32),
                             "bfloat16": gemm_gflops(args.device, torch.bfloat16)},
        "inputs": {"smolvlm-256m": "one 512x512 tile, no splitting: 1024 patches -> 64 image tokens",
                   "qwen2-vl-2b": "448x448: 1024 patches of 14 px -> 256 image tokens",
                   "text": f"5 head tokens + image + {QUESTION_TOKENS}-token question; "
                           f"{CAPTIONS} captions of {CAPTION_TOKENS} tokens"},
        "models": {},
    }
    result["models"]["smolvlm-256m"] = bench_vlm("smolvlm-256m-instruct", args.device, dtype, repeats,
                                                 batch8=not args.quick, serial8=not args.quick)
    result["clip_vit_b32"] = bench_clip(args.device, dtype, repeats)
    if not args.quick:
        full = cuda or args.qwen_batch8
        result["models"]["qwen2-vl-2b"] = bench_vlm("qwen2-vl-2b-instruct", args.device, dtype,
                                                    2 if cuda else 1, batch8=full, serial8=cuda)

    wl = workload()
    archs = {"qwen2-vl-2b": build("qwen2-vl-2b-instruct", "meta", dtype, meta=True)[1],
             "qwen2-vl-7b": build("qwen2-vl-7b-instruct", "meta", dtype, meta=True)[1]}
    est = {k: suite_estimates(a, wl) for k, a in archs.items()}
    clip_est = clip_estimate(result["clip_vit_b32"], wl)
    result["workload"] = {k: ({kk: vv for kk, vv in v.items() if not kk.startswith("_")}
                              if isinstance(v, dict) else v) for k, v in wl.items()}
    result["gpu_assumptions"] = {**GPU, "tokens_per_word": TOKENS_PER_WORD,
                                 "template_tokens": TEMPLATE_TOKENS,
                                 "image": "448x448 -> 256 image tokens per image (Qwen2-VL)",
                                 "model": "t = max(FLOPs / (peak x achieved_fraction), weight bytes / "
                                          "(HBM x hbm_fraction)) + layers x overhead_ms_per_layer, per call"}
    result["gpu_estimate_seconds"] = {**est, "clip_vit_b32": clip_est}
    result["estimate_table"] = markdown(est, clip_est)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["environment_before"] = env_before
    result.update(environment())
    write_result(result, args.out)
    print(result["estimate_table"])


if __name__ == "__main__":
    main()
