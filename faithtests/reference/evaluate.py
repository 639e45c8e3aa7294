"""Held-out accuracy of the reference checkpoints, per task (the numbers in fixtures/README.md).

Models are loaded only through the public loader ``faithtests.load_model("reference:NAME")``, the path
a user's checkpoint takes. Held-out items come from the generators'
per-item streams under ``EVAL_SEED``; training draws from its own streams (``default_rng([seed, k])``),
never from these.

Usage: ``python -m faithtests.reference.evaluate NAME [--n N] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import faithtests
from faithtests.models.locations import fixtures_root
from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.reference.evaluate_vlm import vlm_report
from faithtests.world.captions import render_caption, scene_spec
from faithtests.world.foils import FLIP_KINDS, flip_spec
from faithtests.world.ids import item_rng
from faithtests.world.items import caption_items
from faithtests.world.render import render
from faithtests.world.scene import sample_scene

EVAL_SEED = 1_000_003
CLIP_NAMES = ("clip", "clip-colorblind")


def load_reference(name: str) -> Any:
    """``faithtests.load_model("reference:NAME")``."""
    return faithtests.load_model(f"reference:{name}")


def clip_report(scorer: Any, n: int = 200, seed: int = EVAL_SEED) -> dict[str, float]:
    """Flip pass rate PR = mean 1{s(I,c) > s(I,c_flip)} (LGIP Eq. 5) per world flip kind, on verified
    flips of the canonical caption (no background), and template invariance E_inv = mean |s(I,c) -
    s(I,t(c))| over LGIP's nine simple templates (LGIP Eq. 2)."""
    items = caption_items(n, seed)
    images, pos_texts, flip_texts, kinds = [], [], [], []
    inv_images, inv_a, inv_b = [], [], []
    for i, it in enumerate(items):
        rng = item_rng("eval-clip", seed, i)
        img = render(it.scene)
        spec = scene_spec(it.scene, with_background=False)
        c = render_caption(spec)
        for kind in FLIP_KINDS:
            foil = flip_spec(it.scene, spec, kind, rng)
            if foil is not None:
                images.append(img)
                pos_texts.append(c)
                flip_texts.append(render_caption(foil))
                kinds.append(kind)
        t = SIMPLE_TEMPLATES[i % len(SIMPLE_TEMPLATES)]
        inv_images.append(img)
        inv_a.append(it.captions[0])
        inv_b.append(t.format(c=it.captions[0]))
    s_pos = _sim(scorer, images, pos_texts)
    s_flip = _sim(scorer, images, flip_texts)
    out: dict[str, float] = {}
    wins = s_pos > s_flip
    for kind in FLIP_KINDS:
        mask = np.array([k == kind for k in kinds])
        out[f"PR_{kind}"] = float(wins[mask].mean())
        out[f"n_{kind}"] = float(mask.sum())
    gap = _sim(scorer, inv_images, inv_a) - _sim(scorer, inv_images, inv_b)
    out["E_inv_templates"] = float(np.abs(gap).mean())
    # its standard error, so that two cards' E_inv can be compared beyond noise (tests/reference)
    out["se_E_inv_templates"] = float(np.abs(gap).std(ddof=1) / np.sqrt(len(gap))) if len(gap) > 1 else 0.0
    # random-caption control: the caption of the next item
    rand = [items[(i + 1) % n].captions[0] for i in range(n)]
    out["PR_random"] = float((_sim(scorer, inv_images, inv_a) > _sim(scorer, inv_images, rand)).mean())
    return out | count_pair_report(scorer, 2 * n, seed)


COUNTS = (1, 2, 3)
COUNT_PAIRS: tuple[tuple[int, int], ...] = tuple((a, b) for a in COUNTS for b in COUNTS if a != b)


