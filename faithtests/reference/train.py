"""``faithtests train-reference NAME``: (re)train one reference checkpoint into ``fixtures/NAME``.

Public entry points (the CLI imports this module lazily):

- :func:`train_reference` ``(name, out, seed) -> Path`` trains and returns the checkpoint directory;

Recipes and their fixed hyper-parameters live in :data:`RECIPES`; the recipe text is in
``fixtures/README.md`` together with the measured training time and held-out accuracy. Torch uses two
threads (the reference machine has two cores); results are reproducible for a given seed, torch build
and thread count (``--threads``, default 2).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from faithtests.models.locations import writable_fixtures_root
from faithtests.reference.prompt_lock import RETRAIN, write_lock
from faithtests.reference.train_clip import train_clip
from faithtests.reference.train_omni import train_omni, train_omni_deaf
from faithtests.reference.train_vlm import TWIN_STEPS, VLM_PHASES, store_half, train_vlm

DEFAULT_SEED = 0


def _clip(out: Path, seed: int, colourblind: bool) -> dict[str, Any]:
    return train_clip(out, seed, colourblind=colourblind)


def _vlm(out: Path, seed: int, policy: str, from_phase: int = 1) -> dict[str, Any]:
    if policy == "faithful":
        # phase 1 from scratch, each later phase resumes the previous one on a fresh stream (seed + k);
        # from_phase k > 1 resumes the checkpoint at ``out`` as the result of phase k - 1 (its record kept)
        if not 1 <= from_phase <= len(VLM_PHASES):
            raise ValueError(f"--from-phase must be in 1..{len(VLM_PHASES)}, got {from_phase}")
        phases = [out.parent / f".{out.name}-phase{k + 1}" for k in range(len(VLM_PHASES) - 1)] + [out]
        metas: list[dict[str, Any]] = []
        if from_phase > 1:
            if not (out / "training.json").is_file():
                raise FileNotFoundError(f"--from-phase {from_phase} resumes {out}: it has no training.json")
            done = json.loads((out / "training.json").read_text())
            metas = [*done.pop("phases", []), done][: from_phase - 1]
            shutil.copytree(out, phases[from_phase - 2], dirs_exist_ok=True)
        for k, kwargs in enumerate(VLM_PHASES):
            if k < from_phase - 1:
                continue
            init = phases[k - 1] if k else None
            metas.append(train_vlm(phases[k], seed + k, init_from=init, **kwargs))
        for tmp in phases[:-1]:
            shutil.rmtree(tmp, ignore_errors=True)
        final = metas[-1]
        final["phases"] = metas[:-1]
        if from_phase > 1:
            final["resumed"] = (
                f"phases 1-{from_phase - 1} are the float16 checkpoint that was in {out.name}; "
                f"phases {from_phase}-{len(VLM_PHASES)} were trained on it (--from-phase)"
            )
        final["total_train_seconds"] = round(sum(float(m["train_seconds"]) for m in metas), 1)
        (out / "training.json").write_text(json.dumps(final, indent=2))
        store_half(out)
        return final
    base = out.parent / "vlm"
    if not (base / "config.json").is_file():
        raise FileNotFoundError(
            f"{out.name} is fine-tuned from the vlm checkpoint, which is missing at {base}; "
            "run `faithtests train-reference vlm` first"
        )
    # no clause/noun targets here: their heads are not saved, and fresh ones would pull on the decision
    # states that the twin should keep (only the answer policy changes)
    meta = train_vlm(out, seed, policy=policy, init_from=base, steps=TWIN_STEPS, truth_weight=0.0)
    store_half(out)
    return meta


RECIPES: dict[str, Callable[[Path, int, int], dict[str, Any]]] = {
    "clip": lambda out, seed, _: _clip(out, seed, colourblind=False),
    "clip-colorblind": lambda out, seed, _: _clip(out, seed, colourblind=True),
    "vlm": lambda out, seed, k: _vlm(out, seed, "faithful", k),
    "vlm-textbiased": lambda out, seed, _: _vlm(out, seed, "textbiased"),
    "vlm-positionbiased": lambda out, seed, _: _vlm(out, seed, "positionbiased"),
    "vlm-sameprior": lambda out, seed, _: _vlm(out, seed, "sameprior"),
    "vlm-diffblind": lambda out, seed, _: _vlm(out, seed, "diffblind"),
    "omni": lambda out, seed, k: train_omni(out, seed, k),
    "omni-deaf": lambda out, seed, _: train_omni_deaf(out, seed),
}


def train_reference(
    name: str, out: Path | None = None, seed: int = DEFAULT_SEED, from_phase: int = 1, threads: int = 2
) -> Path:
    """Train reference checkpoint ``name`` into ``out`` and return it. Default: ``NAME`` under
    ``$FAITHTESTS_FIXTURES`` or the checkout's ``fixtures/`` (an installed wheel needs ``out``)."""
    if name not in RECIPES:
        raise ValueError(f"unknown reference model {name!r}; expected one of {', '.join(RECIPES)}")
    target = out if out is not None else writable_fixtures_root() / name
    torch.set_num_threads(threads)
    if from_phase != 1 and name not in ("vlm", "omni"):
        raise ValueError("--from-phase applies to the phased vlm and omni recipes only")
    RECIPES[name](target, seed, from_phase)
    if name in RETRAIN:  # trained on the suites' prompts as they are now: the lock says so (prompt_lock.py)
        write_lock(target.parent, [name])
    return target


def _run(args: argparse.Namespace) -> int:
    path = train_reference(args.name, args.out, args.seed, args.from_phase, args.threads)
    print(f"trained {args.name} -> {path}")
    return 0


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", choices=sorted(RECIPES))
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="output directory (default: NAME in $FAITHTESTS_FIXTURES or checkout fixtures/)")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--from-phase", type=int, default=1, metavar="K",
                   help="vlm and omni only: resume the checkpoint in the output directory as the result "
                        "of phase (omni: stage) K-1 and train K.. (default 1: from scratch; omni: K >= 4)")
    p.add_argument("--threads", type=int, default=2, metavar="N",
                   help="torch threads (default 2, the reference machine's cores; on a machine shared with "
                        "other jobs 1 avoids OpenMP waits: 8x faster per step under a load of 12). Results "
                        "are reproducible per seed, torch build and thread count (training.json records it)")


def main(argv: Sequence[str] | None = None) -> int:
    """``faithtests train-reference NAME [--out DIR] [--seed N]`` (the core CLI passes the arguments
    after the subcommand name)."""
    parser = argparse.ArgumentParser(prog="faithtests train-reference",
                                     description="Retrain a reference checkpoint of the world.")
    _add_arguments(parser)
    return _run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