def count_pair_report(scorer: Any, n: int = 400, seed: int = EVAL_SEED) -> dict[str, float]:
    """PR (LGIP Eq. 5) of number flips per (true -> flipped) count pair on held-out one-group scenes whose
    count is uniform over 1-3: each scene's canonical caption against the same caption with each other
    count. The world's own mix is 60% singles, which hides a weak pair behind PR[number]."""
    images, pos_texts, flip_texts, pairs = [], [], [], []
    for i in range(n):
        rng = item_rng("eval-count", seed, i)
        scene = sample_scene(rng, n_groups=(1, 1), count_p=(1.0, 1.0, 1.0))
        spec = scene_spec(scene, with_background=False)
        img, c = render(scene), render_caption(spec)
        (m,) = spec.mentions
        for other in COUNTS:
            if other != m.count:
                images.append(img)
                pos_texts.append(c)
                flip_texts.append(render_caption(replace(spec, mentions=(replace(m, count=other),))))
                pairs.append((m.count, other))
    wins = _sim(scorer, images, pos_texts) > _sim(scorer, images, flip_texts)
    out: dict[str, float] = {}
    for a, b in COUNT_PAIRS:
        mask = np.array([p == (a, b) for p in pairs])
        out[f"PR_count_{a}to{b}"] = float(wins[mask].mean())
        out[f"n_count_{a}to{b}"] = float(mask.sum())
    return out


def _sim(scorer: Any, images: Sequence[Any], texts: Sequence[str]) -> np.ndarray:
    s = scorer.similarity(list(images), list(texts))
    return np.asarray(s.detach().cpu().numpy() if hasattr(s, "detach") else s, dtype=np.float64)


def model_report(model: Any, name: str, n: int) -> dict[str, float]:
    if name in CLIP_NAMES:
        return clip_report(model, n)
    return vlm_report(model, n)


SMOKE_N = 24  # items per task in the quick reproduction check of tests/world


def smoke_report(model: Any, name: str, n: int = SMOKE_N) -> dict[str, float]:
    """The first ``n`` held-out items per task: what the checkpoint tests recompute."""
    return model_report(model, name, n)


def record(name: str, n: int = 200, smoke_n: int = SMOKE_N) -> dict[str, Any]:
    """Evaluate ``fixtures/NAME`` and write ``fixtures/NAME/heldout.json`` (the model card's numbers)."""
    model = load_reference(name)
    data = {"eval_seed": EVAL_SEED, "n": n, "heldout": model_report(model, name, n),
            "smoke_n": smoke_n, "smoke": smoke_report(model, name, smoke_n)}
    (fixtures_root() / name / "heldout.json").write_text(json.dumps(data, indent=2))
    return data


def card_table(name: str) -> str:
    """Markdown rows for fixtures/README.md from ``training.json`` and ``heldout.json`` of one checkpoint."""
    folder = fixtures_root() / name
    train = json.loads((folder / "training.json").read_text())
    held = json.loads((folder / "heldout.json").read_text())
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    seconds = train.get("total_train_seconds", train["train_seconds"])  # all phases of a phased recipe
    rows = [f"| training time (s, {train.get('torch_threads')} threads) | {seconds} |",
            f"| size on disk | {size / 2**20:.2f} MiB |", f"| parameters | {train['params']:,} |",
            f"| seed | {train['phases'][0]['seed'] if train.get('phases') else train['seed']} |"]
    h = held["heldout"]
    for k, v in h.items():
        if k.startswith(("n_", "se_")):
            continue
        # "n_KIND" for flips per kind (clip), "n_METRIC" where a metric uses a subset, else items per task
        n = int(h.get("n_" + k.removeprefix("PR_"), h.get("n_" + k, held["n"])))
        rows.append(f"| {k} (n={n}) | {v:.3f} |")
    return "| quantity | value |\n|---|---|\n" + "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("name")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--record", action="store_true", help="write fixtures/NAME/heldout.json")
    ap.add_argument("--card", action="store_true", help="print the model-card table of NAME")
    args = ap.parse_args(argv)
    if args.card:
        print(card_table(args.name))
        return 0
    if args.record:
        res: dict[str, Any] = record(args.name, args.n)
    else:
        res = dict(model_report(load_reference(args.name), args.name, args.n))
    text = json.dumps(res, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
